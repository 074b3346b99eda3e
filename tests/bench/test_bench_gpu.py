"""scripts/gpu_check.py (grasp/bench/gpu_driver.py, gpu.py, gpu_train.py) on the CPU at tiny
shapes (--dry-run): every phase runs in its own process, the training part through
scripts/train.py itself (full fine-tuning, a relaunch that resumes, LoRA), and the JSON says
what the GPU run will measure, so that on the GPU it only has to be started. And the driver's
time caps: a phase past its cap is killed with its children, keeping what it wrote."""

from __future__ import annotations

import json
import os
import sys
import time

import pytest
import torch

from grasp.bench import gpu, gpu_driver
from grasp.bench.gpu_train import DRY_POLICY, QUESTIONS, STEPS


def test_dry_run_measures_every_phase(tmp_path, capsys) -> None:
    out = tmp_path / "gpu_check.json"
    assert gpu_driver.main(["--dry-run", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    shapes = gpu.DRY
    assert list(report["phase_seconds"]) == [p.name for p in gpu_driver.PHASES]
    assert gpu_driver.DEFAULT_BUDGET_S == 350  # the caps: under 6 minutes on the GPU machine

    assert report["environment"]["dry_run"] and report["environment"]["device"] == "cpu"
    assert report["model"]["config"] == "configs/gpu_check/qwen2.5_3b_config.json"

    # The training part: scripts/train.py ran each configuration to the end.
    train = report["train"]
    for name, steps in (("full", STEPS), ("resume", STEPS + 1), ("lora", STEPS)):
        run = train[name]
        assert run["exit_code"] == 0 and "error" not in run, run.get("log_tail")
        assert [s["step"] for s in run["steps"]] == list(range(1, steps + 1))
        assert all(s["step_s"] > 0 and s["rollout_s"] > 0 for s in run["steps"])
        assert run["trained_steps"] == steps and run["final"]
        assert run["warm_start"]["episodes_played"] == 2
    # The relaunch continued from the last checkpoint of the 2-step run, and trained 1 step.
    assert train["resume"]["resumed_from"] == f"checkpoint-{STEPS}"
    assert train["full"]["resumed_from"] is None
    assert train["resume"]["checkpoints"][-1] == f"checkpoint-{STEPS + 1}"
    assert train["full"]["precision"]["weights"] == "float32"  # full fine-tuning's master weights
    assert "model.device=cpu" in train["lora"]["overrides"]
    assert "grpo.lora.enabled=true" in train["lora"]["overrides"]
    policy = json.loads((tmp_path / "gpu_check-work" / "policy" / "config.json").read_text())
    assert policy["hidden_size"] == DRY_POLICY["hidden_size"]
    questions = (tmp_path / "gpu_check-work" / "questions.jsonl").read_text().splitlines()
    assert len(questions) == QUESTIONS

    full, lora = report["grpo_step"]["full_fp32_master"], report["grpo_step"]["lora"]
    # Full fine-tuning alone keeps fp32 master weights; LoRA trains adapters on a bf16 base.
    assert (full["weights_dtype"], lora["weights_dtype"]) == ("float32", "bfloat16")
    assert full["trainable_parameters"] == full["parameters"]
    assert 0 < lora["trainable_parameters"] < lora["parameters"]
    for phase in (full, lora):
        [(seq_len, timing)] = phase["by_seq_len"].items()
        assert int(seq_len) == shapes.seq_lens[0] and "error" not in timing
        assert timing["micro_batch_s"] > 0 and timing["optimizer_step_s"] > 0

    rollout = report["rollout_hf"]["by_batch"]
    assert sorted(rollout) == sorted(str(b) for b in [1, *shapes.rollout_batches])
    batch = rollout[str(shapes.rollout_batches[0])]
    assert batch["errors"] == 0 and batch["tokens_per_s"] > 0
    assert 0 < batch["generated_tokens"] <= shapes.rollout_batches[0] * shapes.rollout_new_tokens
    # <|im_end|> of the byte-level tokenizer first, then the config's eos.
    assert report["rollout_hf"]["stop_ids"] == [258, 151645]

    dense = report["dense_search"]
    assert dense["topk_overlap"] == 1.0  # fp32 on both sides: the same exact top-k
    assert dense["gpu"]["seconds_per_batch"] > 0 and dense["cpu"]["seconds_per_batch"] > 0
    assert 0 < report["elapsed_s"] and "train.lora: done" in capsys.readouterr().out


STUBBORN = """
import json, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
open(sys.argv[2], "w").write(str(child.pid))
json.dump({"by_batch": {"1": {"seconds": 0.5}}}, open(sys.argv[1], "w"))
time.sleep(60)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a killed child not yet reaped is a zombie
        return stat.read().split()[2] != "Z"


def test_a_phase_past_its_cap_is_killed_with_its_children_keeping_what_it_wrote(tmp_path):
    part, pid_file = tmp_path / "p.part.json", tmp_path / "child.pid"
    start = time.monotonic()
    command = [sys.executable, "-c", STUBBORN, str(part), str(pid_file)]
    result = gpu_driver.run_capped(command, part, cap=2.0, grace_s=0.5)
    assert time.monotonic() - start < 30
    assert result["by_batch"] == {"1": {"seconds": 0.5}}  # what it measured before the cap
    assert result["error"].startswith("time cap of 2 s reached")
    deadline = time.monotonic() + 5
    while _alive(int(pid_file.read_text())) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(int(pid_file.read_text())), "the phase's own child was killed too"


def test_a_failed_phase_process_is_recorded_with_its_output(tmp_path):
    part = tmp_path / "p.part.json"
    command = [sys.executable, "-c", "print('CUDA out of memory'); raise SystemExit(3)"]
    result = gpu_driver.run_capped(command, part, cap=30.0)
    assert result["error"] == "the phase's process exited with 3"
    assert "CUDA out of memory" in result["log_tail"]


def test_a_phase_with_no_budget_left_is_skipped_and_the_json_still_written(tmp_path):
    report = gpu_driver.Report(environment={}, shapes={})
    run = gpu_driver.RunSettings(tmp_path / "r.json", budget_s=5.0, started=time.monotonic())
    gpu_driver.run_phase(report, gpu_driver.Phase("rollout_hf", 45), run)
    written = json.loads(run.out.read_text())
    assert "budget of 5 s is spent" in written["rollout_hf"]["skipped"]
    assert not (tmp_path / "r.rollout_hf.part.json").exists(), "no process was started"


def test_an_unknown_phase_is_refused_naming_the_phases(capsys) -> None:
    with pytest.raises(SystemExit) as stop:
        gpu_driver.main(["--dry-run", "--phases", "train.ful", "--out", "/nonexistent/x.json"])
    assert stop.value.code == 2 and "train.full" in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is here")
def test_without_a_gpu_the_full_run_says_to_use_dry_run(capsys) -> None:
    with pytest.raises(SystemExit) as stop:
        gpu_driver.main(["--out", "/nonexistent/never.json"])
    assert stop.value.code == 2 and "--dry-run" in capsys.readouterr().err


def test_the_carry_folder_holds_the_tokenizers_the_training_part_loads(tmp_path) -> None:
    from transformers import AutoTokenizer

    assert gpu_driver.main(["--carry", str(tmp_path / "carry")]) == 0
    smollm2 = AutoTokenizer.from_pretrained(tmp_path / "carry" / "smollm2")
    minilm = AutoTokenizer.from_pretrained(tmp_path / "carry" / "minilm")
    assert smollm2.convert_tokens_to_ids("<|im_end|>") == 2 and len(smollm2) == 49152
    assert minilm("a b").input_ids[0] == minilm.cls_token_id
    total = sum(f.stat().st_size for f in (tmp_path / "carry").rglob("*") if f.is_file())
    assert total < 5 * 2**20


PHASE_STUB = """
import json, os, subprocess, sys, time
from grasp.bench import gpu_driver

gpu_driver.end_descendants_on_termination()  # what every phase's process does first
part = sys.argv[sys.argv.index("--part") + 1]
# A child in a session of its own, as a training phase's scripts/train.py is.
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
json.dump({"by_batch": {"1": {"seconds": 0.5}}}, open(part, "w"))
open(os.environ["STUB_PIDS"], "w").write(f"{os.getpid()} {child.pid}")
time.sleep(120)
"""

DRIVER = """
import sys
from pathlib import Path
from grasp.bench import gpu_driver

gpu_driver.SCRIPT = Path(sys.argv[1])
sys.exit(gpu_driver.main(["--dry-run", "--phases", "rollout_hf,dense_search", "--out", sys.argv[2]]))
"""


def _start_driver(tmp_path):
    """scripts/gpu_check.py's driver with a stub phase that measured something and waits, its
    own child in another session; (driver, phase pid, phase's child pid, JSON path)."""
    import subprocess

    from grasp.paths import REPO_ROOT

    stub, out, pids = tmp_path / "phase.py", tmp_path / "check.json", tmp_path / "pids"
    stub.write_text(PHASE_STUB)
    env = {**os.environ, "STUB_PIDS": str(pids), "PYTHONPATH": str(REPO_ROOT)}
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(stub), str(out)], cwd=REPO_ROOT, env=env
    )
    deadline = time.monotonic() + 120
    while not (pids.is_file() and len(pids.read_text().split()) == 2):
        assert driver.poll() is None and time.monotonic() < deadline, "the phase never started"
        time.sleep(0.1)
    phase, child = map(int, pids.read_text().split())
    return driver, phase, child, out


def _ended(*pids: int, wait_s: float = 10.0) -> bool:
    deadline = time.monotonic() + wait_s
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not any(_alive(pid) for pid in pids)


@pytest.mark.parametrize(("signum", "code"), [("SIGINT", 130), ("SIGTERM", 143)])
def test_a_stopped_check_ends_its_phase_and_the_phases_children_and_leaves_valid_json(
    tmp_path, signum, code
):
    """Issue 48 (minor): killed, the check left its phase and the phase's train.py running;
    interrupted with Ctrl-C in phase 1, it left no JSON at all."""
    import signal

    driver, phase, child, out = _start_driver(tmp_path)
    driver.send_signal(getattr(signal, signum))
    assert driver.wait(timeout=60) == code
    assert _ended(phase, child), "the phase and its child in another session were ended"
    report = json.loads(out.read_text())
    assert report["stopped"] == signum
    stopped = report["rollout_hf"]
    assert stopped["by_batch"] == {"1": {"seconds": 0.5}}  # what it measured is kept
    assert stopped["error"] == f"stopped by {signum} during this phase (what it measured is kept)"
    assert report["dense_search"] == {} and list(report["phase_seconds"]) == ["rollout_hf"]


def test_a_check_killed_outright_leaves_no_phase_running_and_its_json_readable(tmp_path):
    """SIGKILL cannot be handled: the phase's process learns of it (its parent-death signal)
    and ends what it started; the JSON written before the first phase stays valid."""
    import signal

    driver, phase, child, out = _start_driver(tmp_path)
    driver.send_signal(signal.SIGKILL)
    driver.wait(timeout=60)
    assert _ended(phase, child), "the phase and its child in another session were ended"
    report = json.loads(out.read_text())
    assert report["environment"]["dry_run"] and report["rollout_hf"] == {}


def test_a_phase_that_leaves_a_child_in_its_session_has_it_ended(tmp_path):
    part, pid_file = tmp_path / "p.part.json", tmp_path / "child.pid"
    leaves = (
        "import subprocess, sys; child = subprocess.Popen([sys.executable, '-c', "
        "'import time; time.sleep(60)']); open(sys.argv[1], 'w').write(str(child.pid))"
    )
    result = gpu_driver.run_capped([sys.executable, "-c", leaves, str(pid_file)], part, cap=30.0)
    assert "error" not in result
    assert _ended(int(pid_file.read_text())), "no process of the phase outlives it"


def test_no_phase_at_all_still_writes_the_json(tmp_path, capsys):
    """Issue 48 (minor): ``--phases ""`` printed the JSON but wrote no --out file."""
    out = tmp_path / "check.json"
    assert gpu_driver.main(["--dry-run", "--phases", "", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["phase_seconds"] == {} and report["stopped"] is None
    assert report["environment"]["dry_run"] is True
    assert json.loads(capsys.readouterr().out) == report
