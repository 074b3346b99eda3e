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

During training the adapters change every step: ``MergedAdapters`` keeps one merged copy of
the trained model and rewrites its adapted weights when the adapters changed, so that
transformers rollouts and the run's evaluations generate merged too
(``grpo.rollout_weights=merged``).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:  # peft is imported where a model has adapters
    from peft.tuners.lora import LoraLayer

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


class MergedAdapters:
    """A plain copy of a LoRA model with its active adapters merged into the weights, kept up
    to date with the adapters: what transformers rollouts generate with during training.

    ``of(model)`` returns the merged copy of ``model`` (a PEFT model with LoRA layers) and
    merges again the layers whose adapters changed since the last call (an optimizer step
    writes them in place, which tensor versions show); a model without LoRA layers is
    returned as it is. One copy is kept: the frozen base is copied once, each refresh rewrites
    the adapted layers' weights. Each merged weight is ``base + scale B A`` summed in float32
    and rounded once to the weights' dtype: the unmerged model up to that rounding."""

    def __init__(self) -> None:
        self._source: Any = None
        self._copy: Any = None
        self._targets: list[tuple[Any, torch.Tensor]] = []
        """(LoRA layer of the source, the copy's weight it merges into)."""
        self._version = -1

    def of(self, model: Any) -> Any:
        layers = lora_layers(model)
        if not layers:
            return model
        if self._source is not model:
            self._build(model, layers)
        version = adapter_version(layers.values())
        if version != self._version:
            self._merge()
            self._version = version
        return self._copy

    def _build(self, model: Any, layers: dict[str, Any]) -> None:
        merged = copy.deepcopy(model).merge_and_unload()
        merged.requires_grad_(False)
        merged.eval()
        # A PEFT model names its base model's modules under base_model.model.
        self._targets = [
            (layer, merged.get_submodule(name.removeprefix("base_model.model.")).weight)
            for name, layer in layers.items()
        ]
        self._source, self._copy, self._version = model, merged, -1

    @torch.no_grad()
    def _merge(self) -> None:
        for layer, weight in self._targets:
            merged = layer.get_base_layer().weight.float()
            for adapter in layer.active_adapters:
                if adapter in layer.lora_A:
                    merged = merged + layer.get_delta_weight(adapter).float()
            weight.copy_(merged.to(weight.dtype))


def lora_layers(model: Any) -> dict[str, LoraLayer]:
    """The LoRA layers of ``model`` by module name (none for a plain model)."""
    if not hasattr(model, "get_base_model"):
        return {}
    from peft.tuners.lora import LoraLayer

    return {name: m for name, m in model.named_modules() if isinstance(m, LoraLayer)}


def adapter_version(layers: Any) -> int:
    """A number that changes whenever an adapter weight of ``layers`` is written in place."""
    return sum(
        p._version
        for layer in layers
        for modules in (layer.lora_A, layer.lora_B)
        for module in modules.values()
        for p in module.parameters()
    )
