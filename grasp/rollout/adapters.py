"""LoRA adapters on top of a loaded policy model: how a trained run's policy is rebuilt.

A LoRA training run leaves adapters, not models: the warm start's adapter
(``RUN_DIR/warm_start/adapter``), merged into the base weights before GRPO, and GRPO's own
(``RUN_DIR/final``, or a checkpoint), which training applies unmerged. ``apply_adapters``
repeats exactly that: every adapter but the last is merged into the weights in order, the last
stays a PEFT adapter. A few MB of adapters plus the bundled base model give back the trained
policy, so a run's policy can be committed and evaluated without its full weights.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

ADAPTER_CONFIG = "adapter_config.json"


def check_adapter_dir(path: str | Path) -> Path:
    """``path`` as a folder holding a PEFT adapter; FileNotFoundError naming what is missing."""
    folder = Path(path)
    if not (folder / ADAPTER_CONFIG).is_file():
        raise FileNotFoundError(f"{folder} holds no LoRA adapter ({ADAPTER_CONFIG} missing)")
    return folder


def apply_adapters(model: Any, adapters: Sequence[str | Path]) -> Any:
    """``model`` with ``adapters`` applied in order: all merged but the last (kept as PEFT)."""
    if not adapters:
        return model
    from peft import PeftModel

    folders = [check_adapter_dir(a) for a in adapters]
    for folder in folders[:-1]:
        model = PeftModel.from_pretrained(model, str(folder)).merge_and_unload()
    wrapped = PeftModel.from_pretrained(model, str(folders[-1]))
    wrapped.eval()
    return wrapped
