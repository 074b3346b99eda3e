"""Run-directory writes under several processes: the main process writes each file once, the
others write nothing and wait at the same points (issue 14 item 6).

One process plays both parts here: ``run_training`` takes the process state it would get from
accelerate, and a recording stand-in says whether it is the main process.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest
from omegaconf import OmegaConf
from tiny_run import tiny_run_overrides

from grasp.paths import REPO_ROOT
from grasp.train import process as process_module
from grasp.train.run_folder import RunFolderError
from grasp.train.trainer import run_training

RUN_FILES = ("config.json", "eval_before", "eval_after", "results.json", "curves.png")


@dataclass
class RecordingProcess:
    is_main_process: bool
    waits: int = 0
    num_processes: int = 1
    timed: list[tuple[str, float]] = field(default_factory=list)
    """(what, timeout_s) of each timed barrier."""

    def wait_for_everyone(self) -> None:
        self.waits += 1


def compose(run_dir, model_dir, questions, index_dir):
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    from grasp.config import register_configs, to_dataclass
    from grasp.train.config import TrainConfig

    register_configs()
    overrides = [
        *tiny_run_overrides(run_dir, model_dir, questions, index_dir),
        "grpo.questions_per_step=1",
        "grpo.max_steps=1",
        "rollout.sampling.max_new_tokens=4",
        "eval_questions=2",
        "trajectories_every=0",
    ]
    with initialize_config_dir(str(REPO_ROOT / "configs"), version_base=None):
        cfg = hydra_compose("train", overrides=overrides)
    return to_dataclass(cfg, TrainConfig), OmegaConf.to_container(cfg, resolve=True)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, tiny_model_dir, tiny_questions_file):
    root = tmp_path_factory.mktemp("processes")
    index_dir = root / "index"
    done = {}
    for part, is_main in (("other", False), ("main", True)):
        run_dir = root / part
        config, resolved = compose(run_dir, tiny_model_dir, tiny_questions_file, index_dir)
        process = RecordingProcess(is_main)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(process_module, "timed_barrier", _recording(process))
            try:
                results = run_training(config, resolved, process=process)
            except RunFolderError as error:  # the other process, without a main one
                results = error
        done[part] = (run_dir, process, results)
    return done


def _recording(process: RecordingProcess):
    """The run's timed_barrier (``MainWrites``) as a process of a two-process launch meets it (the stand-in
    says it is the only process, so that the run validates as one): it waits, and records
    what it waits for and for how long."""

    def barrier(waiting, what, timeout_s):
        process.timed.append((what, timeout_s))
        waiting.wait_for_everyone()

    return barrier


def test_a_process_other_than_the_main_one_writes_no_run_file(runs):
    run_dir, process, results = runs["other"]
    assert not any((run_dir / name).exists() for name in RUN_FILES)
    # It returns what the main process wrote; here no main process wrote anything.
    assert str(results) == f"{run_dir / 'results.json'}: the main process wrote no results"
    assert (run_dir / "final").is_dir()  # the trainer's own saves are gated by the trainer


def test_the_main_process_writes_every_file_and_both_wait_alike(runs):
    run_dir, process, results = runs["main"]
    assert all((run_dir / name).exists() for name in RUN_FILES)
    assert results.steps == 1 and results.before is not None
    assert results.to_json() == json.loads((run_dir / "results.json").read_text())
    lines = (run_dir / "eval_after" / "trajectories.jsonl").read_text().splitlines()
    assert len(lines) == 2  # each evaluation question once
    # Every wait of one process is matched by the other's, or the launch would hang.
    assert process.waits == runs["other"][1].waits >= 4


def test_the_waits_for_the_main_processs_evaluations_are_timed_with_main_wait_s(runs):
    """A paper-scale evaluation outlasts the process group's 30-minute default: the others
    wait for it with ``main_wait_s`` (7200 s by default), and the main process meets them."""
    for part in ("main", "other"):
        timed = runs[part][1].timed
        assert timed == [
            ("the main process's eval_before", 7200.0),
            ("the main process's eval_after and results.json", 7200.0),
        ], part
