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
    read_calls,
    summarize,
)
from grasp.types import ParseErrorKind, RefusalKind


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


@pytest.fixture
def typed(trajectory):
    """Six episodes with known EM and containment; the question types by question id."""
    episodes = [
        trajectory("c1#0", "Yes", ("yes",), {1}),  # EM 1, contains
        trajectory("c2#0", "Film A", ("Film B",), {1}),  # EM 0
        trajectory("o1#0", "Paris", ("Paris",), {1}),  # EM 1, contains
        trajectory("o2#0", "It was Paris, France", ("Paris",), {1}),  # EM 0, contains
        trajectory("o3#0", None, ("Rome",), {1}, stop_reason="turn_budget"),  # EM 0
        trajectory("u1#0", "Oslo", ("Oslo",), {1}),  # EM 1, contains; its type unknown
    ]
    types = {
        "c1": "comparison",  # HotpotQA
        "c2": "bridge_comparison",  # 2WikiMultiHopQA
        "o1": "bridge",
        "o2": "2hop",  # MuSiQue
        "o3": "compositional",
    }
    return episodes, types


def test_em_is_split_into_comparison_and_other_questions(typed):
    episodes, types = typed
    scores = EpisodeScores.typed(episodes, types)
    assert scores.question_types == {f"{q}#0": kind for q, kind in types.items()}
    values = metric_values(episodes, scores)
    assert values["em_comparison"] == [1.0, 0.0]
    assert values["em_other"] == [1.0, 0.0, 0.0]
    r = summarize(episodes, scores)
    assert r.em == 0.5
    assert (r.em_comparison, r.comparison_episodes) == (0.5, 2)
    assert (r.em_other, r.other_episodes) == (pytest.approx(1 / 3), 3)  # u1 is in neither
    assert (r.ci["em_comparison"].n, r.ci["em_other"].n) == (2, 3)
    assert r.ci["em_comparison"].low <= 0.5 <= r.ci["em_comparison"].high
    assert r.containment == pytest.approx(4 / 6)
    assert r.ci["containment"].n == 6
    data = r.to_json()
    assert (data["em_comparison"], data["comparison_episodes"], data["other_episodes"]) == (
        0.5,
        2,
        3,
    )


def test_without_question_types_em_by_kind_is_not_available(typed):
    episodes, _ = typed
    r = summarize(episodes)
    assert r.em_comparison == r.em_other == NOT_AVAILABLE
    assert r.comparison_episodes is None and r.other_episodes is None
    assert "em_comparison" not in r.ci and "comparison_episodes" not in r.to_json()
    assert r.containment == pytest.approx(4 / 6)  # containment needs no type


def test_only_other_questions_leave_em_comparison_not_available(trajectory):
    musique = [trajectory("m1#0", "Rome", ("Rome",), {1}, dataset="musique")]
    r = summarize(musique, EpisodeScores.typed(musique, {"m1": "2hop"}))
    assert (r.em_comparison, r.comparison_episodes) == (NOT_AVAILABLE, 0)
    assert (r.em_other, r.other_episodes) == (1.0, 1)


def test_macro_em_by_kind_averages_the_datasets_that_have_that_kind(trajectory):
    hotpot = [
        trajectory("h1#0", "yes", ("yes",), {1}),
        trajectory("h2#0", "Oslo", ("Rome",), {1}),
    ]
    musique = [trajectory("m1#0", "Rome", ("Rome",), {1}, dataset="musique")]
    overall = overall_summary(
        {
            "hotpotqa": (hotpot, EpisodeScores.typed(hotpot, {"h1": "comparison", "h2": "bridge"})),
            "musique": (musique, EpisodeScores.typed(musique, {"m1": "3hop1"})),
        }
    )
    assert (overall.pooled.em_comparison, overall.pooled.comparison_episodes) == (1.0, 1)
    assert (overall.pooled.em_other, overall.pooled.other_episodes) == (0.5, 2)
    macro = overall.macro
    assert macro.means["em_comparison"].mean == 1.0 and macro.datasets["em_comparison"] == [
        "hotpotqa"
    ]
    assert macro.means["em_other"].mean == 0.5  # (0 + 1) / 2
    assert macro.datasets["em_other"] == ["hotpotqa", "musique"]
    assert macro.means["containment"].mean == 0.75  # (1/2 + 1) / 2


def _read(error: bool = False) -> TurnRecord:
    call = {"name": "read_paragraph", "arguments": {"paragraph_id": 3}}
    if error:
        return TurnRecord(text="", call=call, error=RefusalKind.INVALID_CALL, observation="Error")
    return TurnRecord(text="", call=call, observation="Paragraph 3 ...")


def test_reads_that_ran_are_counted_apart_from_refused_read_calls(trajectory):
    search = TurnRecord(text="", call={"name": "semantic_search", "arguments": {"query": "q"}})
    unparsed = TurnRecord(text="", error=ParseErrorKind.MALFORMED_JSON)  # no read, no call
    episodes = [
        trajectory(
            "a#0",
            "x",
            ("x",),
            {3},
            read={3},
            turns=[search, _read(), _read(error=True), _read(), unparsed],
            tool_calls={"semantic_search": 1, "read_paragraph": 3},
            errors={"invalid_call": 1, "malformed_json": 1},
        ),
        trajectory(
            "b#0",
            "x",
            ("x",),
            {3},
            turns=[_read(error=True), _read(error=True)],
            tool_calls={"read_paragraph": 2},
            errors={"invalid_call": 2},
        ),
        trajectory("c#0", "x", ("x",), {3}, turns=[search], tool_calls={"semantic_search": 1}),
    ]
    assert [read_calls(t) for t in episodes] == [(2, 1), (0, 2), (0, 0)]
    r = summarize(episodes)
    assert r.reads_run_per_episode == pytest.approx(2 / 3)
    assert r.reads_refused_per_episode == 1.0
    assert r.tool_calls_per_episode["read_paragraph"] == pytest.approx(5 / 3)  # both kinds
    assert r.ci["reads_run_per_episode"].n == 3
    assert r.ci["reads_refused_per_episode"].mean == 1.0
