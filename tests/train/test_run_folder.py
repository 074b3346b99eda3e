"""A run folder's first checks (grasp/train/resume.py): a finished run is left alone, one
that cannot go on is refused naming what is missing, one process at a time trains a folder,
and a folder that is not a training run's is named as such.

No model is loaded and no index built: the run folders are copies of the committed
``results/cpu_grasp_v2`` (its config.json and results.json, a final/ with its adapter config)
or made from it, and ``load_training`` (the index and the model) fails the test if reached.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from grasp.eval.resume import LOCK_FILE
from grasp.paths import REPO_ROOT
from grasp.train import trainer as trainer_module
from grasp.train.process import SingleProcess
from grasp.train.resume import (
    NotATrainingRunError,
    RunFinishedError,
    RunLockedError,
    check_training_run,
    run_lock,
)
from grasp.train.run_folder import RunResults

COMMITTED = REPO_ROOT / "results" / "cpu_grasp_v2"


class BuildReached(AssertionError):
    """load_training was called: the run went on to its index and model."""


@pytest.fixture
def no_build(monkeypatch):
    """load_training raises BuildReached: reaching it means the run would load and train."""

    def build(config, process=None):
        raise BuildReached(str(config.run_dir))

    monkeypatch.setattr(trainer_module, "load_training", build)


def committed_copy(tmp_path: Path, steps: int | None = None) -> Path:
    """The committed finished run as its folder's first checks see it: config.json,
    results.json (``steps`` in place of 150 when given), final/ with its adapter config."""
    run_dir = tmp_path / "cpu_grasp_v2"
    run_dir.mkdir()
    shutil.copy(COMMITTED / "config.json", run_dir)
    results = json.loads((COMMITTED / "results.json").read_text())
    if steps is not None:
        results["steps"] = steps
    (run_dir / "results.json").write_text(json.dumps(results, indent=2))
    (run_dir / "final").mkdir()
    shutil.copy(COMMITTED / "final" / "adapter_config.json", run_dir / "final")
    return run_dir


def add_checkpoint(run_dir: Path, step: int) -> None:
    folder = run_dir / "checkpoints" / f"checkpoint-{step}"
    folder.mkdir(parents=True)
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": step}))


def train(run_dir: Path, *overrides: str) -> RunResults:
    """What ``python scripts/train.py experiment=cpu_grasp_v2 run_dir=<run_dir> <overrides>``
    does, in this process."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from grasp.config import register_configs, to_dataclass
    from grasp.train.config import TrainConfig

    register_configs()
    with initialize_config_dir(config_dir=str(REPO_ROOT / "configs"), version_base=None):
        cfg = compose(
            "train", overrides=["experiment=cpu_grasp_v2", f"run_dir={run_dir}", *overrides]
        )
    config = to_dataclass(cfg, TrainConfig)
    resolved = OmegaConf.to_container(cfg, resolve=True)
    return trainer_module.run_training(config, resolved, SingleProcess())


def contents(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder``: relative path -> bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_rerunning_the_committed_finished_run_says_so_and_does_nothing(tmp_path, no_build, caplog):
    """Issue 48 item 1: results/cpu_grasp_v2 is committed with final/ and no checkpoints/; its
    README's command trained it again from step 0 over the committed policy."""
    run_dir = committed_copy(tmp_path)
    before = contents(run_dir)
    with caplog.at_level(logging.INFO, logger="grasp.train.resume"):
        results = train(run_dir)
    assert results.to_json() == json.loads((COMMITTED / "results.json").read_text())
    assert contents(run_dir) == before, "no file written, config.json untouched, no lock left"
    said = [r for r in caplog.records if r.name == "grasp.train.resume"]
    assert [r.getMessage() for r in said if r.levelno == logging.INFO] == [
        f"{run_dir} is finished: trained to step 150 of grpo.max_steps=150 (results.json and "
        "final/); nothing to do. To train on, raise grpo.max_steps: that needs "
        f"{run_dir / 'checkpoints' / 'checkpoint-150'}, which this folder does not hold"
    ]


def test_more_steps_for_a_finished_run_without_its_checkpoint_are_refused_naming_it(
    tmp_path, no_build
):
    run_dir = committed_copy(tmp_path)
    before = contents(run_dir)
    message = (
        f"{run_dir} holds a run finished at step 150 (results.json, final/), and "
        "grpo.max_steps=151 asks for more, but "
        f"{run_dir / 'checkpoints' / 'checkpoint-150'} is missing (checkpoints/ holds none): "
        "training would start again from step 0 over the finished run. Put the run's "
        "checkpoint-150 back in checkpoints/, or keep grpo.max_steps=150 (nothing to do), or "
        "choose another run_dir="
    )
    with pytest.raises(RunFinishedError, match=re.escape(message)):
        train(run_dir, "grpo.max_steps=151")
    assert contents(run_dir) == before


def test_a_finished_two_step_run_whose_checkpoints_are_gone_is_left_alone(tmp_path, no_build):
    """Issue 48 item 1 as found: a finished 2-step run, checkpoints/ deleted, the same command
    again trained steps 1 and 2 again (metrics.jsonl: 1, 2, 1, 2); with grpo.max_steps=3 too."""
    run_dir = committed_copy(tmp_path, steps=2)
    before = contents(run_dir)
    assert train(run_dir, "grpo.max_steps=2").steps == 2
    with pytest.raises(RunFinishedError, match=re.escape("checkpoint-2 is missing (checkpoints/")):
        train(run_dir, "grpo.max_steps=3")
    assert contents(run_dir) == before
    # With an earlier checkpoint only, going on would train step 2 again: refused too.
    add_checkpoint(run_dir, 1)
    with pytest.raises(RunFinishedError, match=re.escape("(checkpoints/ holds checkpoint-1)")):
        train(run_dir, "grpo.max_steps=3")
    # Its checkpoint of step 2 back: the run trains on from it (it reaches the model).
    add_checkpoint(run_dir, 2)
    with pytest.raises(BuildReached):
        train(run_dir, "grpo.max_steps=3")
    assert train(run_dir, "grpo.max_steps=2").steps == 2  # finished still: nothing to do


def test_a_run_whose_results_outlive_both_final_and_its_checkpoint_is_refused(tmp_path, no_build):
    run_dir = committed_copy(tmp_path, steps=2)
    shutil.rmtree(run_dir / "final")
    message = (
        f"{run_dir} holds a run finished at step 2 (results.json; final/ is missing), but "
        f"{run_dir / 'checkpoints' / 'checkpoint-2'} is missing (checkpoints/ holds none)"
    )
    with pytest.raises(RunFinishedError, match=re.escape(message)):
        train(run_dir, "grpo.max_steps=2")
    add_checkpoint(run_dir, 2)  # killed after its checkpoint, before final/: it reloads it
    with pytest.raises(BuildReached):
        train(run_dir, "grpo.max_steps=2")


HOLDER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from grasp.train.resume import run_lock

    with run_lock(Path(sys.argv[1])):
        print("held", flush=True)
        time.sleep(600)
    """
)


def start_holder(run_dir: Path) -> subprocess.Popen:
    """Another process holding ``run_dir``'s lock, as a training run does."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(run_dir)],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    assert holder.stdout.readline() == "held\n"
    return holder


def test_a_second_run_in_the_folder_fails_at_once_naming_the_holder_and_writes_nothing(
    tmp_path, no_build
):
    """Issue 48 item 2: the same command twice at once trained twice (metrics.jsonl steps 1, 1,
    2, 2, 3, 3) until eval_after's lock stopped the second at the end."""
    run_dir = committed_copy(tmp_path, steps=2)
    add_checkpoint(run_dir, 2)
    holder = start_holder(run_dir)
    try:
        before = contents(run_dir)
        with pytest.raises(RunLockedError) as refused:
            train(run_dir, "grpo.max_steps=3")
        message = str(refused.value)
        assert message.startswith(
            f"{run_dir} is being trained by another process (pid {holder.pid} on "
        )
        assert message.endswith(
            f"; lock {run_dir / LOCK_FILE}): wait for it to finish, or choose another run_dir="
        )
        assert contents(run_dir) == before, "the refused process wrote nothing"
    finally:
        holder.kill()
        holder.wait()


def test_the_lock_is_held_for_the_whole_run_and_a_killed_holders_lock_blocks_nothing(
    tmp_path, monkeypatch
):
    run_dir = committed_copy(tmp_path, steps=2)
    add_checkpoint(run_dir, 2)
    before = contents(run_dir)
    holder = start_holder(run_dir)
    holder.send_signal(signal.SIGKILL)  # killed mid-run: its lock file stays, naming it
    holder.wait()
    assert f"pid {holder.pid} on " in (run_dir / LOCK_FILE).read_text()

    def build(config, process=None):
        # Inside the run: this process holds the lock, and any other start is refused.
        assert (run_dir / LOCK_FILE).read_text().startswith(f"pid {os.getpid()} on ")
        with pytest.raises(RunLockedError), run_lock(run_dir):
            pass
        raise BuildReached(str(run_dir))

    monkeypatch.setattr(trainer_module, "load_training", build)
    with pytest.raises(BuildReached):
        train(run_dir, "grpo.max_steps=3")  # the resume goes on past the stale lock
    assert contents(run_dir) == before, "the lock file goes with the run that held it"


def test_a_refused_start_in_a_new_folder_leaves_no_folder(tmp_path):
    run_dir = tmp_path / "new" / "run"
    run_dir.parent.mkdir()
    with pytest.raises(RuntimeError, match="refused"), run_lock(run_dir):
        assert (run_dir / LOCK_FILE).is_file()
        raise RuntimeError("refused")
    assert list(run_dir.parent.iterdir()) == []


def test_an_evaluation_folder_is_not_taken_for_a_training_run(tmp_path):
    """Issue 48 (minor): run_dir= an evaluation's dataset folder ended in
    ``ConfigKeyError: Key 'baseline' not in 'TrainConfig'``."""
    evaluation = tmp_path / "eval" / "hotpotqa"
    evaluation.mkdir(parents=True)
    recorded = next((REPO_ROOT / "results" / "baselines" / "hf").glob("*/hotpotqa/config.json"))
    shutil.copy(recorded, evaluation / "config.json")
    message = (
        f"run_dir={evaluation} is not a training run: its config.json records "
        "['baseline', 'batch_questions', 'n', 'policy', 'seed', 'split'], which no training "
        "run's does (an evaluation's folder?); give a folder scripts/train.py wrote"
    )
    with pytest.raises(NotATrainingRunError, match=re.escape(message)):
        check_training_run(evaluation)
    with pytest.raises(NotATrainingRunError, match=re.escape(message)):
        train(evaluation)
    check_training_run(COMMITTED)  # a training run's folder passes
    with pytest.raises(FileNotFoundError, match="no config.json"):
        check_training_run(tmp_path)


def test_the_evaluation_script_names_an_evaluation_folder_given_as_run_dir_in_one_line(tmp_path):
    evaluation = tmp_path / "hotpotqa"
    evaluation.mkdir()
    recorded = next((REPO_ROOT / "results" / "baselines" / "hf").glob("*/hotpotqa/config.json"))
    shutil.copy(recorded, evaluation / "config.json")
    env = {k: v for k, v in os.environ.items() if k != "HYDRA_FULL_ERROR"}
    done = subprocess.run(
        [sys.executable, str(REPO_ROOT / "scripts" / "evaluate.py"), f"run_dir={evaluation}"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"error: NotATrainingRunError: run_dir={evaluation} is not a training run: its "
        "config.json records ['baseline', 'batch_questions', 'n', 'policy', 'seed', 'split'], "
        "which no training run's does (an evaluation's folder?); give a folder "
        "scripts/train.py wrote"
    ]
