"""grasp/train/process.py and the index a launch shares: a barrier that names what it waited
for when it times out, and a local index built by the main process alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import grasp.train.setup as train_setup
from grasp.corpus import IndexConfig
from grasp.paths import REPO_ROOT
from grasp.train.config import TrainConfig
from grasp.train.process import timed_barrier
from grasp.train.setup import shared_index

# One process of a two-process gloo group (a file rendezvous): the main one "builds" for
# SLEEP_S seconds before it reaches the barrier; each prints what the barrier did.
RANK_SCRIPT = """
import json, sys, time
import torch.distributed as dist
from grasp.train.process import timed_barrier

rank, init_file, sleep_s, timeout_s = int(sys.argv[1]), sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2)

class Process:
    is_main_process = rank == 0
    num_processes = 2
    def wait_for_everyone(self):
        raise AssertionError("a launch waits through torch.distributed")

if rank == 0:
    time.sleep(sleep_s)
try:
    timed_barrier(Process(), "the main process to build the index in /some/index", timeout_s)
    print(json.dumps({"rank": rank, "passed": True}))
except TimeoutError as error:
    print(json.dumps({"rank": rank, "passed": False, "error": str(error)}))
"""


def two_ranks(tmp_path: Path, sleep_s: float, timeout_s: float) -> dict[int, dict]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO_ROOT)}
    init_file = tmp_path / "rendezvous"
    ranks = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                RANK_SCRIPT,
                str(rank),
                str(init_file),
                str(sleep_s),
                str(timeout_s),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for rank in (0, 1)
    ]
    outcomes = {}
    for rank, process in enumerate(ranks):
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, err[-3000:]
        outcomes[rank] = json.loads(out.strip().splitlines()[-1])
    return outcomes


def test_the_timed_barrier_passes_when_everyone_arrives(tmp_path):
    outcomes = two_ranks(tmp_path, sleep_s=0.0, timeout_s=120.0)
    assert outcomes[0]["passed"] and outcomes[1]["passed"]


def test_a_barrier_waited_in_vain_fails_naming_what_it_waited_for(tmp_path):
    outcomes = two_ranks(tmp_path, sleep_s=8.0, timeout_s=2.0)
    waiting = outcomes[1]  # the other process, waiting for the main one
    assert not waiting["passed"]
    assert "waited 2 s for the main process to build the index in /some/index" in waiting["error"]


@dataclass
class StandIn:
    """A process of a two-process launch, without torch.distributed: it counts its waits."""

    is_main_process: bool
    num_processes: int = 2
    waits: int = 0

    def wait_for_everyone(self) -> None:
        self.waits += 1


@dataclass
class Calls:
    built: list[Path] = field(default_factory=list)
    opened: list[tuple[Path, bool]] = field(default_factory=list)
    """Each open_index: its folder, and whether it was given questions (may build)."""


@pytest.fixture
def calls(monkeypatch) -> Calls:
    seen = Calls()

    def build_index(questions, config, directory, source=None):
        seen.built.append(directory)

    def open_index(config, directory, questions=None, source=None):
        seen.opened.append((directory, questions is not None))
        return "index"

    monkeypatch.setattr(train_setup, "build_index", build_index)
    monkeypatch.setattr(train_setup, "open_index", open_index)
    return seen


@pytest.mark.parametrize("is_main", [True, False])
def test_only_the_main_process_builds_the_local_index(calls, tiny_questions, tmp_path, is_main):
    process = StandIn(is_main)
    index = shared_index(IndexConfig(), tmp_path, list(tiny_questions), TrainConfig(), process)
    assert index == "index"
    assert calls.built == ([tmp_path] if is_main else [])
    assert calls.opened == [(tmp_path, False)]  # loaded, not built again
    assert process.waits == 1  # the main process waits as well: the barrier is a meeting


def test_a_remote_index_or_a_single_process_waits_for_nobody(calls, tiny_questions, tmp_path):
    remote = IndexConfig(remote_url="http://127.0.0.1:1")
    for config, process in ((remote, StandIn(False)), (IndexConfig(), StandIn(True, 1))):
        shared_index(config, tmp_path, list(tiny_questions), TrainConfig(), process)
        assert process.waits == 0
    assert calls.built == []
    assert calls.opened == [(tmp_path, True), (tmp_path, True)]  # open_index checks or builds


def test_a_single_process_returns_from_the_timed_barrier_at_once():
    process = StandIn(True, num_processes=1)
    timed_barrier(process, "nothing", 0.001)
    assert process.waits == 0
