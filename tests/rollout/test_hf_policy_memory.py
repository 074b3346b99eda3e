"""HFPolicy keeps one step of scores, not all of them, and its log-probabilities do not change.

The reference is what HFPolicy computed before: ``generate`` with the warpers in the generation
config and ``output_scores=True``, then ``log_softmax`` of every step's kept scores. On a tiny
random Llama (SmolLM2's tokenizer, 2 layers, 64 wide) both must give the same ids and the same
log-probabilities, greedy and sampled, with and without a nucleus.
"""

from __future__ import annotations

import pytest
import torch

from grasp.rollout.hf_policy import _NEUTRAL_ALWAYS, _NEUTRAL_SAMPLING, HFPolicy
from grasp.rollout.policy import GenerationRequest, SamplingConfig

STEPS = 10


@pytest.fixture(scope="module")
def tiny(tiny_model_dir):
    """The tiny random Llama (tests/conftest.py) and its tokenizer, padding on the left."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    tokenizer.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()
    return model, tokenizer


def prompts(tokenizer) -> list[list[int]]:
    texts = ("Who wrote Hamlet?", "Where was Hillary born? Answer briefly.", "Hi")
    return [tokenizer(t, add_special_tokens=False).input_ids for t in texts]


def old_computation(policy: HFPolicy, ids: list[list[int]], sampling: SamplingConfig):
    """HFPolicy's former ``_run``: every step's scores kept, then log_softmax of each."""
    from transformers import GenerationConfig

    width = max(len(r) for r in ids)
    input_ids = torch.full((len(ids), width), policy.pad_id, dtype=torch.long)
    attention = torch.zeros((len(ids), width), dtype=torch.long)
    for row, r in enumerate(ids):
        input_ids[row, width - len(r) :] = torch.tensor(r)
        attention[row, width - len(r) :] = 1
    sample = sampling.temperature > 0
    warpers = (
        {"temperature": sampling.temperature, "top_p": sampling.top_p, **_NEUTRAL_SAMPLING}
        if sample
        else {}
    )
    config = GenerationConfig(
        max_new_tokens=STEPS,
        do_sample=sample,
        eos_token_id=policy.stop_ids,
        pad_token_id=policy.pad_id,
        return_dict_in_generate=True,
        output_scores=True,
        **_NEUTRAL_ALWAYS,
        **warpers,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(sampling.seed)
        output = policy.model.generate(
            input_ids=input_ids, attention_mask=attention, generation_config=config
        )
    new_ids = output.sequences[:, width:]
    columns = [
        torch.log_softmax(scores.float(), dim=-1).gather(-1, new_ids[:, i : i + 1]).squeeze(-1)
        for i, scores in enumerate(output.scores)
    ]
    return new_ids.tolist(), torch.stack(columns, dim=1).tolist()


@pytest.mark.parametrize(
    "sampling",
    [
        SamplingConfig(temperature=0.0, max_new_tokens=STEPS),
        SamplingConfig(temperature=1.0, max_new_tokens=STEPS, seed=3),
        SamplingConfig(temperature=0.7, top_p=0.9, max_new_tokens=STEPS, seed=5),
    ],
    ids=["greedy", "sampled", "tempered-nucleus"],
)
def test_logprobs_equal_the_old_computation(tiny, sampling) -> None:
    model, tokenizer = tiny
    policy = HFPolicy(model, tokenizer)
    ids = prompts(tokenizer)
    # Longest first: HFPolicy batches in that order, and sampled rows depend on their order.
    ids.sort(key=len, reverse=True)
    old_ids, old_logprobs = old_computation(policy, ids, sampling)
    requests = [GenerationRequest([], r, STEPS, f"q{i}") for i, r in enumerate(ids)]
    generations = policy.generate(requests, sampling)
    for generation, expected_ids, expected in zip(generations, old_ids, old_logprobs, strict=True):
        assert generation.error is None
        n = len(generation.token_ids or [])
        assert generation.token_ids == expected_ids[:n]
        assert generation.logprobs == pytest.approx(expected[:n], abs=1e-6, rel=0)


def test_no_step_scores_are_kept(tiny, monkeypatch) -> None:
    model, tokenizer = tiny
    seen = []
    real_generate = model.generate

    def spy(*args, **kwargs):
        seen.append(kwargs["generation_config"])
        return real_generate(*args, **kwargs)

    monkeypatch.setattr(model, "generate", spy)
    requests = [GenerationRequest([], r, STEPS) for r in prompts(tokenizer)]
    HFPolicy(model, tokenizer).generate(requests, SamplingConfig(0.7, 0.9, STEPS, seed=1))
    assert seen and all(not config.output_scores for config in seen)


def test_warpers_after_ours_are_refused(tiny, monkeypatch) -> None:
    model, tokenizer = tiny
    monkeypatch.setattr(model.generation_config, "min_p", 0.05)
    with pytest.raises(ValueError, match="min_p"):
        HFPolicy(model, tokenizer)
