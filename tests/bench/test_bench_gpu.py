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
