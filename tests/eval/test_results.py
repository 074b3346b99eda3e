"""results.json as types: every committed file reads back and writes out byte for byte; older
files lack the newer fields, which read as None; a key no field names is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grasp.eval.results import (
    DatasetEvaluation,
    DatasetResults,
    EvaluationResults,
    Interval,
    MacroResults,
    PooledResults,
    RolloutTime,
    Summary,
)
from grasp.eval.summary import EpisodeScores, overall_summary, summarize
from grasp.paths import REPO_ROOT

COMMITTED = sorted((REPO_ROOT / "results").glob("**/results.json"))


def _kind(data: dict) -> type:
    """Each evaluation's results.json (a training run's top level is not one)."""
    return EvaluationResults if "overall" in data else DatasetEvaluation


def _evaluations() -> list[Path]:
    return [p for p in COMMITTED if "experiment" not in json.loads(p.read_text())]


def test_the_committed_results_are_there():
    names = {p.relative_to(REPO_ROOT).as_posix() for p in _evaluations()}
    assert "results/baselines/hf/direct/results.json" in names
    assert "results/baselines/hf/direct/hotpotqa/results.json" in names
    assert "results/cpu_grasp/eval_after/results.json" in names


@pytest.mark.parametrize("path", _evaluations(), ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_a_committed_results_file_reads_back_and_writes_out_byte_for_byte(path):
    text = path.read_text()
    data = json.loads(text)
    results = _kind(data).from_json(data)
    assert results.to_json() == data
    assert json.dumps(results.to_json(), indent=2, default=str) == text


def test_a_training_runs_before_and_after_are_evaluations():
    run = json.loads((REPO_ROOT / "results" / "cpu_grasp" / "results.json").read_text())
    for stage in ("before", "after"):
        evaluation = DatasetEvaluation.from_json(run[stage])
        assert evaluation.to_json() == run[stage]
        assert isinstance(evaluation.results.rollout_time_s, RolloutTime)


def test_fields_added_later_read_as_none_and_stay_out_of_the_json():
    path = REPO_ROOT / "results" / "baselines" / "hf" / "direct" / "results.json"
    data = json.loads(path.read_text())
    assert "generation_errors" not in data["datasets"]["hotpotqa"]  # written before they were
    results = EvaluationResults.from_json(data)
    hotpotqa = results.datasets["hotpotqa"]
    assert hotpotqa.generation_errors is None and hotpotqa.repeated_lines_dropped is None
    assert hotpotqa.token_episodes is None and results.overall.pooled.token_episodes is None
    assert hotpotqa.ladder is None and results.overall.pooled.ladder is None
    for name in ("em_comparison", "em_other", "containment", "comparison_episodes"):
        assert getattr(hotpotqa, name) is None and getattr(results.overall.pooled, name) is None
    assert hotpotqa.reads_run_per_episode is None and hotpotqa.reads_refused_per_episode is None
    assert "em_comparison" not in results.overall.macro.means
    assert isinstance(hotpotqa.ci["em"], Interval)
    assert hotpotqa.ci["em"].low <= hotpotqa.em <= hotpotqa.ci["em"].high
    assert isinstance(results.overall.macro.means["em"], Interval)
    assert "generation_errors" not in results.to_json()["datasets"]["hotpotqa"]
    assert "ladder" not in results.to_json()["datasets"]["hotpotqa"]


def test_an_unknown_or_missing_key_is_refused():
    path = REPO_ROOT / "results" / "baselines" / "hf" / "direct" / "hotpotqa" / "results.json"
    data = json.loads(path.read_text())
    with pytest.raises(ValueError, match=r"DatasetResults: unknown keys \['em_typo'\]"):
        DatasetEvaluation.from_json({**data, "em_typo": 0.5})
    del data["episodes"]
    with pytest.raises(ValueError, match=r"DatasetResults: missing keys \['episodes'\]"):
        DatasetEvaluation.from_json(data)


def test_summaries_round_trip_and_keep_results_json_order(trajectory):
    one = [trajectory("a#0", "Rome", ("Rome",), {1}, semantic={1})]
    two = [trajectory("b#0", "Oslo", ("Rome",), {1}, dataset="musique")]
    summary = summarize(one)
    assert Summary.from_json(summary.to_json()) == summary
    assert list(summary.to_json())[:4] == ["em", "f1", "jd", "recall"]
    assert summary.to_json()["ci"]["em"] == {"mean": 1.0, "low": 1.0, "high": 1.0, "n": 1}
    overall = overall_summary(
        {"hotpotqa": (one, EpisodeScores()), "musique": (two, EpisodeScores())}
    )
    macro = overall.macro.to_json()
    assert list(macro)[-1] == "datasets" and macro["jd"] == "not computed"
    assert MacroResults.from_json(macro) == overall.macro


def test_pooled_results_sum_the_datasets_seconds_and_questions(trajectory):
    summary = summarize([trajectory("a#0", "Rome", ("Rome",), {1})])

    def dataset(wall: float, timed: int) -> DatasetResults:
        return DatasetResults(
            **summary.summary_fields(),
            scoring_time_s=0.1,
            wall_time_s=wall,
            wall_time_per_question_s=wall / timed,
            rollout_time_s=RolloutTime(wall, 0.0, 0.0),
            questions=4,
            questions_rolled_out=1,
            questions_timed=timed,
            rollout_runs=1,
            rollout_code=[],
        )

    pooled = PooledResults.of(summary, [dataset(2.0, 4), dataset(6.0, 2)])
    assert (pooled.wall_time_s, pooled.questions_timed, pooled.questions_rolled_out) == (8.0, 6, 2)
    assert pooled.wall_time_per_question_s == 8.0 / 6
    assert list(pooled.to_json())[-4:] == [
        "wall_time_s",
        "questions_rolled_out",
        "questions_timed",
        "wall_time_per_question_s",
    ]
    assert PooledResults.of(summary, []).wall_time_per_question_s == "not recorded"


def test_the_ladder_is_written_after_the_cost_and_read_back(trajectory):
    summary = summarize([trajectory("a#0", "Rome", ("Rome",), {1})])
    ladder = {"k": 5, "retrieval": {}, "failures": {"none": 1.0}, "episodes": 1}
    dataset = DatasetResults(
        **summary.summary_fields(),
        scoring_time_s=0.1,
        wall_time_s=1.0,
        wall_time_per_question_s=1.0,
        rollout_time_s=RolloutTime(1.0, 0.0, 0.0),
        questions=1,
        questions_rolled_out=1,
        questions_timed=1,
        rollout_runs=1,
        rollout_code=[],
        ladder=ladder,
    )
    data = dataset.to_json()
    assert list(data)[-1] == "ladder" and data["ladder"] == ladder
    assert DatasetResults.from_json(data) == dataset
    pooled = PooledResults.of(summary, [dataset], ladder)
    assert list(pooled.to_json())[-1] == "ladder"
    assert PooledResults.from_json(pooled.to_json()) == pooled
    assert "ladder" not in PooledResults.of(summary, [dataset]).to_json()
