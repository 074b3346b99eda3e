"""A run folder's resume rules: which configuration it holds, how far it trained, which
checkpoint resumes it, which evaluations of it still stand, and who is training it.

- config.json: another configuration is refused (``check_same_run``), except the fields of
  ``RESUMABLE_CHANGES``; a folder that is not a training run's is refused
  (``check_training_run``).
- checkpoints/: the complete checkpoint of highest step resumes the run
  (``grasp.train.run_folder.latest_checkpoint``).
- results.json: its ``steps`` say how far a finished run trained (``check_finished``); a
  ``grpo.max_steps`` below it is refused (``check_trained_steps``).
- eval_after/: an evaluation of an earlier model is set aside (``set_aside_stale_eval``).
- .lock: held by the process training the folder (``run_lock``).

A run is finished when its results.json says it trained to ``grpo.max_steps`` and its final/
is there: rerun, it says so and does nothing (committed runs are kept so: final/, no
checkpoints/). Trained further, it goes on from its checkpoint of that step; without one it is
refused, naming it, rather than trained again from step 0 over the finished run.

The folder's paths are grasp/train/run_folder.py's; grasp/train/trainer.py runs these checks,
under the run's lock, before the run folder's first file is written.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from grasp.eval.config_diff import config_differences
from grasp.eval.results import CONFIG_FILE as EVALUATION_CONFIG_FILE
from grasp.eval.resume import FolderLockedError, hold_lock
from grasp.train.config import TrainConfig
from grasp.train.run_folder import (
    CHECKPOINTS_DIR,
    CONFIG_FILE,
    FINAL_DIR,
    RESULTS_FILE,
    Checkpoint,
    RunFolder,
    latest_checkpoint,
)

log = logging.getLogger(__name__)


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
    lock_file = RunFolder(run_dir).lock_file

    def refusal(holder: str, path: Path) -> FolderLockedError:
        return RunLockedError(
            f"{run_dir} is being trained by another process ({holder}; lock {path}): wait "
            "for it to finish, or choose another run_dir="
        )

    try:
        with hold_lock(lock_file, refusal, remove=True):
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
    path = RunFolder(run_dir).config_file
    if not path.is_file():
        raise FileNotFoundError(f"run_dir={run_dir}: no {CONFIG_FILE} (is it a training run?)")
    recorded = json.loads(path.read_text())
    _check_training_config(run_dir, recorded)


def _check_training_config(run_dir: Path, recorded: Any) -> None:
    names = {f.name for f in dataclasses.fields(TrainConfig)}
    foreign = sorted(set(recorded) - names) if isinstance(recorded, dict) else []
    if not isinstance(recorded, dict) or foreign or "grpo" not in recorded:
        what = f"records {foreign}, which" if foreign else "has no grpo settings, which"
        raise NotATrainingRunError(
            f"run_dir={run_dir} is not a training run: its {CONFIG_FILE} {what} no training "
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
    folder = RunFolder(run_dir)
    steps = folder.recorded_steps()
    if steps is None:
        return False
    final = folder.final_dir.is_dir()
    last = latest_checkpoint(folder.checkpoints_dir)
    needed = folder.checkpoint_dir(steps)
    if final and steps >= max_steps:
        go_on = (
            f"it goes on from {last.path}"
            if last is not None and last.step >= steps
            else f"that needs {needed}, which this folder does not hold"
        )
        log.info(
            "%s is finished: trained to step %d of grpo.max_steps=%d (%s and %s/); "
            "nothing to do. To train on, raise grpo.max_steps: %s",
            run_dir,
            steps,
            max_steps,
            RESULTS_FILE,
            FINAL_DIR,
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
    evidence = (
        f"{RESULTS_FILE}, {FINAL_DIR}/" if final else f"{RESULTS_FILE}; {FINAL_DIR}/ is missing"
    )
    asks = f", and grpo.max_steps={max_steps} asks for more" if max_steps > steps else ""
    held = f"holds {last.path.name}" if last is not None else "holds none"
    needed = RunFolder(run_dir).checkpoint_dir(steps)
    remedies = [f"Put the run's {needed.name} back in {CHECKPOINTS_DIR}/"]
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


def trained_steps(run_dir: Path) -> tuple[int, Path] | None:
    """The step the run in ``run_dir`` was trained to, and the file that says so (its latest
    complete checkpoint, or its results.json when that is later: the last step of a run
    saved every few steps has no checkpoint); None for a run not trained yet."""
    folder = RunFolder(run_dir)
    found = []
    last = latest_checkpoint(folder.checkpoints_dir)
    if last is not None:
        found.append((last.step, last.path))
    steps = folder.recorded_steps()
    if steps is not None:
        found.append((steps, folder.results_file))
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
        recorded = json.loads((out_dir / EVALUATION_CONFIG_FILE).read_text())
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


def set_aside_stale_eval(run_dir: Path, step: int) -> None:
    """Move an eval_after/ of an earlier model (the run was trained further) to
    eval_after-step<N>/, so that "after" is evaluated anew and the old one is kept."""
    folder = RunFolder(run_dir).eval_after_dir
    marker = RunFolder(run_dir).after_step_file
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
