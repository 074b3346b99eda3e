"""Loading run and evaluation directories, and what the report derives from them."""

from __future__ import annotations

import json
import shutil

import pytest
from report_fixture import EXPECTED_OUTCOMES, EXPECTED_PARSE_ERRORS, STEPS

from grasp.env.episode import TurnRecord
from grasp.eval.results import DatasetResults, EvaluationResults, Interval, PooledResults
from grasp.paths import REPO_ROOT
from grasp.report.load import (
    Outcome,
    RunDirectoryError,
    RunKind,
    load_run,
    metric_keys,
    outcome,
    parse_errors,
    read_results,
    recall,
    recall_by_turns,
    series,
)
from grasp.reward import RewardBreakdown
from grasp.rollout.trajectory import Trajectory
from grasp.types import StopReason


def test_a_training_run_loads_every_part(run_dir):
    run = load_run(run_dir)
    assert run.kind is RunKind.TRAINING
    assert run.notes == []
    assert run.config["experiment"] == "report_fixture"
    assert run.results is not None
    assert run.results.steps == STEPS and run.results.data == "tiny corpus"
    assert [e.key for e in run.evaluations] == ["eval_before", "eval_after"]
    assert [s.key for s in run.trajectory_sets] == ["eval_after", "eval_before", "step_2", "step_4"]
    assert [len(s.trajectories) for s in run.trajectory_sets] == [3, 3, 2, 2]
    assert [s.label for s in run.samples] == ["sample at step 2", "sample at step 4"]
    assert run.title == "report_fixture (run)"


def test_metrics_are_training_steps_only(run_dir):
    """TRL's closing train_runtime record has no reward and is not a step of the curves."""
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == STEPS + 1
    run = load_run(run_dir)
    assert [r["step"] for r in run.metrics] == [1, 2, 3, 4]
    assert series(run.metrics, "loss").values == pytest.approx([0.1, 0.05, 0.1 / 3, 0.025])
    assert series(run.metrics, "not/logged").steps == []


def test_step_rewards_match_the_evaluations_of_the_same_script(run_dir):
    """Steps 1-2 ran the eval_before script and steps 3-4 the eval_after one (G=2 copies)."""
    run = load_run(run_dir)
    before, after = (e.results.reward for e in run.evaluations)
    for key in ("reward/total", "reward/R_A", "reward/R_F"):
        expected = [before[key]] * 2 + [after[key]] * 2
        assert series(run.metrics, key).values == pytest.approx(expected, rel=1e-12)
    after_em = run.evaluations[1].results.em
    assert after_em == pytest.approx(1 / 3)
    assert series(run.metrics, "answer/em").values == pytest.approx([0, 0, 1 / 3, 1 / 3])


def test_tool_keys_in_first_seen_order(run_dir):
    run = load_run(run_dir)
    assert metric_keys(run.metrics, "tools/", "_per_episode") == [
        "tools/semantic_search_per_episode",
        "tools/keyword_search_per_episode",
        "tools/read_paragraph_per_episode",
        "tools/search_per_episode",
        "tools/answer_per_episode",
    ]


@pytest.mark.parametrize("key", ["eval_after", "eval_before"])
def test_outcomes_and_parse_errors_per_question(run_dir, key):
    evaluation = next(e for e in load_run(run_dir).evaluations if e.key == key)
    assert {t.question_id: outcome(t).value for t in evaluation.trajectories} == (
        EXPECTED_OUTCOMES[key]
    )
    assert {t.question_id: parse_errors(t) for t in evaluation.trajectories} == (
        EXPECTED_PARSE_ERRORS[key]
    )


def test_recall_of_a_trajectory_is_what_results_json_averages(run_dir):
    evaluation = load_run(run_dir).evaluations[1]
    mean = sum(recall(t) for t in evaluation.trajectories) / len(evaluation.trajectories)
    assert mean == pytest.approx(evaluation.results.recall, rel=1e-12)


def _reward(em: float, f1: float) -> RewardBreakdown:
    """A reward whose answer metrics are ``em`` and ``f1`` (the other terms 0)."""
    terms = {"R_A": f1, "R_R": 0.0, "R_S": 0.0, "R_E": 0.0, "R_F": 0.0, "R_N": 0.0}
    return RewardBreakdown(terms=terms, total=f1, em=em, f1=f1)


def _trajectory(turns_used: int, gold: list[int], found: list[int], **fields) -> Trajectory:
    base = dict(
        episode_id="q#0",
        question_id="q",
        dataset="hotpotqa",
        group_id=0,
        sample_index=0,
        question="?",
        gold_answers=["a"],
        gold_paragraph_ids=gold,
        turns=[],
        stop_reason=StopReason.ANSWERED,
        answer="a",
        turns_used=turns_used,
        turn_budget=6,
        evidence_ids={"semantic": found[:1], "keyword": [], "read": found[1:]},
        tool_calls={},
        errors={},
        reward=_reward(em=1.0, f1=1.0),
    )
    base.update(fields)
    return Trajectory(**base)


def test_recall_by_turns_groups_and_averages():
    trajectories = [
        _trajectory(3, [1, 2], [1, 2]),  # all gold
        _trajectory(3, [1, 2], [1, 9]),  # half
        _trajectory(1, [1, 2], []),  # nothing
        _trajectory(3, [4], [7]),  # nothing
    ]
    rows = recall_by_turns(trajectories)
    assert [(r.turns_used, r.episodes) for r in rows] == [(1, 1), (3, 3)]
    assert rows[0].recall == 0.0 and rows[0].all_gold == 0.0
    assert rows[1].recall == pytest.approx(0.5) and rows[1].all_gold == pytest.approx(1 / 3)
    assert recall_by_turns([]) == []


@pytest.mark.parametrize(
    ("answer", "em", "f1", "expected"),
    [
        ("a", 1.0, 1.0, Outcome.CORRECT),
        ("a b", 0.0, 0.5, Outcome.PARTIAL),
        ("z", 0.0, 0.0, Outcome.WRONG),
        (None, 0.0, 0.0, Outcome.NO_ANSWER),
        ("  ", 0.0, 0.0, Outcome.NO_ANSWER),
    ],
)
def test_outcome_table(answer, em, f1, expected):
    trajectory = _trajectory(1, [1], [], answer=answer, reward=_reward(em=em, f1=f1))
    assert outcome(trajectory) is expected


def test_parse_errors_do_not_count_refused_calls():
    turns = [
        TurnRecord(text="", error="malformed_json", observation=""),
        TurnRecord(text="", error="invalid_call", observation=""),
        TurnRecord(text="", call={"name": "answer"}),
    ]
    assert parse_errors(_trajectory(3, [1], [], turns=turns)) == 1


def test_an_evaluation_directory_loads_as_one_evaluation(run_dir):
    run = load_run(run_dir / "eval_after")
    assert run.kind is RunKind.EVALUATION
    assert run.metrics == [] and run.samples == [] and run.results is None
    [evaluation] = run.evaluations
    assert evaluation.key == "evaluation" and len(evaluation.trajectories) == 3
    assert evaluation.results.em == pytest.approx(1 / 3)
    assert run.notes == ["an evaluation directory (no metrics.jsonl): training curves omitted"]


def test_an_evaluation_shows_each_episode_once(run_dir, tmp_path):
    """Issue 18 §5 items 4 and 6: the report shows the trajectories the evaluation counted."""
    copy = tmp_path / "eval"
    shutil.copytree(run_dir / "eval_after", copy)
    path = copy / "trajectories.jsonl"
    lines = path.read_text().splitlines()
    failed = json.loads(lines[1])
    failed.update(stop_reason="generation_error", answer=None)  # retried by the next run
    path.write_text("\n".join([json.dumps(failed), *lines, lines[0]]) + "\n")
    [evaluation] = load_run(copy).evaluations
    assert [t.to_json() for t in evaluation.trajectories] == [
        json.loads(lines[1]),
        json.loads(lines[0]),
        json.loads(lines[2]),
    ]


def test_missing_parts_are_noted(run_dir, tmp_path):
    partial = tmp_path / "partial"
    shutil.copytree(run_dir, partial, ignore=shutil.ignore_patterns("eval_before", "trajectories"))
    (partial / "eval_after" / "results.json").unlink()
    run = load_run(partial)
    assert [e.key for e in run.evaluations] == ["eval_after"]
    assert run.evaluations[0].results is None and len(run.evaluations[0].trajectories) == 3
    assert run.notes == [
        "no eval_before/: the evaluation before training is omitted",
        "no eval_after/results.json: its results table is omitted",
        "no trajectories/step_*.jsonl: no training samples to show",
    ]


def test_unreadable_directories_name_the_file_at_fault(run_dir, tmp_path):
    with pytest.raises(RunDirectoryError, match="is not a directory"):
        load_run(tmp_path / "absent")
    (tmp_path / "empty").mkdir()
    with pytest.raises(RunDirectoryError, match="neither a training run directory"):
        load_run(tmp_path / "empty")
    broken = tmp_path / "broken"
    shutil.copytree(run_dir / "eval_after", broken)
    path = broken / "trajectories.jsonl"
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0], '{"question": "only"}', lines[2]]) + "\n")
    with pytest.raises(RunDirectoryError, match=r"trajectories\.jsonl line 2: not a trajectory"):
        load_run(broken)
    path.write_text(lines[0] + "\n")
    (broken / "results.json").write_text("[1, 2]")
    with pytest.raises(RunDirectoryError, match=r"results\.json: expected a JSON object"):
        load_run(broken)
    (broken / "results.json").write_text("{")
    with pytest.raises(RunDirectoryError, match=r"results\.json: not valid JSON"):
        load_run(broken)


def test_evaluations_are_read_as_their_result_types(run_dir):
    run = load_run(run_dir)
    for evaluation in run.evaluations:
        assert isinstance(evaluation.results, DatasetResults)
        assert isinstance(evaluation.results.ci["em"], Interval)
    committed = REPO_ROOT / "results" / "baselines" / "hf" / "ircot"
    pooled = read_results(committed / "results.json")  # every dataset: their pooled results
    expected = EvaluationResults.from_json(json.loads((committed / "results.json").read_text()))
    assert isinstance(pooled, PooledResults) and pooled == expected.overall.pooled
    assert read_results(committed / "absent.json") is None


def test_a_results_file_of_another_shape_names_the_file(run_dir, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(run_dir / "eval_after", broken)
    results = json.loads((broken / "results.json").read_text())
    del results["em"]
    (broken / "results.json").write_text(json.dumps(results))
    with pytest.raises(RunDirectoryError, match=r"results\.json: not an evaluation's results"):
        load_run(broken)


def test_a_truncated_metrics_line_is_skipped(run_dir, tmp_path):
    """Issue 18 item 9: a killed write's torn last line no longer makes the run unreadable."""
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    with (copy / "metrics.jsonl").open("a") as handle:
        handle.write(json.dumps({"step": 5, "loss": 1.0})[:10])
    assert load_run(copy).metrics == load_run(run_dir).metrics


def test_the_dev_curve_is_loaded_and_drawn_in_the_training_section(run_dir, tmp_path):
    from grasp.report import render_report

    assert load_run(run_dir).dev_curve == []
    copy = tmp_path / "with-curve"
    shutil.copytree(run_dir, copy)
    lines = [
        {"step": 2, "pooled": {"episodes": 6, "reward/total": 0.5, "recall": 0.5}},
        {"step": 0, "pooled": {"episodes": 6, "reward/total": 0.25, "recall": 0.75}},
    ]
    (copy / "dev_curve.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    run = load_run(copy)
    assert run.dev_curve == [lines[1], lines[0]]
    assert "The dev learning curve (dev_curve.jsonl)" in render_report(run)
    assert "The dev learning curve" not in render_report(load_run(run_dir))
    (copy / "dev_curve.jsonl").write_text("{\n")
    with pytest.raises(RunDirectoryError, match="dev_curve.jsonl: line 1"):
        load_run(copy)
