"""Read a run directory (scripts/train.py) or an evaluation directory (scripts/evaluate.py).

A training run directory holds ``config.json``, ``metrics.jsonl``, ``trajectories/step_N.jsonl``,
``eval_before/`` and ``eval_after/`` (each ``results.json`` + ``trajectories.jsonl``) and a
top-level ``results.json``; an evaluation directory holds ``results.json`` and
``trajectories.jsonl``. ``load_run`` reads whichever is there, the evaluations' results as
their types (``grasp.eval.results``), and notes each missing part instead of failing on it:

    run = load_run(Path("runs/cpu_smoke"))
    run.metrics                      # metrics.jsonl records of training steps
    run.evaluations[-1].results.em   # eval_after/results.json, a DatasetResults
    series(run.metrics, "reward/total")

The helpers below derive what a report shows from those structures: metric series, each
episode's outcome, and recall by number of turns used.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grasp.compressed import read_text, stored_path
from grasp.env.episode import INVALID_CALL
from grasp.eval.jsonl import read_json
from grasp.eval.results import CONFIG_FILE as EVALUATION_CONFIG_FILE
from grasp.eval.results import RESULTS_FILE as EVALUATION_RESULTS_FILE
from grasp.eval.results import DatasetEvaluation, DatasetResults, EvaluationResults, PooledResults
from grasp.eval.resume import collect
from grasp.metrics import all_gold_found, paragraph_recall
from grasp.rollout.trajectory import TRAJECTORIES_FILE, Trajectory
from grasp.train.metrics_log import read_dev_curve, read_metrics
from grasp.train.run_folder import (
    EVAL_AFTER_DIR,
    EVAL_BEFORE_DIR,
    METRICS_FILE,
    TRAJECTORIES_DIR,
    WEIGHTS_STEP_KEY,
    RunFolder,
    RunResults,
)
from grasp.types import StrEnum

EVALUATION_FOLDERS = ((EVAL_BEFORE_DIR, "before training"), (EVAL_AFTER_DIR, "after training"))
"""A training run's evaluation folders, in report order, with their labels."""


class RunDirectoryError(ValueError):
    """A run directory that cannot be read; the message names the file at fault."""


class RunKind(StrEnum):
    TRAINING = "training"
    """scripts/train.py output: metrics, trajectory samples, evaluations before and after."""
    EVALUATION = "evaluation"
    """scripts/evaluate.py output: one results.json and its trajectories."""


class Outcome(StrEnum):
    """How an episode ended, as the trajectory viewer filters it."""

    CORRECT = "correct"
    """Exact match with a gold answer."""
    PARTIAL = "partial"
    """An answer with token F1 above 0 but no exact match."""
    WRONG = "wrong"
    """An answer with F1 0."""
    NO_ANSWER = "no_answer"
    """The episode stopped without an answer (turn or token budget, generation error)."""


EvaluationSummary = DatasetResults | PooledResults
"""What the report shows of one evaluation: a dataset's results, or every dataset's pooled."""


@dataclass
class TrajectorySet:
    """Trajectories written together: one evaluation, or one step's training sample."""

    key: str
    """eval_before, eval_after, evaluation, or step_N."""
    label: str
    """How the report names the set."""
    trajectories: list[Trajectory]
    results: EvaluationSummary | None = None
    """The evaluation's results.json (``read_results``); None for training samples."""


@dataclass
class RunData:
    """Everything a report shows, read from one directory."""

    path: Path
    kind: RunKind
    config: dict[str, Any] | None
    """config.json (the resolved configuration), when present."""
    results: RunResults | None
    """A training run's top-level results.json (experiment, steps, before, after, delta)."""
    metrics: list[dict[str, Any]]
    """metrics.jsonl records of training steps (those with reward/total), by step."""
    evaluations: list[TrajectorySet]
    """Before and after training, or the one evaluation of an evaluation directory."""
    samples: list[TrajectorySet]
    """The fixed question sample rolled out during training, by step."""
    dev_curve: list[dict[str, Any]] = field(default_factory=list)
    """dev_curve.jsonl: the held-out questions evaluated every few steps, one line per step."""
    notes: list[str] = field(default_factory=list)
    """What the directory lacks (the report omits those parts and says so)."""

    @property
    def trajectory_sets(self) -> list[TrajectorySet]:
        """Evaluations last-first (after training first), then training samples by step."""
        return list(reversed(self.evaluations)) + self.samples

    @property
    def recall_sets(self) -> list[TrajectorySet]:
        """What recall by turns is counted over: the evaluations, else the training samples."""
        evaluations = [s for s in self.evaluations if s.trajectories]
        return evaluations or [s for s in self.samples if s.trajectories]

    @property
    def title(self) -> str:
        experiment = self.results.experiment if self.results is not None else None
        experiment = experiment or (self.config or {}).get("experiment")
        return f"{experiment} ({self.path.name})" if experiment else self.path.name


def load_run(path: Path) -> RunData:
    """Read a training run directory or an evaluation directory at ``path``."""
    path = Path(path)
    if not path.is_dir():
        raise RunDirectoryError(f"{path} is not a directory")
    folder = RunFolder(path)
    training = folder.metrics_file.exists() or any(
        (path / name).is_dir() for name, _ in EVALUATION_FOLDERS
    )
    if training:
        return _load_training(folder)
    if (path / EVALUATION_RESULTS_FILE).exists() or stored_path(path / TRAJECTORIES_FILE):
        return _load_evaluation(path)
    raise RunDirectoryError(
        f"{path} is neither a training run directory ({METRICS_FILE}, {EVAL_BEFORE_DIR}/, "
        f"{EVAL_AFTER_DIR}/) nor an evaluation directory ({EVALUATION_RESULTS_FILE}, "
        f"{TRAJECTORIES_FILE})"
    )


def _load_training(run: RunFolder) -> RunData:
    path = run.path
    notes = []
    try:
        records = read_metrics(path)
    except (json.JSONDecodeError, KeyError) as error:
        raise RunDirectoryError(f"{run.metrics_file}: unreadable record ({error})") from error
    metrics = [r for r in records if "reward/total" in r]
    if not metrics:
        notes.append(f"no training steps in {METRICS_FILE}: training curves omitted")
    evaluations = []
    for name, label in EVALUATION_FOLDERS:
        folder = path / name
        if folder.is_dir():
            evaluations.append(_evaluation_set(folder, name, label, notes))
        else:
            notes.append(f"no {name}/: the evaluation {label} is omitted")
    samples = [_step_sample(step, file) for step, file in run.trajectory_sample_files().items()]
    try:
        dev_curve = read_dev_curve(path)
        config, results = run.read_config(), run.read_results()
    except ValueError as error:  # a RunFolderError among them
        raise RunDirectoryError(str(error)) from error
    if not samples:
        notes.append(f"no {TRAJECTORIES_DIR}/step_*.jsonl: no training samples to show")
    return RunData(
        path=path,
        kind=RunKind.TRAINING,
        config=config,
        results=results,
        metrics=metrics,
        evaluations=evaluations,
        samples=samples,
        dev_curve=dev_curve,
        notes=notes,
    )


def _step_sample(step: int, path: Path) -> TrajectorySet:
    """A training sample, labelled with the weights that played it when it says (a vLLM
    sample at step N shows the weights of step N-1)."""
    trajectories = read_trajectory_file(path)
    weights = {t.extra.get(WEIGHTS_STEP_KEY) for t in trajectories} - {None}
    label = f"sample at step {step}"
    if len(weights) == 1 and weights != {step}:
        label += f" (weights of step {weights.pop()})"
    return TrajectorySet(f"step_{step}", label, trajectories)


def _load_evaluation(path: Path) -> RunData:
    notes: list[str] = []
    evaluation = _evaluation_set(path, "evaluation", "evaluation", notes)
    notes.append(f"an evaluation directory (no {METRICS_FILE}): training curves omitted")
    return RunData(
        path=path,
        kind=RunKind.EVALUATION,
        config=_read_json(path / EVALUATION_CONFIG_FILE),
        results=None,
        metrics=[],
        evaluations=[evaluation],
        samples=[],
        notes=notes,
    )


def _evaluation_set(folder: Path, key: str, label: str, notes: list[str]) -> TrajectorySet:
    results = read_results(folder / EVALUATION_RESULTS_FILE)
    if results is None:
        notes.append(f"no {folder.name}/{EVALUATION_RESULTS_FILE}: its results table is omitted")
    trajectories: list[Trajectory] = []
    if stored_path(folder / TRAJECTORIES_FILE):
        # The trajectories the evaluation counted: one per episode (a retried generation
        # error or a repeated line would otherwise show twice).
        trajectories = collect(read_trajectory_file(folder / TRAJECTORIES_FILE)).trajectories
    else:
        notes.append(f"no {folder.name}/{TRAJECTORIES_FILE}: its trajectories are omitted")
    return TrajectorySet(key, label, trajectories, results)


def read_trajectory_file(path: Path) -> list[Trajectory]:
    """Trajectories of a JSONL file (or of its stored .xz form); a bad line raises
    RunDirectoryError naming file and line."""
    trajectories = []
    for number, line in enumerate(read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            trajectories.append(Trajectory.from_json(json.loads(line)))
        except (json.JSONDecodeError, TypeError) as error:
            raise RunDirectoryError(f"{path} line {number}: not a trajectory ({error})") from error
    return trajectories


def read_results(path: Path) -> EvaluationSummary | None:
    """An evaluation's results.json as its type: a dataset's (``DatasetEvaluation``) gives
    its results, a multi-dataset one (``EvaluationResults``) its datasets pooled; None when
    there is no such file. RunDirectoryError naming the file when it is neither."""
    data = _read_json(path)
    if data is None:
        return None
    try:
        if "overall" in data:
            return EvaluationResults.from_json(data).overall.pooled
        return DatasetEvaluation.from_json(data).results
    except (ValueError, TypeError, KeyError, AttributeError) as error:
        raise RunDirectoryError(f"{path}: not an evaluation's results ({error})") from None


def _read_json(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path``; None when there is no such file."""
    if not path.exists():
        return None
    try:
        return read_json(path)
    except ValueError as error:
        raise RunDirectoryError(str(error)) from None


@dataclass
class Series:
    """One metric over training steps (steps where it was not logged are left out)."""

    key: str
    steps: list[int]
    values: list[float]


def series(metrics: Sequence[dict[str, Any]], key: str) -> Series:
    points = [(r["step"], float(r[key])) for r in metrics if r.get(key) is not None]
    return Series(key, [s for s, _ in points], [v for _, v in points])


def metric_keys(metrics: Sequence[dict[str, Any]], prefix: str, suffix: str = "") -> list[str]:
    """Logged keys that start with ``prefix`` and end with ``suffix``, in first-seen order."""
    keys: dict[str, None] = {}
    for record in metrics:
        for key in record:
            if key.startswith(prefix) and key.endswith(suffix):
                keys[key] = None
    return list(keys)


def outcome(trajectory: Trajectory) -> Outcome:
    if trajectory.answer is None or not trajectory.answer.strip():
        return Outcome.NO_ANSWER
    if trajectory.reward.em >= 1.0:
        return Outcome.CORRECT
    if trajectory.reward.f1 > 0.0:
        return Outcome.PARTIAL
    return Outcome.WRONG


def parse_errors(trajectory: Trajectory) -> int:
    """Turns whose text did not parse as a tool call (refused valid calls not counted)."""
    return sum(1 for turn in trajectory.turns if turn.error and turn.error != INVALID_CALL)


def recall(trajectory: Trajectory) -> float:
    """Share of gold paragraphs the episode found with any tool (results.json's recall)."""
    return paragraph_recall(trajectory.retrieved_paragraph_ids, set(trajectory.gold_paragraph_ids))


@dataclass
class TurnsRecall:
    """Episodes that used the same number of turns, and what they found."""

    turns_used: int
    episodes: int
    recall: float
    """Mean share of gold paragraphs found."""
    all_gold: float
    """Share of episodes that found every gold paragraph."""


def recall_by_turns(trajectories: Sequence[Trajectory]) -> list[TurnsRecall]:
    """Mean recall of the episodes grouped by turns used, fewest turns first."""
    groups: dict[int, list[Trajectory]] = {}
    for trajectory in trajectories:
        groups.setdefault(trajectory.turns_used, []).append(trajectory)
    rows = []
    for turns_used in sorted(groups):
        group = groups[turns_used]
        gold = [set(t.gold_paragraph_ids) for t in group]
        found = [t.retrieved_paragraph_ids for t in group]
        rows.append(
            TurnsRecall(
                turns_used=turns_used,
                episodes=len(group),
                recall=sum(map(paragraph_recall, found, gold)) / len(group),
                all_gold=sum(map(all_gold_found, found, gold)) / len(group),
            )
        )
    return rows
