"""The CPU log-probabilities of the GRPO loss against TRL's fused LM head on the same model:
the same values, entropies and LoRA gradients, row by row without padding (the default) and
through the padded full-vocabulary path (the former one); only the scored positions read, in
chunks of any size; 0 on padding; TRL's path kept where ours does not apply."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from grasp.train.cpu_logprobs import (
    completion_logprobs,
    decoder_of,
    full_vocabulary_logprobs,
    fused_lora,
)
from grasp.train.trl_bridge import plain_head_applies

KEEP = 8  # completion positions scored per row


@pytest.fixture(scope="module")
def lora_llama():
    """The tiny Llama with LoRA adapters that are not zero (so their gradients are)."""
    from peft import LoraConfig, get_peft_model
    from tiny_llama import tiny_llama_config
    from transformers import LlamaForCausalLM
    from trl.trainer.utils import add_fused_lm_head

    torch.manual_seed(0)
    base = LlamaForCausalLM(tiny_llama_config(300, tie_word_embeddings=True)).float()
    lora = LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    model = get_peft_model(base, lora)
    add_fused_lm_head(model.get_base_model(), temperature=0.7, outputs=("log_probs", "entropy"))
    return model


def batch() -> tuple[torch.Tensor, torch.Tensor]:
    """Three rows as TRL lays them out: left-padded prompts, right-padded completions."""
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(1, 300, (3, 20), generator=generator)
    mask = torch.ones_like(ids)
    mask[0, :3] = 0  # prompt padding
    mask[1, -3:] = 0  # completion padding
    mask[2, :1] = 0
    mask[2, -1:] = 0
    return ids, mask


def fused(model, ids, mask):
    labels = ids.masked_fill(mask == 0, -100)
    labels[:, :-KEEP] = -100
    out = model(input_ids=ids, attention_mask=mask, labels=labels, fused_lm_head=True)
    return out.log_probs[:, -KEEP:], out.entropy[:, -KEEP:]


def lora_grads(model, logps: torch.Tensor, weights: torch.Tensor) -> dict[str, torch.Tensor]:
    model.zero_grad(set_to_none=True)
    (logps * weights).sum().backward()
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}


@pytest.mark.parametrize(
    "compute",
    [
        lambda *a, **k: completion_logprobs(*a, **k),
        lambda *a, **k: completion_logprobs(*a, chunk=3, **k),
        lambda *a, **k: full_vocabulary_logprobs(*a, batch_size=2, **k),
    ],
    ids=["rows", "rows-chunk-3", "full-vocab"],
)
def test_the_plain_head_gives_the_fused_heads_logprobs_entropies_and_gradients(lora_llama, compute):
    ids, mask = batch()
    weights = torch.randn(3, KEEP, generator=torch.Generator().manual_seed(2))
    expected, expected_entropy = fused(lora_llama, ids, mask)
    expected_grads = lora_grads(lora_llama, expected, weights)
    logps, entropy = compute(lora_llama, ids, mask, KEEP, temperature=0.7, compute_entropy=True)
    assert logps.shape == entropy.shape == (3, KEEP)
    torch.testing.assert_close(logps, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(entropy, expected_entropy.detach(), atol=1e-5, rtol=1e-5)
    assert not entropy.requires_grad, "the entropy is a metric: no gradient flows through it"
    grads = lora_grads(lora_llama, logps, weights)
    assert set(grads) == set(expected_grads) and grads
    for name, grad in grads.items():
        assert grad.abs().sum() > 0, name
        torch.testing.assert_close(grad, expected_grads[name], atol=1e-5, rtol=1e-4)
    # Completion padding scores 0; a real completion id never does.
    assert (logps[1, -3:] == 0).all() and (logps[2, -1:] == 0).all()
    assert (logps[0] < 0).all()


def test_only_the_scored_positions_are_read_and_the_rest_score_zero(lora_llama):
    ids, mask = batch()
    scored = torch.zeros(3, KEEP, dtype=torch.bool)
    scored[0, [1, 4]] = True
    scored[1, 0] = True
    scored[2, [2, KEEP - 1]] = True  # KEEP - 1 is padding in row 2: never scored
    everything, _ = completion_logprobs(lora_llama, ids, mask, KEEP)
    lengths = []
    handle = decoder_of(lora_llama).register_forward_pre_hook(
        lambda _m, _a, kwargs: lengths.append(kwargs["input_ids"].shape[1]), with_kwargs=True
    )
    try:
        logps, entropy = completion_logprobs(
            lora_llama, ids, mask, KEEP, scored=scored, compute_entropy=True
        )
    finally:
        handle.remove()
    read = scored & (mask[:, -KEEP:] == 1)
    torch.testing.assert_close(logps[read], everything[read], atol=1e-6, rtol=1e-6)
    assert (logps[~read] == 0).all() and (entropy[~read] == 0).all()
    assert (entropy[read] > 0).all()
    # Each row runs once, from its first real token to the one before its last scored id:
    # row 0 has 3 ids of prompt padding, row 2 one; row 1's last scored id is its first.
    width = ids.shape[1]
    assert lengths == [width - KEEP + 4 - 3, width - KEEP + 0, width - KEEP + 2 - 1]


def test_a_row_with_nothing_scored_runs_no_forward(lora_llama):
    ids, mask = batch()
    scored = torch.zeros(3, KEEP, dtype=torch.bool)
    calls = []
    handle = decoder_of(lora_llama).register_forward_pre_hook(lambda *_: calls.append(1))
    try:
        logps, _ = completion_logprobs(lora_llama, ids, mask, KEEP, scored=scored)
    finally:
        handle.remove()
    assert calls == [] and (logps == 0).all()
    with pytest.raises(ValueError, match="chunk must be >= 1"):
        completion_logprobs(lora_llama, ids, mask, KEEP, chunk=0)


def test_the_temperature_divides_the_logits(lora_llama):
    ids, mask = batch()
    with torch.no_grad():
        hot, _ = completion_logprobs(lora_llama, ids, mask, KEEP, temperature=0.7)
        cold, _ = completion_logprobs(lora_llama, ids, mask, KEEP, temperature=1.0)
        logits = lora_llama(input_ids=ids, attention_mask=mask).logits[:, -KEEP - 1 : -1]
    chosen = ids[:, -KEEP:, None]
    expected = (logits / 0.7).log_softmax(-1).gather(-1, chosen)[..., 0]
    torch.testing.assert_close(hot[0], expected[0], atol=1e-5, rtol=1e-5)
    assert not torch.allclose(hot[0], cold[0])


def trainer_like(**fields):
    config = SimpleNamespace(final_logit_softcapping=None, logit_scale=None)
    model = SimpleNamespace(config=config)
    trainer = SimpleNamespace(
        args=SimpleNamespace(cast_lm_head_to_fp32=False),
        _entropy_bonus_enabled=False,
        accelerator=SimpleNamespace(unwrap_model=lambda m: m),
    )
    for name, value in fields.items():
        target = config if name in vars(config) else trainer
        setattr(target, name, value)
    return trainer, model


@pytest.mark.parametrize(
    ("fields", "extra", "applies"),
    [
        ({}, {}, True),
        ({}, {"pixel_values": None, "token_type_ids": None}, True),
        ({}, {"pixel_values": torch.zeros(1)}, False),
        ({"_entropy_bonus_enabled": True}, {}, False),
        ({"final_logit_softcapping": 30.0}, {}, False),
        ({"logit_scale": 0.5}, {}, False),
    ],
)
def test_trls_fused_head_is_kept_where_the_plain_one_would_differ(fields, extra, applies):
    trainer, model = trainer_like(**fields)
    assert (
        plain_head_applies(trainer, model, torch.zeros(1, 2, dtype=torch.long), **extra) is applies
    )


def test_an_fp32_cast_head_and_a_gpu_batch_keep_trls_path():
    trainer, model = trainer_like()
    trainer.args.cast_lm_head_to_fp32 = True
    assert not plain_head_applies(trainer, model, torch.zeros(1, 2, dtype=torch.long))
    trainer.args.cast_lm_head_to_fp32 = False
    meta = torch.zeros(1, 2, dtype=torch.long, device="meta")
    assert not plain_head_applies(trainer, model, meta)


def test_fused_lora_is_peft_lora_under_autocast_and_only_within_its_block(lora_llama):
    from peft.tuners.lora import Linear as LoraLinear

    ids, mask = batch()
    weights = torch.randn(3, KEEP, generator=torch.Generator().manual_seed(3))

    def logps_and_grads():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logps, _ = completion_logprobs(lora_llama, ids, mask, KEEP)
        return logps.detach(), lora_grads(lora_llama, logps, weights)

    expected, expected_grads = logps_and_grads()
    with fused_lora(lora_llama):
        layers = [m for m in lora_llama.modules() if type(m) is LoraLinear]
        assert layers and all("forward" in vars(m) for m in layers)
        logps, grads = logps_and_grads()
        with lora_llama.disable_adapter(), torch.no_grad():
            with torch.autocast("cpu", dtype=torch.bfloat16):
                base_fused, _ = completion_logprobs(lora_llama, ids, mask, KEEP)
    assert not any("forward" in vars(m) for m in layers), "PEFT's forward is back"
    # One bf16 rounding of s B apart, on a 2-layer model: close, not bitwise.
    torch.testing.assert_close(logps, expected, atol=0.05, rtol=0.01)
    for name, grad in grads.items():
        assert (grad - expected_grads[name]).norm() < 0.02 * expected_grads[name].norm(), name
    with lora_llama.disable_adapter(), torch.no_grad():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            base, _ = completion_logprobs(lora_llama, ids, mask, KEEP)
    torch.testing.assert_close(base_fused, base, atol=0, rtol=0)
    assert (base - expected).abs().max() > 0.05, "the adapters move the log-probabilities"
