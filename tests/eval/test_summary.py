"""Summaries of hand-built trajectories: exact EM, F1, JD, recall, tool use, pooled and macro."""

from __future__ import annotations

import dataclasses

import pytest

from grasp.env.episode import TurnRecord
from grasp.eval.judge import JudgeResult, Verdict
from grasp.eval.summary import (
    NO_VERDICTS,
    NOT_AVAILABLE,
    NOT_COMPUTED,
    EpisodeScores,
    metric_values,
    overall_summary,
    summarize,
)


def _turns(n: int) -> list[TurnRecord]:
    return [TurnRecord(text="") for _ in range(n)]


@pytest.fixture
def three(trajectory):
    """Three episodes whose metrics are worked out by hand in the tests."""
    return [
        # EM 1 (articles dropped), F1 1; gold {1, 2}: hit 1 by search, read 2.
        trajectory(
            "a#0",
            "The Eiffel Tower",
            ("Eiffel Tower",),
            {1, 2},
            semantic={1},
            keyword={5},
            read={2},
            turns=_turns(4),
            tool_calls={
                "semantic_search": 1,
                "keyword_search": 1,
                "read_paragraph": 1,
                "answer": 1,
            },
        ),
        # Best alias "Paris": precision 1/2, recall 1 -> F1 2/3; EM 0. Gold {3, 4}: 3 found.
        trajectory(
            "b#0",
            "Paris, France",
            ("Lyon", "Paris"),
            {3, 4},
            semantic={3},
            turns=_turns(3),
            tool_calls={"semantic_search": 1, "answer": 1},
            errors={"malformed_json": 1},
        ),
        # No answer; nothing found.
        trajectory(
            "c#0",
            None,
            ("Rome",),
            {7},
            turns=_turns(6),
            tool_calls={"keyword_search": 5},
            errors={"invalid_call": 1},
            stop_reason="turn_budget",
        ),
    ]


def test_answer_and_retrieval_means_are_exact(three):
    r = summarize(three)
    assert r.em == pytest.approx(1 / 3)
    assert r.f1 == pytest.approx((1 + 2 / 3 + 0) / 3)
    assert r.recall == pytest.approx((1 + 0.5 + 0) / 3)
    assert r.recall_all_gold == pytest.approx(1 / 3)
    assert r.read_recall == pytest.approx(0.5 / 3)
    assert r.read_recall_all_gold == 0.0
    assert list(r.to_json())[:4] == ["em", "f1", "jd", "recall"]  # results.json's order


def test_tool_use_errors_stops_and_turns_are_exact(three):
    r = summarize(three)
    assert r.tool_calls_per_episode == {
        "answer": pytest.approx(2 / 3),
        "keyword_search": pytest.approx(2.0),
        "read_paragraph": pytest.approx(1 / 3),
        "semantic_search": pytest.approx(2 / 3),
    }
    assert r.parse_error_rate == pytest.approx(1 / 13)  # 13 turns, one malformed
    assert r.invalid_call_rate == pytest.approx(1 / 13)
    assert r.stop_reasons == {
        "answered": pytest.approx(2 / 3),
        "turn_budget": pytest.approx(1 / 3),
    }
    assert r.turns_per_episode == pytest.approx(13 / 3)
    assert r.episodes == 3


def test_every_mean_has_an_interval_that_contains_it(three):
    r = summarize(three)
    for name in ("em", "f1", "recall", "recall_all_gold", "read_recall", "read_recall_all_gold"):
        interval = r.ci[name]
        assert interval.low <= getattr(r, name) <= interval.high
        assert interval.mean == pytest.approx(getattr(r, name))
        assert interval.n == 3
    assert r.ci["turns_per_episode"].mean == pytest.approx(13 / 3)
    assert r.ci["read_recall_all_gold"].to_json() == {"mean": 0.0, "low": 0.0, "high": 0.0, "n": 3}


def test_without_judge_jd_is_the_string_not_computed(three):
    r = summarize(three)
    assert r.jd == NOT_COMPUTED == "not computed"
    assert "jd" not in r.ci and r.judge is None


def test_jd_leaves_unparseable_and_errors_out_and_counts_them(three):
    verdicts = {
        "a#0": JudgeResult(Verdict.CORRECT, "yes"),
        "b#0": JudgeResult(Verdict.UNPARSEABLE, "I think so"),
        "c#0": JudgeResult(Verdict.NO_ANSWER),
    }
    r = summarize(three, EpisodeScores(verdicts=verdicts))
    assert r.jd == 0.5  # yes and no-answer count; the unparseable reply does not
    assert r.ci["jd"].n == 2
    assert r.judge == {"correct": 1, "wrong": 0, "no_answer": 1, "unparseable": 1, "error": 0}
    verdicts["a#0"] = JudgeResult(Verdict.ERROR, error="HTTP 400")
    verdicts["c#0"] = JudgeResult(Verdict.UNPARSEABLE, "hmm")
    assert summarize(three, EpisodeScores(verdicts=verdicts)).jd == NO_VERDICTS


def test_supporting_sentence_recall_averages_the_episodes_that_have_it(three):
    scores = EpisodeScores(
        supporting_recall={"a#0": 0.5, "c#0": 1.0},
        supporting_all_found={"a#0": 0.0, "c#0": 1.0},
    )
    r = summarize(three, scores)
    assert r.supporting_sentence_recall == 0.75
    assert r.supporting_sentence_all_found == 0.5
    assert r.ci["supporting_sentence_recall"].n == 2
    assert r.supporting_sentence_episodes == 2
    plain = summarize(three)
    assert plain.supporting_sentence_recall == NOT_AVAILABLE == "not available"
    assert "supporting_sentence_recall" not in plain.ci


def test_pooled_weighs_questions_and_macro_weighs_datasets(trajectory, three):
    other = [
        trajectory("x#0", "Rome", ("Rome",), {1}, semantic={1}, dataset="musique"),
        trajectory("y#0", "Rome", ("Rome",), {1}, dataset="musique"),
    ]
    sentence = EpisodeScores(supporting_recall={"a#0": 0.5}, supporting_all_found={"a#0": 0.0})
    overall = overall_summary({"hotpotqa": (three, sentence), "musique": (other, EpisodeScores())})
    pooled, macro = overall.pooled, overall.macro
    assert pooled.episodes == 5
    assert pooled.em == pytest.approx(3 / 5)
    assert macro.means["em"].mean == pytest.approx((1 / 3 + 1) / 2)
    assert macro.means["recall"].mean == pytest.approx((0.5 + 0.5) / 2)
    assert macro.means["em"].low <= macro.means["em"].mean <= macro.means["em"].high
    assert macro.means["supporting_sentence_recall"].mean == 0.5
    assert macro.datasets["supporting_sentence_recall"] == ["hotpotqa"]
    assert macro.datasets["em"] == ["hotpotqa", "musique"]
    assert pooled.jd == macro.means["jd"] == NOT_COMPUTED


def test_macro_jd_needs_every_dataset_judged(trajectory):
    one = [trajectory("a#0", "Rome", ("Rome",), {1})]
    two = [trajectory("b#0", "Oslo", ("Rome",), {1}, dataset="musique")]
    judged = EpisodeScores(verdicts={"a#0": JudgeResult(Verdict.CORRECT, "yes")})
    overall = overall_summary({"hotpotqa": (one, judged), "musique": (two, EpisodeScores())})
    assert overall.pooled.jd == overall.macro.means["jd"] == NOT_COMPUTED
    both = EpisodeScores(verdicts={"b#0": JudgeResult(Verdict.WRONG, "no")})
    overall = overall_summary({"hotpotqa": (one, judged), "musique": (two, both)})
    assert overall.pooled.jd == 0.5 and overall.macro.means["jd"].mean == 0.5


def test_pooling_refuses_repeated_episode_ids(trajectory):
    one = [trajectory("a#0", "Rome", ("Rome",), {1})]
    with pytest.raises(ValueError, match="a#0"):
        overall_summary({"hotpotqa": (one, EpisodeScores()), "musique": (one, EpisodeScores())})


def test_metric_values_lists_only_what_episodes_have(three):
    values = metric_values(three)
    assert values["em"] == [1.0, 0.0, 0.0]
    assert values["jd"] == [] and values["supporting_sentence_recall"] == []
    with pytest.raises(ValueError, match="no trajectories"):
        summarize([])


def test_token_counts_no_episode_made_are_not_recorded(trajectory):
    """Issue 18 §4: a policy without token ids records no counts, which is not 0 tokens."""
    plain = [trajectory("a#0", "Rome", ("Rome",), {1}), trajectory("b#0", "Oslo", ("Oslo",), {2})]
    results = summarize(plain)
    assert results.token_episodes == 0
    for key in ("generated", "completion", "prompt"):
        assert getattr(results, f"{key}_tokens_per_episode") == "not recorded"
    counted = dataclasses.replace(
        plain[0], prompt_tokens=800, completion_tokens=60, generated_tokens=20
    )
    mixed = summarize([counted, plain[1]])  # a mean over the episode that counted
    assert mixed.token_episodes == 1
    assert (
        mixed.generated_tokens_per_episode,
        mixed.completion_tokens_per_episode,
        mixed.prompt_tokens_per_episode,
    ) == (20.0, 60.0, 800.0)
