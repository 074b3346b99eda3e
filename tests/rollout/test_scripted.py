"""The heuristic search agent with env.citations on: its answer cites the sentence hits of the
paragraphs it read, every one valid; off, its answer is as it always was."""

from __future__ import annotations

from grasp.env.environment import EnvConfig, RetrievalEnvironment
from grasp.rollout.scripted import HeuristicSearchPolicy
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
