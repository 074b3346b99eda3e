"""scripts/train.py end to end on a tiny model: bad configs fail first, a killed run resumes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grasp.paths import REPO_ROOT


def train_command(run_dir: Path, model_dir: Path, questions: Path, index_dir: Path, *extra: str):
    return [
        sys.executable,
        str(REPO_ROOT / "scripts" / "train.py"),
        "experiment=cpu_smoke",
        f"model.name={model_dir}",
        "model.dtype=float32",
        "model.chat_template=model",
        f"questions_path={questions}",
        f"index_dir={index_dir}",
        f"run_dir={run_dir}",
        "grpo.lora.enabled=false",
        "grpo.bf16=false",
        "grpo.questions_per_step=1",
        "rollout.sampling.max_new_tokens=8",
        "eval_questions=2",
        "trajectory_questions=1",
        *extra,
    ]


def run(command: list[str], timeout: float = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1"}
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("experiment=no_such_experiment", "no_such_experiment"),
        ("model.name=/no/such/model", "model.name"),
        ("env.top_k=100000", "env.top_k"),
        ("env.tools=[read_paragraph,answer]", "no search tool"),
        ("grpo.num_generations=1", "grpo.num_generations"),
        ("env.scope=everywhere", "env.scope"),
        ("grpo.learning_rat=1", "learning_rat"),
    ],
)
def test_bad_configuration_fails_before_any_work(
    tmp_path, tiny_model_dir, tiny_questions_file, override, message
):
    result = run(
        train_command(
            tmp_path / "run", tiny_model_dir, tiny_questions_file, tmp_path / "index", override
        ),
        timeout=120,
    )
    assert result.returncode != 0
    assert message in result.stdout + result.stderr
    assert not (tmp_path / "index").exists(), "no index was built"
    assert not (tmp_path / "run" / "metrics.jsonl").exists()


def test_a_killed_run_resumes_without_losing_or_repeating_steps(
    tmp_path, tiny_model_dir, tiny_questions_file
):
    run_dir, index_dir = tmp_path / "run", tmp_path / "index"
    command = train_command(
        run_dir,
        tiny_model_dir,
        tiny_questions_file,
        index_dir,
        "grpo.max_steps=6",
        "save_every=2",
        "trajectories_every=3",
    )
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1"}
    process = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
    )
    deadline = time.monotonic() + 600
    checkpoint = run_dir / "checkpoints" / "checkpoint-2"
    while not (checkpoint / "trainer_state.json").exists():
        assert process.poll() is None, "the run ended before its first checkpoint"
        assert time.monotonic() < deadline
        time.sleep(0.2)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not (run_dir / "results.json").exists(), "killed before the end"

    result = run(command)
    assert result.returncode == 0, result.stderr[-3000:]
    state = json.loads(
        (run_dir / "checkpoints" / "checkpoint-6" / "trainer_state.json").read_text()
    )
    steps = [h["step"] for h in state["log_history"] if "loss" in h]
    assert steps == [1, 2, 3, 4, 5, 6]
    results = json.loads((run_dir / "results.json").read_text())
    assert results["steps"] == 6
    assert "before" in results and "after" in results
    assert (run_dir / "trajectories" / "step_000006.jsonl").exists()
    assert (run_dir / "curves.png").exists()

    changed = train_command(
        run_dir, tiny_model_dir, tiny_questions_file, index_dir, "grpo.max_steps=6", "env.top_k=2"
    )
    refused = run(changed, timeout=120)
    assert refused.returncode != 0 and "another configuration" in refused.stderr
