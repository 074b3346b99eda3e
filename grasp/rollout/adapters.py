"""LoRA adapters on top of a loaded policy model: how a trained run's policy is rebuilt.

A LoRA training run leaves adapters, not models: the warm start's adapter
(``RUN_DIR/warm_start/adapter``), merged into the base weights before GRPO, and GRPO's own
(``RUN_DIR/final``, or a checkpoint), which training applies unmerged. ``apply_adapters``
merges them into the weights in that order. A few MB of adapters plus the bundled base model
give back the trained policy, so a run's policy can be committed and evaluated without its full
weights.

Merging the last adapter too is for speed: PEFT's unmerged adapter adds two small matmuls and
their Python dispatch to every adapted linear layer of every decoding step. On our 2 CPU cores
the merged SmolLM2 generates 1.2x (21-token prompts) to 1.6x (168-token prompts) faster
(``scripts/bench_adapters.py``, results/bench/adapters.json). The merged weights differ from
base + adapter by one rounding per weight in the model's dtype, so greedy decoding may part
from the unmerged model's at a near tie (in that benchmark: none of 32 sequences at 168 prompt
tokens, 20 of 32 at 21). TRL's vLLM rollouts generate with merged weights too.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")
"""The file names PEFT saves an adapter's weights under (safetensors, or the older pickle)."""


def check_adapter_dir(path: str | Path) -> Path:
    """``path`` as a folder holding a PEFT adapter; FileNotFoundError naming what is missing.

    A superseded run under results/ may keep its adapter's config but not its weights, to keep
    the repository light; its README names the commit that still holds them.
    """
    folder = Path(path)
    if not (folder / ADAPTER_CONFIG).is_file():
        raise FileNotFoundError(f"{folder} holds no LoRA adapter ({ADAPTER_CONFIG} missing)")
    if not any((folder / name).is_file() for name in ADAPTER_WEIGHTS):
        raise FileNotFoundError(
            f"{folder} holds a LoRA adapter's config but not its weights ({ADAPTER_WEIGHTS[0]} "
            "missing); if it is a committed run's, its README says which commit keeps them"
        )
    return folder


def apply_adapters(model: Any, adapters: Sequence[str | Path]) -> Any:
    """``model`` with ``adapters`` merged into its weights in order (a plain model again)."""
    if not adapters:
        return model
    from peft import PeftModel

    for folder in [check_adapter_dir(a) for a in adapters]:
        model = PeftModel.from_pretrained(model, str(folder)).merge_and_unload()
    model.eval()
    return model
