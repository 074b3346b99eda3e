"""What a policy did, counted from hand-built trajectories: hops (a query that is not the
question) and whether they found new gold, reads of hit [1], answer sources, answer in
evidence, and questions with a quote against the others."""

from __future__ import annotations

import pytest

from grasp.env.episode import TurnRecord
from grasp.eval.behaviour import behaviour, copies_question, markdown
from grasp.types import ParseErrorKind


def search(query: str, paragraphs: list[int], shown: str, tool: str = "semantic_search"):
    hits = [{"sentence_id": p * 10, "paragraph_id": p, "score": 1.0} for p in paragraphs]
    call = {"name": tool, "arguments": {"query": query}}
    return TurnRecord(text="", call=call, observation=shown, hits=hits)


def read(hit: int, title: str, text: str):
    call = {"name": "read_paragraph", "arguments": {"hit": hit}}
    observation = f"read_paragraph [{hit}] {title}:\n{text}"
    return TurnRecord(text="", call=call, observation=observation, read={"hit": hit})


def answer(text: str):
    return TurnRecord(text="", call={"name": "answer", "arguments": {"answer": text}})


QUESTION = "question {}?"  # the conftest's trajectories ask "question <id>?"


@pytest.mark.parametrize(
    ("query", "question", "copies"),
    [
        ("Who wrote Lulu", "Who wrote 'Lulu'?", True),
        ("who wrote", "Who wrote 'Lulu'?", True),  # a truncation
        ("Alban Berg opera Lulu", "Who wrote 'Lulu'?", False),
        ("", "Who wrote 'Lulu'?", True),
    ],
)
def test_a_near_copy_of_the_question_is_no_hop(query, question, copies):
    assert copies_question(query, question) is copies


def test_behaviour_counts_hops_reads_answer_sources_and_quotes(trajectory):
    hop = [
        search("question q1", [1, 7], "[1] Alpha | alpha text"),
        read(2, "Beta", "Beta was written by Gamma."),
        search("Gamma the writer", [2, 7], "[1] Gamma | Gamma text"),  # new gold 2
        answer("Gamma"),
    ]
    copy = [
        search("question q2", [3], "[1] Delta | delta text"),
        search("Question Q2", [3], "[1] Delta | delta text", "keyword_search"),  # a copy
        read(1, "Delta", "Delta lies near Epsilon."),
        answer("Epsilon"),  # in the read text, not a title
    ]
    wasted = [
        search("Is Zeta older than Eta", [5], "[1] Zeta | zeta text"),
        search("unrelated words here", [6], "[1] Eta | eta text"),  # a hop, no new gold
        TurnRecord(text="{", error=ParseErrorKind.MALFORMED_JSON),
    ]
    episodes = [
        trajectory("q1#0", "Gamma", ("Gamma",), {1, 2}, semantic={1, 7, 2}, turns=hop),
        trajectory("q2#0", "Epsilon", ("Epsilon",), {3}, semantic={3}, turns=copy),
        trajectory("q3#0", None, ("yes",), {5}, semantic={5, 6}, turns=wasted),
    ]
    episodes[2].question = 'Is "Zeta" older than Eta?'
    found = behaviour(episodes)
    assert (found.episodes, found.searches_per_episode) == (3, 6 / 3)
    assert (found.hop_episodes, found.hops, found.hops_with_new_gold) == (2, 2, 1)
    assert [h.query for h in found.hop_queries] == ["Gamma the writer", "unrelated words here"]
    assert (found.reads, found.reads_of_hit_1, found.reads_per_episode) == (2, 1, 2 / 3)
    assert found.answered == 2
    assert found.answer_sources == {"shown_title": 1, "shown_text": 1}
    # q3's gold answer is "yes": left out; q1's "Gamma" and q2's "Epsilon" were shown.
    assert (found.answer_in_evidence, found.answer_in_evidence_questions) == (1.0, 2)
    assert found.quotes["with_quote"] == {
        "episodes": 1,
        "answered": 0.0,
        "parse_errors_per_turn": 1 / 3,
    }
    assert found.quotes["without"] == {"episodes": 2, "answered": 1.0, "parse_errors_per_turn": 0.0}
    printed = markdown("run", found, examples=1)
    assert "episodes that hop 2 (66.7%)" in printed and "Gamma the writer" in printed
    assert "unrelated words" not in printed  # one example asked for
    with pytest.raises(ValueError, match="no episodes"):
        behaviour([])
