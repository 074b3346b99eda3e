"""EpisodeView: what a baseline reads back from the conversation, on real env messages."""

from __future__ import annotations

import pytest

from grasp.baselines.episode import EpisodeView, Passage, note_line, parse_hits, unique
from grasp.env.environment import EnvConfig, RetrievalEnvironment
from grasp.env.tools import format_hits
from grasp.rollout.scripted import tool_call_text
from grasp.types import Hit, Retriever, ToolName

HITS = [
    Hit(7, 31, 'Jaws (film) "1975"', "It was directed by Steven Spielberg.", 0.9, Retriever.DENSE, 0),
    Hit(2, 4, "Auckland", "Hillary was born in Auckland in 1919.", 0.5, Retriever.DENSE, 1),
]  # fmt: skip


def test_sentence_hits_round_trip_through_the_observation_format():
    text = format_hits(ToolName.SEMANTIC_SEARCH, "q", HITS, max_chars=2000) + "\n[3 turns left]"
    assert parse_hits(text, ToolName.SEMANTIC_SEARCH) == [
        Passage(7, 31, 'Jaws (film) "1975"', "It was directed by Steven Spielberg.",
                ToolName.SEMANTIC_SEARCH, 0),
        Passage(2, 4, "Auckland", "Hillary was born in Auckland in 1919.",
                ToolName.SEMANTIC_SEARCH, 1),
    ]  # fmt: skip


def test_paragraph_hits_round_trip_and_other_tools_have_none():
    hits = [Hit(5, None, "Warsaw", "Warsaw is the capital. It is big.", 1.0, Retriever.BM25, 0)]
    text = format_hits(ToolName.KEYWORD_SEARCH, "q", hits, max_chars=2000)
    [passage] = parse_hits(text, ToolName.KEYWORD_SEARCH)
    assert (passage.paragraph_id, passage.sentence_id, passage.text) == (
        5,
        None,
        "Warsaw is the capital. It is big.",
    )
    assert parse_hits(text, ToolName.READ_PARAGRAPH) == []
    assert parse_hits('keyword_search("q"): no results. Try other words.', ToolName.SEARCH) == []


def test_view_of_a_real_episode_after_a_demonstration(tiny_index, tiny_questions):
    env = RetrievalEnvironment(tiny_index, EnvConfig(top_k=2, turn_budget=5, demonstration=True))
    question = tiny_questions[1]
    episode = env.reset(question)
    first = "Some thought.\n" + note_line("route", "multi") + "\n"
    env.step([episode], [first + tool_call_text("semantic_search", query=question.question)])
    env.step([episode], [tool_call_text("keyword_search", query="Hillary Auckland")])
    view = EpisodeView.from_messages(episode.messages, turn_budget=99)
    assert view.question == question.question
    assert (view.turn_budget, view.turn, view.turns_left) == (5, 2, 3)
    assert [t.tool for t in view.turns] == [ToolName.SEMANTIC_SEARCH, ToolName.KEYWORD_SEARCH]
    assert view.turns[1].arguments == {"query": "Hillary Auckland"}
    assert view.notes == {"route": "multi"} and view.thoughts == ["Some thought."]
    recorded = [(h["paragraph_id"], h["sentence_id"]) for t in episode.turns for h in t.hits]
    seen = [(p.paragraph_id, p.sentence_id) for t in view.turns for p in t.passages]
    assert seen == recorded and len(seen) == 4
    assert [p.key for p in view.passages()] == list(dict.fromkeys(recorded))
    assert len(view.passages(limit=1)) == 1
    for turn in view.turns:
        for passage in turn.passages:
            assert passage.text == tiny_index.corpus.sentence(passage.sentence_id)


def test_unique_keeps_the_first_of_each_key():
    a = Passage(1, 2, "t", "x", ToolName.SEMANTIC_SEARCH, 0)
    b = Passage(1, 2, "t", "x", ToolName.KEYWORD_SEARCH, 3)
    c = Passage(1, None, "t", "x y", ToolName.KEYWORD_SEARCH, 0)
    assert unique([a, b, c]) == [a, c]


def test_errors():
    with pytest.raises(ValueError, match="no user message"):
        EpisodeView.from_messages([{"role": "system", "content": "s"}], turn_budget=3)
    with pytest.raises(ValueError, match="note key"):
        note_line("Route", "x")
    view = EpisodeView.from_messages([{"role": "user", "content": "Question: Who?"}], 4)
    assert (view.question, view.turn_budget, view.turns) == ("Who?", 4, [])
