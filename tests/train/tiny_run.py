"""The overrides that make scripts/train.py a run of the tiny model on the tiny questions, in
full fine-tuning and float32: shared by the tests that train for real (one process, a
relaunched run, two processes), each adding its own steps, batch and evaluation."""

from __future__ import annotations

from pathlib import Path


def tiny_run_overrides(
    run_dir: Path, model_dir: Path, questions: Path, index_dir: Path
) -> list[str]:
    return [
        "experiment=cpu_smoke",
        f"model.name={model_dir}",
        "model.dtype=float32",
        "model.chat_template=model",
        f"questions_path={questions}",
        f"index_dir={index_dir}",
        f"run_dir={run_dir}",
        "grpo.lora.enabled=false",
        "grpo.bf16=false",
    ]
