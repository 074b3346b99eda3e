"""grasp/bench/gpu.py (scripts/gpu_check.py) at tiny shapes on the CPU (--dry-run): every phase
runs and the JSON says what the GPU run will measure, so that on the GPU it only has to be
started."""

from __future__ import annotations

import json

import pytest
import torch

from grasp.bench import gpu as gpu_check


def test_dry_run_measures_every_phase(tmp_path, capsys) -> None:
    out = tmp_path / "gpu_check.json"
    assert gpu_check.main(["--dry-run", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    shapes = gpu_check.DRY

    assert report["environment"]["dry_run"] and report["environment"]["device"] == "cpu"
    assert report["model"]["config"] == "configs/gpu_check/qwen2.5_3b_config.json"
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
    assert 0 < report["elapsed_s"] and "grpo_step.lora: done" in capsys.readouterr().out


def test_a_failed_phase_is_recorded_and_the_others_still_run(tmp_path) -> None:
    report = gpu_check.Report(environment={}, shapes={})
    run = gpu_check.RunSettings(tmp_path / "r.json", budget_s=60.0, started=0.0)
    run.started = __import__("time").perf_counter()

    def broken() -> dict:
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 9.96 GiB")

    gpu_check.run_phase(report, "grpo_step", "lora", broken, run)
    gpu_check.run_phase(report, "dense_search", None, lambda: {"speedup": 3.0}, run)
    written = json.loads(run.out.read_text())
    assert written["grpo_step"]["lora"]["error"].startswith("OutOfMemoryError: CUDA out of")
    assert written["dense_search"] == {"speedup": 3.0}
    run.budget_s = 0.0
    gpu_check.run_phase(report, "rollout_hf", None, lambda: {"never": 1}, run)
    assert "time budget" in json.loads(run.out.read_text())["rollout_hf"]["skipped"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is here")
def test_without_a_gpu_the_full_run_says_to_use_dry_run(capsys) -> None:
    with pytest.raises(SystemExit) as stop:
        gpu_check.main(["--out", "/nonexistent/never.json"])
    assert stop.value.code == 2 and "--dry-run" in capsys.readouterr().err
