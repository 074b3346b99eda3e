"""A run folder's identity and resume rules: which configuration it holds, how far it trained,
which checkpoint resumes it, which evaluations of it still stand, and who is training it.

    <run_dir>/config.json                 the resolved configuration; another one is refused
                                          (``check_same_run``) except ``RESUMABLE_CHANGES``
    <run_dir>/checkpoints/checkpoint-N/   ``latest_checkpoint``: the complete one of highest N
    <run_dir>/results.json                its ``steps``: how far a finished run trained
    <run_dir>/final/                      the finished run's model (``check_finished``)
    <run_dir>/eval_after/model_step.txt   the step ``eval_after/`` evaluated (``AFTER_STEP_FILE``)
    <run_dir>/.lock                       held by the process training the folder (``run_lock``)

A run is finished when its results.json says it trained to ``grpo.max_steps`` and its final/
is there: rerun, it says so and does nothing (committed runs are kept so: final/, no
checkpoints/). Trained further, it goes on from its checkpoint of that step; without one it is
refused, naming it, rather than trained again from step 0 over the finished run.

Nothing here trains or loads a model but ``load_final_weights``; grasp/train/trainer.py runs
the checks, under the run's lock, before the run folder's first file is written.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grasp.eval.config_diff import config_differences
from grasp.eval.resume import LOCK_FILE, FolderLockedError, hold_lock
from grasp.train.config import TrainConfig

log = logging.getLogger(__name__)

CONFIG_FILE = "config.json"
RESULTS_FILE = "results.json"
FINAL_DIR = "final"
CHECKPOINTS_DIR = "checkpoints"


class RunLockedError(FolderLockedError):
    """Another process is training the run folder."""


class RunFinishedError(ValueError):
    """The run folder holds a finished run that cannot go on as asked (what is missing named)."""


class NotATrainingRunError(ValueError):
    """``run_dir`` names a folder that is not a training run's (an evaluation's, say)."""


@contextlib.contextmanager
def run_lock(run_dir: Path) -> Iterator[None]:
    """Hold ``run_dir``'s lock for the block (a whole run); RunLockedError at once, naming the
    holder, when another process holds it.

    Two processes training one folder would both train every step (metrics.jsonl: 1, 1, 2,
    2...). The lock file goes with the lock (``hold_lock(remove=True)``), and a folder made for
    the lock alone goes too when nothing else was written in it: a rerun of a finished run, or
    a start refused by its checks, leaves the folder as it found it. A killed holder's file
    stays, naming it, and blocks nothing (the kernel dropped its lock)."""
    created = not run_dir.exists()
    run_dir.mkdir(parents=True, exist_ok=True)

    def refusal(holder: str, path: Path) -> FolderLockedError:
        return RunLockedError(
            f"{run_dir} is being trained by another process ({holder}; lock {path}): wait "
            "for it to finish, or choose another run_dir="
        )

    try:
        with hold_lock(run_dir / LOCK_FILE, refusal, remove=True):
            yield
    finally:
        if created:
            with contextlib.suppress(OSError):  # not empty: the run wrote its files
                run_dir.rmdir()


def check_training_run(run_dir: Path) -> None:
    """Refuse a ``run_dir`` whose config.json is not a training run's (an evaluation's folder
    has one too, with fields no TrainConfig has: it failed later as a ConfigKeyError).

    Raises:
        FileNotFoundError: no config.json there.
        NotATrainingRunError: its config.json records fields a training run's does not.
    """
    path = run_dir / CONFIG_FILE
    if not path.is_file():
        raise FileNotFoundError(f"run_dir={run_dir}: no config.json (is it a training run?)")
    recorded = json.loads(path.read_text())
    _check_training_config(run_dir, recorded)


def _check_training_config(run_dir: Path, recorded: Any) -> None:
    names = {f.name for f in dataclasses.fields(TrainConfig)}
    foreign = sorted(set(recorded) - names) if isinstance(recorded, dict) else []
    if not isinstance(recorded, dict) or foreign or "grpo" not in recorded:
        what = f"records {foreign}, which" if foreign else "has no grpo settings, which"
        raise NotATrainingRunError(
            f"run_dir={run_dir} is not a training run: its config.json {what} no training "
            "run's does (an evaluation's folder?); give a folder scripts/train.py wrote"
        )


def check_finished(run_dir: Path, max_steps: int) -> bool:
    """True when the run in ``run_dir`` is finished at ``max_steps`` (logged): nothing to do,
    and nothing in the folder may change. False for a run to train or resume.

    A run's results.json says it trained to step S; training on (``max_steps`` above S, or
    final/ gone) needs its checkpoint of step S: without one, training would start again
    from an earlier step (0 with no checkpoint) over the finished run, so it is refused.
    Call after ``check_trained_steps`` (S above ``max_steps`` is refused there).

    Raises:
        RunFinishedError: the run cannot go on as asked, naming the checkpoint it lacks.
    """
    steps = _results_steps(run_dir)
    if steps is None:
        return False
    final = (run_dir / FINAL_DIR).is_dir()
    last = latest_checkpoint(run_dir / CHECKPOINTS_DIR)
    needed = run_dir / CHECKPOINTS_DIR / f"checkpoint-{steps}"
    if final and steps >= max_steps:
        go_on = (
            f"it goes on from {last.path}"
            if last is not None and last.step >= steps
            else f"that needs {needed}, which this folder does not hold"
        )
        log.info(
            "%s is finished: trained to step %d of grpo.max_steps=%d (results.json and final/); "
            "nothing to do. To train on, raise grpo.max_steps: %s",
            run_dir,
            steps,
            max_steps,
            go_on,
        )
        return True
    if last is not None and last.step >= steps:
        return False
    raise RunFinishedError(_cannot_go_on(run_dir, steps, max_steps, final, last))


def _cannot_go_on(
    run_dir: Path, steps: int, max_steps: int, final: bool, last: Checkpoint | None
) -> str:
    """Why the run finished at ``steps`` cannot go on, and what would let it."""
    evidence = "results.json, final/" if final else "results.json; final/ is missing"
    asks = f", and grpo.max_steps={max_steps} asks for more" if max_steps > steps else ""
    held = f"holds {last.path.name}" if last is not None else "holds none"
    needed = run_dir / CHECKPOINTS_DIR / f"checkpoint-{steps}"
    remedies = [f"Put the run's checkpoint-{steps} back in {CHECKPOINTS_DIR}/"]
    if final:
        remedies.append(f"keep grpo.max_steps={steps} (nothing to do)")
    else:
        remedies.append(f"put its {FINAL_DIR}/ back (then there is nothing to do)")
    remedies.append("choose another run_dir=")
    return (
        f"{run_dir} holds a run finished at step {steps} ({evidence}){asks}, but {needed} is "
        f"missing ({CHECKPOINTS_DIR}/ {held}): training would start again from step "
        f"{last.step if last is not None else 0} over the finished run. {', or '.join(remedies)}"
    )


def _results_steps(run_dir: Path) -> int | None:
    """The ``steps`` of ``run_dir``'s results.json; None without a readable one."""
    results = run_dir / RESULTS_FILE
    try:
        steps = json.loads(results.read_text()).get("steps") if results.is_file() else None
    except (OSError, ValueError, AttributeError):  # unreadable, or not a JSON object
        return None
    return steps if isinstance(steps, int) and not isinstance(steps, bool) else None


def trained_steps(run_dir: Path) -> tuple[int, Path] | None:
    """The step the run in ``run_dir`` was trained to, and the file that says so (its latest
    complete checkpoint, or its results.json when that is later: the last step of a run
    saved every few steps has no checkpoint); None for a run not trained yet."""
    found = []
    last = latest_checkpoint(run_dir / CHECKPOINTS_DIR)
    if last is not None:
        found.append((last.step, last.path))
    steps = _results_steps(run_dir)
    if steps is not None:
        found.append((steps, run_dir / RESULTS_FILE))
    return max(found, key=lambda item: item[0]) if found else None


def check_trained_steps(run_dir: Path, max_steps: int) -> None:
    """Refuse ``grpo.max_steps`` below the step the run was trained to (writes nothing).

    Training cannot go back: such a rerun would train nothing while its config.json said
    fewer steps than its checkpoints, final/ and results.json describe."""
    trained = trained_steps(run_dir)
    if trained is not None and trained[0] > max_steps:
        step, source = trained
        raise ValueError(
            f"{run_dir} holds a run trained to step {step} ({source}), more than "
            f"grpo.max_steps={max_steps}: a run cannot be trained back to fewer steps. Set "
            f"grpo.max_steps={step} (or more, to train on), or choose another run_dir="
        )


def evaluation_fingerprint(resolved: dict[str, Any]) -> dict[str, Any]:
    """What an evaluation folder of a run must match to resume (its config.json): the run's
    resolved settings, less those a resumed run may change (``RESUMABLE_CHANGES``: training
    longer must not invalidate the evaluation before training)."""
    return _without(resolved, RESUMABLE_CHANGES)


def folder_fingerprint(out_dir: Path, fingerprint: dict[str, Any]) -> dict[str, Any]:
    """``fingerprint`` with the values ``out_dir``'s config.json records for fields of
    ``RESUMABLE_CHANGES``, if it records any.

    An evaluation folder written before a field became resumable (``run_dir``: a moved run)
    records the field; it shapes no trajectory, so its recorded value is no difference and
    the evaluation resumes (and restates its results) where it would otherwise be refused."""
    try:
        recorded = json.loads((out_dir / "config.json").read_text())
    except (OSError, ValueError):  # none yet, or unreadable: evaluate_policy says which
        return fingerprint
    if not isinstance(recorded, dict):
        return fingerprint
    adopted = json.loads(json.dumps(fingerprint, default=str))
    for name in RESUMABLE_CHANGES:
        *parents, leaf = name.split(".")
        source = _node(recorded, parents)
        target = _node(adopted, parents)
        if source is not None and leaf in source and target is not None:
            target[leaf] = source[leaf]
    return adopted


def _node(tree: dict[str, Any], path: list[str]) -> dict[str, Any] | None:
    """The dict at ``path`` (keys) inside ``tree``, or None where there is none."""
    node: Any = tree
    for key in path:
        node = node.get(key) if isinstance(node, dict) else None
    return node if isinstance(node, dict) else None


AFTER_STEP_FILE = "model_step.txt"
"""In eval_after/: the optimizer step of the model it evaluated."""


@dataclass
class Checkpoint:
    path: Path
    step: int


def latest_checkpoint(folder: Path) -> Checkpoint | None:
    """The complete checkpoint with the highest step (by number: 100 after 90), or None.

    A checkpoint is complete when its trainer_state.json, written last, parses and names its
    step; one killed mid-save is skipped with a warning, so an earlier one resumes the run."""
    found = []
    for path in folder.glob("checkpoint-*"):
        suffix = path.name.removeprefix("checkpoint-")
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
    if (final / "adapter_config.json").is_file():
        from peft import set_peft_model_state_dict
        from peft.utils import load_peft_weights

        set_peft_model_state_dict(model, load_peft_weights(str(final)))
        return
    from transformers import AutoModelForCausalLM

    saved = AutoModelForCausalLM.from_pretrained(final, dtype=next(model.parameters()).dtype)
    model.load_state_dict(saved.state_dict())


def set_aside_stale_eval(folder: Path, step: int) -> None:
    """Move an eval_after/ of an earlier model (the run was trained further) to
    eval_after-step<N>/, so that "after" is evaluated anew and the old one is kept."""
    marker = folder / AFTER_STEP_FILE
    if not marker.is_file():
        return
    old = int(marker.read_text().strip() or -1)
    if old != step:
        target = folder.with_name(f"{folder.name}-step{old}")
        log.info(
            "%s evaluated step %d, the model is at step %d: moved to %s", folder, old, step, target
        )
        folder.rename(target)


RESUMABLE_CHANGES = (
    "grpo.max_steps",
    "run_dir",
    "wandb",
    "index.remote_url",
    "index.remote_timeout_s",
    "index.remote_retries",
    "main_wait_s",
    "threads",
)
"""Fields a resumed run may change (train longer, continue a run folder moved or copied to
another clone or machine, log elsewhere, search the same index in another process, on another
share of the machine); any other change is refused. None shapes a trajectory, so none is in an
evaluation's fingerprint (``evaluation_fingerprint``)."""


def _without(resolved: dict[str, Any], dotted: tuple[str, ...]) -> dict[str, Any]:
    """A copy of ``resolved`` without the ``dotted`` keys (``grpo.max_steps``...)."""
    copy = json.loads(json.dumps(resolved, default=str))
    for name in dotted:
        *parents, leaf = name.split(".")
        node = copy
        for parent in parents:
            node = node.get(parent) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(leaf, None)
    return copy


def _dotted_keys(tree: Any, prefix: str = "") -> list[str]:
    """Every leaf of a nested dict as a dotted key (as ``config_differences`` names them)."""
    if not isinstance(tree, dict) or not tree:
        return [prefix.rstrip(".")]
    return [k for key, value in tree.items() for k in _dotted_keys(value, f"{prefix}{key}.")]


def check_same_run(path: Path, resolved: dict[str, Any]) -> None:
    """Refuse to resume a run directory with a different configuration, or one that is not a
    training run's (``NotATrainingRunError``); writes nothing."""
    if path.exists():
        before = json.loads(path.read_text())
        _check_training_config(path.parent, before)
        # Fields added to the code since the run started are absent from its config.json; the
        # run ran as if they had their default, so they do not block the resume.
        known = set(_dotted_keys(before))
        differences = config_differences(before, resolved)
        added = [k for k in differences if k not in known]
        if added:
            log.warning("%s predates the fields %s: resuming with their values", path, added[:8])
        changed = [k for k in differences if k in known and k not in RESUMABLE_CHANGES]
        if changed:
            raise ValueError(
                f"{path.parent} holds a run with another configuration (differs in {changed[:5]}); "
                "choose another run_dir= or delete that folder"
            )
