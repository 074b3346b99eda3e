"""Rollout precision under full fine-tuning (issue: fp32 rollouts of fp32 master weights).

Full fine-tuning keeps the policy's weights in float32 (AdamW's master weights) and computes
the loss under bf16 autocast. Its rollouts and evaluations must run their matrix work in
bf16 too (``HFPolicy(autocast_dtype=...)``, chosen by ``grasp.train.trl_bridge.rollout_autocast``),
not in float32; LoRA and sharded runs already hold bf16 weights. Log-probabilities stay float32.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from grasp.rollout.hf_policy import HFPolicy
from grasp.rollout.policy import GenerationRequest, SamplingConfig
from grasp.train.config import GRPOSettings, LoraSettings, TrainConfig
from grasp.train.grpo_args import precision
from grasp.train.trl_bridge import policy_factory, rollout_autocast

FULL = LoraSettings(enabled=False)


@pytest.fixture(scope="module")
def tiny(tiny_model_dir):
    """The tiny random Llama (tests/conftest.py) in float32, as full fine-tuning loads it."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()
    return model, tokenizer


def head_dtypes(policy: HFPolicy) -> list[torch.dtype]:
    """The dtype of every logits tensor the LM head produced while ``policy`` generated."""
    seen: list[torch.dtype] = []
    handle = policy.model.lm_head.register_forward_hook(lambda m, a, out: seen.append(out.dtype))
    try:
        requests = [GenerationRequest([], [1, 2, 3, 4], 4, f"q{i}") for i in range(2)]
        generations = policy.generate(requests, SamplingConfig(temperature=1.0, max_new_tokens=4))
    finally:
        handle.remove()
    assert all(g.error is None and len(g.token_ids) == 4 for g in generations)
    assert all(isinstance(lp, float) for g in generations for lp in g.logprobs)
    return seen


def test_an_autocast_policy_runs_the_fp32_model_in_bf16_and_leaves_its_weights(tiny):
    model, tokenizer = tiny
    seen = head_dtypes(HFPolicy(model, tokenizer, autocast_dtype=torch.bfloat16))
    assert seen and set(seen) == {torch.bfloat16}
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    assert set(head_dtypes(HFPolicy(model, tokenizer))) == {torch.float32}


@pytest.mark.parametrize(
    ("grpo", "weights", "expected"),
    [
        (GRPOSettings(lora=FULL, bf16=True), torch.float32, torch.bfloat16),
        (GRPOSettings(lora=FULL, bf16=True, rollout_autocast=False), torch.float32, None),
        (GRPOSettings(lora=FULL, bf16=False), torch.float32, None),
        (GRPOSettings(bf16=True), torch.bfloat16, None),  # LoRA on bf16 weights
    ],
)
def test_rollouts_autocast_only_fp32_master_weights_of_a_bf16_run(tiny, grpo, weights, expected):
    model = (
        tiny[0]
        if weights == torch.float32
        else SimpleNamespace(
            get_input_embeddings=lambda: SimpleNamespace(weight=torch.zeros(1, dtype=weights))
        )
    )
    assert rollout_autocast(grpo, model) is expected


def test_full_fine_tunings_training_rollouts_generate_in_bf16_and_say_so(tiny):
    model, tokenizer = tiny
    config = TrainConfig(grpo=GRPOSettings(lora=FULL, bf16=True))
    trainer = SimpleNamespace(model=model, accelerator=SimpleNamespace(unwrap_model=lambda m: m))
    policy = policy_factory(config.grpo, tokenizer)(trainer)
    assert policy.autocast_dtype is torch.bfloat16
    assert set(head_dtypes(policy)) == {torch.bfloat16}
    assert precision(config.grpo, model) == {
        "weights": "float32",
        "rollouts": "bfloat16 autocast",
        "loss": "bfloat16 autocast",
        "logprobs": "float32",
    }
    fp32 = GRPOSettings(lora=FULL, bf16=False)
    assert precision(fp32, model) == {
        "weights": "float32",
        "rollouts": "float32",
        "loss": "float32",
        "logprobs": "float32",
    }
