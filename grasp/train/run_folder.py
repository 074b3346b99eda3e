"""A training run's folder as a format: every path in it, spelled here once, and its typed
results.json (``RunResults``), as grasp/eval/results.py is an evaluation folder's.

    <run_dir>/config.json                  the resolved configuration (grasp/train/resume.py
                                           refuses another one)
    <run_dir>/results.json                 ``RunResults``: the evaluations and how far it trained
    <run_dir>/metrics.jsonl                one record per logged step (grasp/train/metrics_log.py)
    <run_dir>/curves.png                   the training curves (grasp/train/plots.py)
    <run_dir>/dev_curve.jsonl              the dev curve, one line per evaluated step
    <run_dir>/dev_curve/step_N/<dataset>/  an evaluation folder per step and dataset
    <run_dir>/eval_before/, eval_after/    evaluation folders (grasp/eval/results.py); in
                                           eval_after/, model_step.txt: the step it evaluated
    <run_dir>/rollouts/process-<i>.jsonl   which process rolled out which questions
    <run_dir>/trajectories/step_N.jsonl    the fixed sample of evaluation questions at step N
    <run_dir>/checkpoints/checkpoint-N/    TRL's checkpoints (``latest_checkpoint``)
    <run_dir>/final/                       the trained model: a LoRA adapter or a full model
    <run_dir>/warm_start/                  the warm start (its own files: grasp/train/warm_start.py)
    <run_dir>/.lock                        held by the process training the folder

Training, experiments, reports, benchmarks and scripts build these paths with ``RunFolder``
(``RunFolder(run_dir).results_file``) and read results.json as ``RunResults``;
tests/train/test_run_folder_format.py fails when another module spells one of the names.
Importing this module loads no model library: reports read runs through it.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grasp.eval.results import DatasetEvaluation, JsonRecord, newer_field, optional_field
from grasp.eval.resume import LOCK_FILE

if TYPE_CHECKING:  # its module loads model libraries; this one must not
    from grasp.eval.provenance import CodeVersion

log = logging.getLogger(__name__)

CONFIG_FILE = "config.json"
RESULTS_FILE = "results.json"
METRICS_FILE = "metrics.jsonl"
CURVES_PLOT = "curves.png"
DEV_CURVE_FILE = "dev_curve.jsonl"
DEV_CURVE_DIR = "dev_curve"
EVAL_BEFORE_DIR = "eval_before"
EVAL_AFTER_DIR = "eval_after"
AFTER_STEP_FILE = "model_step.txt"
"""In eval_after/: the optimizer step of the model it evaluated."""
ROLLOUTS_DIR = "rollouts"
TRAJECTORIES_DIR = "trajectories"
CHECKPOINTS_DIR = "checkpoints"
FINAL_DIR = "final"
WARM_START_DIR = "warm_start"

WEIGHTS_STEP_KEY = "weights_step"
"""In each trajectory of ``trajectories/step_N.jsonl``, under ``extra``: the optimizer steps
the weights that played it had taken (a vLLM sample at step N plays those of step N-1)."""

_CHECKPOINT_PREFIX = "checkpoint-"
_STEP_FILE = re.compile(r"step_(\d+)\.jsonl$")
_STEP_DIR = re.compile(r"step_(\d+)$")


def _step_name(step: int) -> str:
    """A step's name in trajectories/ and dev_curve/: zero-padded, so names sort by step."""
    return f"step_{step:06d}"


@dataclass(frozen=True)
class RunFolder:
    """The paths of the run folder at ``path`` (nothing is read or made by building one)."""

    path: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path))

    @property
    def config_file(self) -> Path:
        return self.path / CONFIG_FILE

    @property
    def results_file(self) -> Path:
        return self.path / RESULTS_FILE

    @property
    def metrics_file(self) -> Path:
        return self.path / METRICS_FILE

    @property
    def curves_plot(self) -> Path:
        return self.path / CURVES_PLOT

    @property
    def dev_curve_file(self) -> Path:
        return self.path / DEV_CURVE_FILE

    @property
    def dev_curve_dir(self) -> Path:
        return self.path / DEV_CURVE_DIR

    @property
    def eval_before_dir(self) -> Path:
        return self.path / EVAL_BEFORE_DIR

    @property
    def eval_after_dir(self) -> Path:
        return self.path / EVAL_AFTER_DIR

    @property
    def after_step_file(self) -> Path:
        return self.eval_after_dir / AFTER_STEP_FILE

    @property
    def rollouts_dir(self) -> Path:
        return self.path / ROLLOUTS_DIR

    @property
    def trajectories_dir(self) -> Path:
        return self.path / TRAJECTORIES_DIR

    @property
    def checkpoints_dir(self) -> Path:
        return self.path / CHECKPOINTS_DIR

    @property
    def final_dir(self) -> Path:
        return self.path / FINAL_DIR

    @property
    def warm_start_dir(self) -> Path:
        return self.path / WARM_START_DIR

    @property
    def lock_file(self) -> Path:
        return self.path / LOCK_FILE

    def checkpoint_dir(self, step: int) -> Path:
        """TRL's checkpoint of ``step`` (``checkpoints/checkpoint-N``)."""
        return self.checkpoints_dir / f"{_CHECKPOINT_PREFIX}{step}"

    def trajectory_sample_file(self, step: int) -> Path:
        return self.trajectories_dir / f"{_step_name(step)}.jsonl"

    def trajectory_sample_files(self) -> dict[int, Path]:
        """The trajectory samples written so far, by step (in step order)."""
        found = {}
        for path in self.trajectories_dir.glob("step_*.jsonl"):
            match = _STEP_FILE.search(path.name)
            if match:
                found[int(match.group(1))] = path
        return dict(sorted(found.items()))

    def dev_curve_step_dir(self, step: int) -> Path:
        """The dev curve's evaluation folders of ``step`` (one per dataset inside)."""
        return self.dev_curve_dir / _step_name(step)

    def dev_curve_steps(self) -> list[int]:
        """The steps that have a folder in dev_curve/, finished or not, in order."""
        names = (_STEP_DIR.fullmatch(p.name) for p in self.dev_curve_dir.glob("step_*"))
        return sorted(int(match.group(1)) for match in names if match)

    def rollout_records_file(self, process_index: int) -> Path:
        return self.rollouts_dir / f"process-{process_index}.jsonl"

    def read_config(self) -> dict[str, Any] | None:
        """config.json, the resolved configuration; None when there is none yet.

        Raises:
            RunFolderError: config.json is not a JSON object.
        """
        return _read_object(self.config_file)

    def write_config(self, resolved: Mapping[str, Any]) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        self.config_file.write_text(json.dumps(resolved, indent=2, default=str))

    def read_results(self) -> RunResults | None:
        """results.json as ``RunResults``; None when the run has written none yet.

        Raises:
            RunFolderError: results.json is not a run's results (the file and what is wrong
                named).
        """
        data = _read_object(self.results_file)
        if data is None:
            return None
        try:
            return RunResults.from_json(data)
        except (ValueError, TypeError, KeyError, AttributeError) as error:
            raise RunFolderError(f"{self.results_file}: not a run's results ({error})") from None

    def write_results(self, results: RunResults) -> None:
        self.results_file.write_text(json.dumps(results.to_json(), indent=2, default=str))

    def recorded_steps(self) -> int | None:
        """The ``steps`` of results.json: how far the run trained; None without a readable one.

        Read alone, and leniently: the resume rules must see a finished run even in a
        results.json this code cannot read whole, rather than train it again from step 0."""
        try:
            data = _read_object(self.results_file)
        except RunFolderError:
            return None
        steps = data.get("steps") if data is not None else None
        return steps if isinstance(steps, int) and not isinstance(steps, bool) else None


class RunFolderError(ValueError):
    """A run folder's file that cannot be read as its format says; the message names it."""


def _read_object(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path``; None when there is no such file."""
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise RunFolderError(f"{path}: not valid JSON ({error})") from None
    if not isinstance(data, dict):
        raise RunFolderError(f"{path}: not a JSON object")
    return data


@dataclass(frozen=True)
class WarmStartSummary(JsonRecord):
    """How the warm start GRPO began from was made (results.json's ``warm_start``)."""

    model: str
    """The warm-started model's folder."""
    episodes_played: int
    """Scripted episodes played."""
    episodes_kept: int
    """Those kept for the fine-tuning (``warm_start.min_recall``)."""
    sft_loss: float | None
    """The fine-tuning's mean loss; None when the trainer reported none."""
    note: str


@dataclass(kw_only=True)
class RunResults(JsonRecord):
    """A run's results.json: what it trained on, how far, and its evaluations after (and
    before) training, keys in the order of the fields."""

    experiment: str
    data: str
    """What the split is (``TrainingData.label``)."""
    train_questions: int
    eval_questions: int
    steps: int
    """The optimizer step the run trained to."""
    code: CodeVersion | None = newer_field()
    """The commit that trained (or last resumed) the run (``grasp.eval.provenance``); None:
    written before it was recorded."""
    after: DatasetEvaluation = field(metadata={"decode": DatasetEvaluation.from_json})
    """The evaluation after training (eval_after/'s results.json)."""
    before: DatasetEvaluation | None = optional_field(DatasetEvaluation.from_json)
    """The evaluation before training; None: the run made none (``eval_before=false``)."""
    delta: dict[str, float] | None = optional_field()
    """after minus before of the headline metrics and every reward term; None without before."""
    config: dict[str, Any]
    """The ``grpo`` and ``env`` settings the run trained with."""
    precision: dict[str, str] | None = newer_field()
    """What ran in which dtype (``grasp.train.grpo_args.precision``); None: written before."""
    warm_start: WarmStartSummary | None = optional_field(WarmStartSummary.from_json)
    """The warm start; None: the run had none."""


@dataclass
class Checkpoint:
    path: Path
    step: int


def latest_checkpoint(folder: Path) -> Checkpoint | None:
    """The complete checkpoint in ``folder`` (a run's checkpoints/) with the highest step (by
    number: 100 after 90), or None.

    A checkpoint is complete when its trainer_state.json, written last, parses and names its
    step; one killed mid-save is skipped with a warning, so an earlier one resumes the run."""
    found = []
    for path in folder.glob(f"{_CHECKPOINT_PREFIX}*"):
        suffix = path.name.removeprefix(_CHECKPOINT_PREFIX)
        if not suffix.isdigit():
            continue
        try:
            state = json.loads((path / "trainer_state.json").read_text())
            complete = int(state["global_step"]) == int(suffix)
        except (OSError, ValueError, KeyError, TypeError):
            complete = False
        if complete:
            found.append(Checkpoint(path, int(suffix)))
        else:
            log.warning("skipping incomplete checkpoint %s (no valid trainer_state.json)", path)
    return max(found, key=lambda c: c.step) if found else None


def load_final_weights(model: Any, final: Path) -> None:
    """Put the weights saved in ``final`` (a LoRA adapter or a full model) into ``model``."""
    from grasp.rollout.adapters import ADAPTER_CONFIG

    if (final / ADAPTER_CONFIG).is_file():
        from peft import set_peft_model_state_dict
        from peft.utils import load_peft_weights

        set_peft_model_state_dict(model, load_peft_weights(str(final)))
        return
    from transformers import AutoModelForCausalLM

    saved = AutoModelForCausalLM.from_pretrained(final, dtype=next(model.parameters()).dtype)
    model.load_state_dict(saved.state_dict())
