"""The heuristic search agent with env.citations on: its answer cites the sentence hits of the
paragraphs it read, every one valid; off, its answer is as it always was. Plans with a bridge
search reformulate the query for the next hop."""

from __future__ import annotations

import pytest

from grasp.env.environment import EnvConfig, RetrievalEnvironment
from grasp.rollout.scripted import HeuristicSearchPolicy, bridge_query, check_plan
from grasp.train.warm_start import adapt_plan
from grasp.types import StopReason


def _play(env, question, policy):
    """The episode played to its end, one turn at a time, as the rollout would."""
    episode = env.reset(question)
    while not episode.done:
        env.step([episode], [policy.next_turn(episode.messages)])
    return episode


def _answer_arguments(episode) -> dict:
    call = episode.turns[-1].call
    assert call["name"] == "answer"
    return call["arguments"]


def test_the_answer_cites_the_sentence_hits_of_the_paragraphs_read(tiny_index, tiny_questions):
    env = RetrievalEnvironment(tiny_index, EnvConfig(top_k=2, turn_budget=6, citations=True))
    for question in tiny_questions:
        episode = _play(env, question, HeuristicSearchPolicy(reads=2))
        assert episode.stop_reason is StopReason.ANSWERED
        hits = [h for turn in episode.turns for h in turn.hits]
        expected = list(
            dict.fromkeys(
                h["sentence_id"] for h in hits if h["paragraph_id"] in episode.read_paragraph_ids
            )
        )
        assert expected, "the agent read the paragraph of a sentence hit"
        assert _answer_arguments(episode)["citations"] == expected
        assert episode.citations.sentence_ids == tuple(expected)
        assert episode.citations.invalid == 0


def test_a_plan_without_reads_cites_the_top_sentence_hit(tiny_index, tiny_questions):
    env = RetrievalEnvironment(tiny_index, EnvConfig(top_k=2, turn_budget=6, citations=True))
    policy = HeuristicSearchPolicy(plan=["keyword_search", "answer"])
    episode = _play(env, tiny_questions[0], policy)
    top = episode.turns[0].hits[0]["sentence_id"]
    assert episode.citations.sentence_ids == (top,) and episode.citations.invalid == 0


def test_without_the_option_the_answer_cites_nothing(tiny_index, tiny_questions):
    env = RetrievalEnvironment(tiny_index, EnvConfig(top_k=2, turn_budget=6))
    episode = _play(env, tiny_questions[0], HeuristicSearchPolicy(reads=2))
    assert episode.stop_reason is StopReason.ANSWERED
    assert list(_answer_arguments(episode)) == ["answer"] and episode.citations is None


def test_a_bridge_search_queries_the_read_title_and_the_questions_other_words():
    hits = [("1", "4", "Warsaw"), ("2", "5", "Vistula")]
    question = "Which river flows through the capital of Poland?"
    assert bridge_query(question, hits, read={"Vistula"}) == (
        "Vistula river flows through capital Poland"
    )
    assert bridge_query(question, hits, read=set()).startswith("Warsaw river")  # the top hit
    assert bridge_query("the of?", [], read=set()) == "the of?"  # nothing to add: the question


def test_a_plan_with_a_bridge_search_reformulates_and_the_rest_is_verbatim(
    tiny_index, tiny_questions
):
    env = RetrievalEnvironment(tiny_index, EnvConfig(top_k=2, turn_budget=6, hit_labels="handles"))
    plan = ["semantic_search", "read_paragraph", "keyword_search:bridge", "answer"]
    episode = _play(env, tiny_questions[0], HeuristicSearchPolicy(plan=plan))
    calls = [turn.call for turn in episode.turns]
    assert [c["name"] for c in calls] == [
        "semantic_search",
        "read_paragraph",
        "keyword_search",
        "answer",
    ]
    question = tiny_questions[0].question
    assert calls[0]["arguments"]["query"] == question
    read_title = tiny_index.corpus.title(episode.turns[1].read["paragraph_id"])
    bridged = calls[2]["arguments"]["query"]
    assert bridged != question and bridged.startswith(read_title)


@pytest.mark.parametrize("step", ["read_paragraph:bridge", "answer:bridge", "semantic_search:hop"])
def test_only_a_search_can_bridge(step):
    with pytest.raises(ValueError, match=r"unknown tool\(s\)"):
        check_plan([step, "answer"])


def test_adapting_a_plan_keeps_a_bridge_on_the_substitute_search():
    plan = ["semantic_search", "read_paragraph", "keyword_search:bridge", "answer"]
    assert adapt_plan(plan, ["semantic_search", "answer"]) == [
        "semantic_search",
        "answer",
    ]  # keyword's substitute is already called; the read is dropped
    assert adapt_plan(["keyword_search:bridge", "answer"], ["semantic_search", "answer"]) == [
        "semantic_search:bridge",
        "answer",
    ]
