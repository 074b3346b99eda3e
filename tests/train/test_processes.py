"""scripts/train.py under ``accelerate launch --num_processes 2`` on the CPU (gloo), for real.

One run of the tiny model, in two launches: the first over a local index (the main process
builds it, the other waits), killed once its first checkpoint is complete; the second
resumes it over a retrieval service that this test runs on 127.0.0.1, shared by both
processes. What they must show: each process rolled out its own questions, in whole groups;
each run-directory file was written once; the resumed run ends at the same step with each
step logged once; the final model loads.
tests/train/test_run_process.py plays the same parts in one process, without a launch.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from tiny_run import tiny_run_overrides

from grasp.paths import REPO_ROOT

pytestmark = pytest.mark.slow

PROCESSES = 2
G = 4
"""cpu_smoke's num_generations."""
STEPS = 2
EVAL_QUESTIONS = 2
LAUNCH_TIMEOUT_S = 1800
"""A bound for a loaded machine, not a measured time (about a minute each when idle)."""


def launch_command(run_dir: Path, model_dir: Path, questions: Path, index_dir: Path, *extra):
    # --multi_gpu selects torchrun; with model.device=cpu (use_cpu) accelerate's state is
    # MULTI_CPU over gloo. (--cpu alone would start a single process without mpirun.)
    return [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--multi_gpu",
        f"--num_processes={PROCESSES}",
        "--num_machines=1",
        "--mixed_precision=no",
        "--dynamo_backend=no",
        "--main_process_port=0",  # a free port
        str(REPO_ROOT / "scripts" / "train.py"),
        *tiny_run_overrides(run_dir, model_dir, questions, index_dir),
        "grpo.questions_per_step=2",  # one question (G samples) per process per step
        f"grpo.max_steps={STEPS}",
        "save_every=1",
        "rollout.sampling.max_new_tokens=8",
        f"eval_questions={EVAL_QUESTIONS}",
        "trajectories_every=2",
        "trajectory_questions=1",
        "threads=1",
        "env.demonstration=false",  # a short prompt: fewer tokens to score each step
        *extra,
    ]


def launch_env() -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "HF_HUB_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }


@dataclass
class Launch:
    run_dir: Path
    output: str
    seconds: float
    cpu_seconds: float | None
    """User + system CPU of the launcher and its workers (None: killed, not counted)."""


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def kill_launch(process: subprocess.Popen) -> None:
    """SIGKILL a launcher and its workers (torchrun starts each in a session of its own, so
    they are killed one by one): the launcher first, so that it restarts none of them."""
    import psutil

    if process.poll() is None:
        workers = psutil.Process(process.pid).children(recursive=True)
        process.send_signal(signal.SIGKILL)
        for worker in workers:
            worker.send_signal(signal.SIGKILL)
        psutil.wait_procs(workers, timeout=30)
    process.wait()


def run_dir_of(command: list[str]) -> Path:
    return Path(next(a for a in command if a.startswith("run_dir=")).split("=", 1)[1])


def launch(command: list[str]) -> Launch:
    """Run ``command`` to its end (or kill it past ``LAUNCH_TIMEOUT_S``)."""
    started, cpu = time.monotonic(), children_cpu_s()
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=launch_env()
    )
    try:
        output, _ = process.communicate(timeout=LAUNCH_TIMEOUT_S)
    finally:
        kill_launch(process)
    assert process.returncode == 0, output[-5000:]
    seconds = time.monotonic() - started
    return Launch(run_dir_of(command), output, seconds, children_cpu_s() - cpu)


def kill_after_checkpoint(command: list[str], checkpoint: Path) -> Launch:
    """Start ``command``, and kill it (``kill_launch``) once ``checkpoint`` is complete. Its
    output goes to a file beside the run directory (a pipe nobody reads would block it)."""
    log_file = checkpoint.parents[2] / "killed-launch.log"
    started = time.monotonic()
    with log_file.open("w") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=launch_env())
        deadline = time.monotonic() + LAUNCH_TIMEOUT_S
        try:
            while not (checkpoint / "trainer_state.json").exists():
                assert process.poll() is None, log_file.read_text()[-5000:]
                assert time.monotonic() < deadline, "no checkpoint in time"
                time.sleep(0.1)
        finally:
            kill_launch(process)
    # The killed workers were nobody's to wait for: their CPU is not counted.
    return Launch(run_dir_of(command), log_file.read_text(), time.monotonic() - started, None)


@contextmanager
def retrieval_service(index_dir: Path) -> Iterator[str]:
    """The real retrieval app over ``index_dir`` under uvicorn, in a thread of this process,
    on a loopback socket bound before it starts; yields its URL."""
    import uvicorn

    from grasp.corpus import CorpusIndex
    from grasp.serve.app import create_app
    from grasp.serve.config import ServiceConfig

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    app = create_app(CorpusIndex.load(index_dir).warm_up(), ServiceConfig())
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 300
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the service did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def rollout_records(run_dir: Path) -> dict[int, list[dict]]:
    return {
        int(path.stem.removeprefix("process-")): read_jsonl(path)
        for path in sorted((run_dir / "rollouts").glob("process-*.jsonl"))
    }


def step_lines(run_dir: Path) -> list[int]:
    """The step of each per-step line of metrics.jsonl (the closing summary left out)."""
    return [r["step"] for r in read_jsonl(run_dir / "metrics.jsonl") if "train_runtime" not in r]


@pytest.fixture(scope="module")
def run(tmp_path_factory, tiny_model_dir, tiny_questions_file) -> Launch:
    """One run, two launches: the first over a local index (built in the launch), killed once
    its first checkpoint is complete; the second resumes it over a retrieval service on that
    index (``index.remote_url`` may change on resume), shared by both of its processes."""
    root = tmp_path_factory.mktemp("launch")
    run_dir, index_dir = root / "run", root / "index"
    local = launch_command(run_dir, tiny_model_dir, tiny_questions_file, index_dir)
    first = kill_after_checkpoint(local, run_dir / "checkpoints" / "checkpoint-1")
    assert not (run_dir / "results.json").exists(), "killed before the end"
    with retrieval_service(index_dir) as url:
        resumed = launch([*local, f"index.remote_url={url}"])
    files = sorted(str(p.relative_to(run_dir)) for p in run_dir.rglob("*") if p.is_file())
    print(
        f"\nkilled launch: {first.seconds:.0f} s wall; resumed "
        f"launch: {resumed.seconds:.0f} s wall, {resumed.cpu_seconds:.0f} s CPU; "
        f"{len(files)} files: {files}"
    )
    return Launch(run_dir, first.output + resumed.output, first.seconds + resumed.seconds, None)


def test_each_process_rolls_out_its_own_questions_in_whole_groups(run):
    records = rollout_records(run.run_dir)
    assert sorted(records) == list(range(PROCESSES))
    eval_ids = {
        t["question_id"] for t in read_jsonl(run.run_dir / "eval_after" / "trajectories.jsonl")
    }
    for step in range(1, STEPS + 1):  # step 1 searched the local index, step 2 the service
        played = []
        for process, lines in records.items():
            mine = [r for r in lines if r["step"] == step and r["training"]]
            assert len(mine) == 1, f"process {process}, step {step}: {len(mine)} rollouts"
            record = mine[0]
            assert record["process_index"] == process
            groups: dict[int, set[str]] = {}
            for group_id, question_id in zip(
                record["group_ids"], record["question_ids"], strict=True
            ):
                groups.setdefault(group_id, set()).add(question_id)
            assert all(len(ids) == 1 for ids in groups.values()), "a group mixes questions"
            assert set(Counter(record["group_ids"]).values()) == {G}, "a group is split"
            played.append({next(iter(ids)) for ids in groups.values()})
        assert not played[0] & played[1], f"step {step}: both processes played one question"
        assert not set().union(*played) & eval_ids, "an evaluation question was trained on"


def test_each_run_file_is_written_once(run):
    run_dir = run.run_dir
    for name in ("config.json", "results.json", "curves.png", "final", "eval_before", "eval_after"):
        assert (run_dir / name).exists(), name
    for evaluation in ("eval_before", "eval_after"):
        ids = [t["question_id"] for t in read_jsonl(run_dir / evaluation / "trajectories.jsonl")]
        assert len(ids) == EVAL_QUESTIONS == len(set(ids)), evaluation
    sample = read_jsonl(run_dir / "trajectories" / f"step_{STEPS:06d}.jsonl")
    assert len(sample) == 1  # trajectory_questions, written by the main process alone
    # The main process built the index; the other one waited for it, and built nothing.
    assert run.output.count("waiting for the main process to build the index") == 1


def test_the_killed_launch_resumes_to_the_same_step_logging_each_step_once(run):
    run_dir = run.run_dir
    assert step_lines(run_dir) == list(range(1, STEPS + 1))
    state = json.loads(
        (run_dir / "checkpoints" / f"checkpoint-{STEPS}" / "trainer_state.json").read_text()
    )
    assert [h["step"] for h in state["log_history"] if "loss" in h] == list(range(1, STEPS + 1))
    results = json.loads((run_dir / "results.json").read_text())
    assert results["steps"] == STEPS and "before" in results
    for process, lines in rollout_records(run_dir).items():
        steps = [r["step"] for r in lines if r["training"]]
        assert steps == list(range(1, STEPS + 1)), f"process {process}"


def test_the_final_model_loads_with_the_last_checkpoints_weights(run):
    # A random tiny model earns reward 0 in every sample, so its advantages and gradients are
    # 0 and its weights may not move: what is checked is that final/ holds the trained state.
    import torch
    from transformers import AutoModelForCausalLM

    final = AutoModelForCausalLM.from_pretrained(run.run_dir / "final")
    last = AutoModelForCausalLM.from_pretrained(run.run_dir / "checkpoints" / f"checkpoint-{STEPS}")
    assert torch.isfinite(final(torch.tensor([[1, 2, 3]])).logits).all()
    expected = last.state_dict()
    for key, value in final.state_dict().items():
        assert torch.equal(value, expected[key]), key
