"""Thread counts: resolved from the process's cores, set for torch and FAISS, refused when bad."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import faiss
import pytest
import torch
from hydra import compose, initialize_config_dir

from grasp.config import register_configs, to_dataclass
from grasp.paths import REPO_ROOT
from grasp.threads import available_cores, resolve_threads, set_threads
from grasp.train.config import TrainConfig

register_configs()


@pytest.fixture
def restore_threads():
    before = torch.get_num_threads(), faiss.omp_get_max_threads()
    yield
    torch.set_num_threads(before[0])
    faiss.omp_set_num_threads(before[1])


def test_zero_means_the_cores_this_process_may_use():
    assert available_cores() == len(os.sched_getaffinity(0))
    assert resolve_threads(0) == available_cores() and resolve_threads(3) == 3


def test_set_threads_sets_torch_and_faiss(restore_threads):
    assert set_threads(1) == 1
    assert (torch.get_num_threads(), faiss.omp_get_max_threads()) == (1, 1)
    assert set_threads(0) == available_cores() == torch.get_num_threads()


@pytest.mark.parametrize("bad", [-1, True, 1.5])
def test_bad_thread_counts_are_refused_naming_the_field(bad):
    with pytest.raises(ValueError, match="threads must be 0"):
        resolve_threads(bad)


def test_a_negative_training_thread_count_fails_when_the_config_is_built():
    with initialize_config_dir(config_dir=str(REPO_ROOT / "configs"), version_base=None):
        with pytest.raises(ValueError, match="threads must be at least 0"):
            to_dataclass(compose("train", overrides=["threads=-2"]), TrainConfig)


def test_the_thread_benchmark_writes_a_row_per_count_and_condition(tmp_path):
    out = tmp_path / "threads.json"
    command = [sys.executable, str(REPO_ROOT / "scripts" / "bench_threads.py")]
    command += ["thread_counts=[1]", "seconds=0.1", f"out={out}"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    rows = json.loads(out.read_text())["rows"]
    assert [(r["threads"], r["busy_neighbour"]) for r in rows] == [(1, False), (1, True)]
    assert all(r["matmul_ms"] > 0 and r["encoder_sentences_per_s"] > 0 for r in rows)
    assert "| busy | 1 |" in result.stdout
