"""The merged copy rollouts generate with during a LoRA run: the adapted model's outputs up to
one rounding per weight, merged again after the adapters change (and only then), the trained
model itself untouched."""

from __future__ import annotations

import pytest
import torch

from grasp.rollout.adapters import MergedAdapters, adapter_version, lora_layers


@pytest.fixture
def lora_model():
    from peft import LoraConfig, get_peft_model
    from tiny_llama import tiny_llama_config
    from transformers import LlamaForCausalLM

    torch.manual_seed(0)
    base = LlamaForCausalLM(tiny_llama_config(120)).to(torch.bfloat16)
    config = LoraConfig(r=4, target_modules=["q_proj", "v_proj", "down_proj"])
    return get_peft_model(base, config, autocast_adapter_dtype=True)


def logits(model, ids):
    with torch.no_grad():
        return model(input_ids=ids).logits.float()


def test_the_copy_is_the_adapted_model_up_to_rounding_and_follows_the_adapters(lora_model):
    ids = torch.randint(0, 120, (2, 12), generator=torch.Generator().manual_seed(1))
    layers = lora_layers(lora_model)
    assert len(layers) == 2 * 3  # 2 layers x 3 adapted modules
    merged = MergedAdapters()
    copy = merged.of(lora_model)
    assert copy is not lora_model and not any(p.requires_grad for p in copy.parameters())
    # B starts at zero: the copy is the base model exactly.
    torch.testing.assert_close(logits(copy, ids), logits(lora_model, ids), atol=0, rtol=0)
    # An update writes the adapters in place, as the optimizer does.
    with torch.no_grad():
        for layer in layers.values():
            layer.lora_B["default"].weight.normal_(0, 0.2)
    version = adapter_version(layers.values())
    assert merged.of(lora_model) is copy, "one copy, merged again in place"
    assert adapter_version(layers.values()) == version, "merging does not touch the adapters"
    expected = logits(lora_model, ids)
    with lora_model.disable_adapter():
        base = logits(lora_model, ids)
    assert (expected - base).abs().max() > 0.1, "the update moved the adapted model"
    torch.testing.assert_close(logits(copy, ids), expected, atol=0.05, rtol=0.02)
    # Against peft's own merge of the same adapters: the same weights to one bf16 rounding.
    for name, layer in layers.items():
        target = copy.get_submodule(name.removeprefix("base_model.model.")).weight
        exact = layer.get_base_layer().weight.float() + layer.get_delta_weight("default").float()
        assert target.dtype == torch.bfloat16
        torch.testing.assert_close(target.float(), exact, atol=0, rtol=2**-8)


def test_the_copy_is_merged_only_when_the_adapters_changed(lora_model, monkeypatch):
    merged = MergedAdapters()
    merged.of(lora_model)
    calls = []
    monkeypatch.setattr(merged, "_merge", lambda: calls.append(1))
    merged.of(lora_model)
    assert calls == []
    with torch.no_grad():
        next(iter(lora_layers(lora_model).values())).lora_A["default"].weight.add_(1.0)
    merged.of(lora_model)
    assert calls == [1]


def test_a_model_without_adapters_is_its_own_rollout_model():
    from tiny_llama import tiny_llama_config
    from transformers import LlamaForCausalLM

    plain = LlamaForCausalLM(tiny_llama_config(50))
    assert lora_layers(plain) == {}
    assert MergedAdapters().of(plain) is plain
