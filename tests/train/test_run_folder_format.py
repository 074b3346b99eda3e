"""A run folder as a format (grasp/train/run_folder.py): its paths, and results.json as
``RunResults``, which reads and writes back every committed run's results.json byte for byte.

Every other committed results.json is an evaluation's: it reads back whole as its type of
grasp/eval/results.py, so that each of them has a typed owner.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from grasp.eval.results import DatasetEvaluation, EvaluationResults
from grasp.paths import REPO_ROOT
from grasp.train.run_folder import (
    EVAL_AFTER_DIR,
    RESULTS_FILE,
    RunFolder,
    RunFolderError,
    RunResults,
    WarmStartSummary,
)

RESULTS = REPO_ROOT / "results"
COMMITTED = sorted(RESULTS.rglob(RESULTS_FILE))


def is_run_results(path: Path) -> bool:
    """A run's results.json: beside the eval_after/ every run evaluates into (an evaluation's
    results.json has no such folder beside it; eval_after/'s own config.json looks like a
    run's, so the config cannot tell them apart)."""
    return (path.parent / EVAL_AFTER_DIR).is_dir()


RUNS = [p for p in COMMITTED if is_run_results(p)]
EVALUATIONS = [p for p in COMMITTED if not is_run_results(p)]
KNOWN_RUNS = {
    "ablations/cpu_grasp/no_keyword",
    "ablations/cpu_grasp/no_read",
    "ablations/cpu_grasp/no_rr",
    "ablations/cpu_grasp/no_rs",
    "ablations/cpu_grasp/no_semantic",
    "ablations/cpu_grasp/none",
    "ablations/cpu_grasp_fp32/none",
    "cpu_grasp",
    "cpu_grasp-run1",
    "cpu_grasp_ds",
    "cpu_grasp_v2",
}
"""The committed runs when RunResults was written (later ones are read too)."""


def name(path: Path) -> str:
    return str(path.parent.relative_to(RESULTS))


def test_the_committed_runs_are_found():
    assert KNOWN_RUNS <= {name(p) for p in RUNS}
    assert len(EVALUATIONS) >= 160  # 131 datasets' and 29 pooled at the time of writing


@pytest.mark.parametrize("path", RUNS, ids=name)
def test_run_results_read_and_write_every_committed_run_byte_for_byte(path, tmp_path):
    results = RunFolder(path.parent).read_results()
    assert isinstance(results, RunResults) and isinstance(results.after, DatasetEvaluation)
    assert results.steps == json.loads(path.read_text())["steps"]
    copy = RunFolder(tmp_path)
    copy.write_results(results)
    assert copy.results_file.read_bytes() == path.read_bytes()


@pytest.mark.parametrize("path", EVALUATIONS, ids=name)
def test_every_other_committed_results_json_is_an_evaluations(path):
    data = json.loads(path.read_text())
    kind = EvaluationResults if "overall" in data else DatasetEvaluation
    assert kind.from_json(data).to_json() == data


def test_the_fields_of_a_committed_run_are_typed():
    results = RunFolder(RESULTS / "cpu_grasp_v2").read_results()
    assert results is not None
    assert (results.experiment, results.steps, results.eval_questions) == ("cpu_grasp_v2", 150, 32)
    assert results.before is None and results.delta is None  # evaluated after training only
    assert results.precision == {
        "weights": "bfloat16",
        "rollouts": "bfloat16",
        "loss": "bfloat16",
        "logprobs": "float32",
    }
    assert isinstance(results.warm_start, WarmStartSummary)
    assert results.warm_start.episodes_kept <= results.warm_start.episodes_played
    older = RunFolder(RESULTS / "cpu_grasp").read_results()
    assert older is not None and older.code is None and older.precision is None
    assert older.before is not None and older.delta is not None
    assert older.delta["em"] == older.after.results.em - older.before.results.em


def test_a_file_that_is_no_runs_results_is_named(tmp_path):
    folder = RunFolder(tmp_path)
    assert folder.read_results() is None
    folder.results_file.write_text(json.dumps({"steps": 4}))
    missing = "['experiment', 'data', 'train_questions', 'eval_questions', 'after', 'config']"
    with pytest.raises(RunFolderError) as raised:
        folder.read_results()
    assert str(raised.value) == (
        f"{folder.results_file}: not a run's results (RunResults: missing keys {missing})"
    )
    folder.results_file.write_text("[1, 2]")
    with pytest.raises(RunFolderError, match=r"results.json: not a JSON object$"):
        folder.read_results()
    folder.results_file.write_text("{not json")
    with pytest.raises(RunFolderError, match=r"results.json: not valid JSON \("):
        folder.read_results()


@pytest.mark.parametrize(
    ("text", "steps"),
    [
        ('{"steps": 4}', 4),  # the one field the resume rules need, in a file otherwise unread
        ('{"steps": true}', None),
        ('{"steps": "4"}', None),
        ("[4]", None),
        ("{torn", None),
    ],
)
def test_recorded_steps_are_read_alone_and_leniently(tmp_path, text, steps):
    folder = RunFolder(tmp_path)
    assert folder.recorded_steps() is None
    folder.results_file.write_text(text)
    assert folder.recorded_steps() == steps


def test_every_path_of_the_layout():
    folder = RunFolder(Path("run"))
    paths = {
        "config_file": "run/config.json",
        "results_file": "run/results.json",
        "metrics_file": "run/metrics.jsonl",
        "curves_plot": "run/curves.png",
        "dev_curve_file": "run/dev_curve.jsonl",
        "dev_curve_dir": "run/dev_curve",
        "eval_before_dir": "run/eval_before",
        "eval_after_dir": "run/eval_after",
        "after_step_file": "run/eval_after/model_step.txt",
        "rollouts_dir": "run/rollouts",
        "trajectories_dir": "run/trajectories",
        "checkpoints_dir": "run/checkpoints",
        "final_dir": "run/final",
        "warm_start_dir": "run/warm_start",
        "lock_file": "run/.lock",
    }
    assert {key: str(getattr(folder, key)) for key in paths} == paths
    assert str(folder.checkpoint_dir(40)) == "run/checkpoints/checkpoint-40"
    assert str(folder.trajectory_sample_file(3)) == "run/trajectories/step_000003.jsonl"
    assert str(folder.dev_curve_step_dir(25)) == "run/dev_curve/step_000025"
    assert str(folder.rollout_records_file(1)) == "run/rollouts/process-1.jsonl"


def test_the_steps_on_disk_are_listed_in_step_order(tmp_path):
    folder = RunFolder(tmp_path)
    assert folder.trajectory_sample_files() == {} and folder.dev_curve_steps() == []
    for step in (10, 2):
        folder.trajectory_sample_file(step).parent.mkdir(parents=True, exist_ok=True)
        folder.trajectory_sample_file(step).write_text("")
        folder.dev_curve_step_dir(step).mkdir(parents=True)
    (folder.trajectories_dir / "notes.txt").write_text("")
    (folder.dev_curve_dir / "step_x").mkdir()
    assert folder.trajectory_sample_files() == {
        2: folder.trajectory_sample_file(2),
        10: folder.trajectory_sample_file(10),
    }
    assert folder.dev_curve_steps() == [2, 10]


def test_reading_a_run_folder_loads_no_model_library():
    """Reports and sweeps read runs through this module: it must stay cheap to import."""
    code = (
        "import sys, grasp.train.run_folder, grasp.train.metrics_log; "
        "print(sorted(m for m in ('torch', 'transformers', 'trl', 'peft') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO_ROOT
    )
    assert done.stdout.strip() == "[]"
