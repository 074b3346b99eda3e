"""HFPolicy on the real SmolLM2-135M-Instruct (the models/ copy, prepared once per checkout).

Few new tokens per test keep the module fast on two CPU cores. Log-probabilities are checked
in float32 against a teacher-forced forward pass over prompt + generated ids.
"""

from __future__ import annotations

import logging
import math

import pytest
import torch

from grasp.models import ModelConfig, load_policy_model
from grasp.rollout.hf_policy import HFPolicy
from grasp.rollout.policy import Generation, GenerationRequest, Policy, SamplingConfig

pytestmark = pytest.mark.slow

QUESTIONS = (
    "What is the capital of France?",
    "Who wrote the play Hamlet? Answer in one short sentence, please.",
    "Write a long story about a dragon who learns to read, with many chapters and characters.",
)
GREEDY = SamplingConfig(temperature=0.0, max_new_tokens=12)


@pytest.fixture(scope="module")
def bf16():
    return load_policy_model(ModelConfig(dtype="bfloat16"))


@pytest.fixture(scope="module")
def prompts(bf16) -> list[list[int]]:
    """Three chat prompts of different lengths (so that left padding matters)."""
    rendered = [
        bf16.tokenizer.apply_chat_template(
            [{"role": "user", "content": q}], add_generation_prompt=True, return_dict=False
        )
        for q in QUESTIONS
    ]
    assert len({len(ids) for ids in rendered}) == 3
    return rendered


def requests_for(prompts: list[list[int]], max_new_tokens: int = 12) -> list[GenerationRequest]:
    return [
        GenerationRequest(
            messages=[], token_ids=ids, max_new_tokens=max_new_tokens, request_id=f"q{i}"
        )
        for i, ids in enumerate(prompts)
    ]


def forced_logprobs(model, prompt: list[int], new: list[int], temperature: float = 1.0):
    """[len(new)] log-probabilities of ``new`` after ``prompt`` from one forward pass."""
    with torch.no_grad():
        logits_TV = model(torch.tensor([prompt + new])).logits[0].float()
    steps_NV = logits_TV[len(prompt) - 1 : len(prompt) + len(new) - 1] / temperature
    logprobs_NV = torch.log_softmax(steps_NV, dim=-1)
    return logprobs_NV, logprobs_NV.gather(-1, torch.tensor(new)[:, None]).squeeze(-1)


def test_is_a_policy_that_answers_each_request_in_order(bf16, prompts) -> None:
    policy = HFPolicy(bf16.model, bf16.tokenizer)
    assert isinstance(policy, Policy)
    # What the engine relies on: generation i answers request i, whatever the batch order.
    sampling = SamplingConfig(temperature=0.0, max_new_tokens=4)
    forward = policy.generate(requests_for(prompts, 4), sampling)
    backward = policy.generate(requests_for(prompts, 4)[::-1], sampling)
    assert len(forward) == len(prompts) and all(g.token_ids for g in forward)
    assert len({tuple(g.token_ids) for g in forward}) > 1, "distinct prompts, distinct replies"
    assert [g.token_ids for g in backward] == [g.token_ids for g in forward][::-1]


def test_greedy_batch_equals_one_at_a_time(bf16, prompts) -> None:
    policy = HFPolicy(bf16.model, bf16.tokenizer)
    batched = policy.generate(requests_for(prompts), GREEDY)
    again = policy.generate(requests_for(prompts), GREEDY)
    alone = [policy.generate([r], GREEDY)[0] for r in requests_for(prompts)]
    assert [g.token_ids for g in batched] == [g.token_ids for g in again]
    assert [g.token_ids for g in batched] == [g.token_ids for g in alone]
    assert [g.text for g in batched] == [g.text for g in alone]
    for b, a in zip(batched, alone, strict=True):
        # bf16 logits near 20 are 0.125 apart, and padding shifts the sums; where the CPU
        # emulates bf16 (grasp.models.native_bfloat16) one step more was seen.
        assert b.logprobs == pytest.approx(a.logprobs, abs=0.25)
    micro = HFPolicy(bf16.model, bf16.tokenizer, max_batch_size=2)
    assert [g.token_ids for g in micro.generate(requests_for(prompts), GREEDY)] == [
        g.token_ids for g in batched
    ]


def test_each_request_stops_at_its_own_limit(bf16, prompts) -> None:
    policy = HFPolicy(bf16.model, bf16.tokenizer)
    requests = requests_for(prompts)
    for request, limit in zip(requests, (2, 5, 16), strict=True):
        request.max_new_tokens = limit
    sampling = SamplingConfig(temperature=0.0, max_new_tokens=10)  # caps the third at 10
    generations = policy.generate(requests, sampling)
    eot = policy.end_of_turn_id
    for generation, limit in zip(generations, (2, 5, 10), strict=True):
        assert generation.error is None
        ids = generation.token_ids or []
        if generation.finished:
            assert len(ids) <= limit and ids[-1] == eot and eot not in ids[:-1]
        else:
            assert len(ids) == limit and eot not in ids
    assert not generations[0].finished and not generations[2].finished


def test_text_round_trips_and_excludes_the_end_token(bf16, prompts) -> None:
    policy = HFPolicy(bf16.model, bf16.tokenizer)
    short = SamplingConfig(temperature=0.0, max_new_tokens=16)
    generations = policy.generate(requests_for(prompts, 16), short)
    assert generations[0].finished  # "The capital of France is Paris."
    for generation in generations:
        ids = generation.token_ids or []
        body = ids[:-1] if generation.finished else ids
        assert bf16.tokenizer.decode(body, skip_special_tokens=False) == generation.text
        assert "<|im_end|>" not in generation.text
        assert len(ids) == len(generation.logprobs or [])


def test_greedy_logprobs_are_the_maximum_under_teacher_forcing(smollm2_fp32, prompts) -> None:
    policy = HFPolicy(smollm2_fp32.model, smollm2_fp32.tokenizer)
    [generation] = policy.generate(requests_for(prompts[1:2], 8), GREEDY)
    ids, logprobs = generation.token_ids or [], generation.logprobs or []
    assert len(ids) == len(logprobs) > 0
    rows_NV, expected = forced_logprobs(smollm2_fp32.model, prompts[1], ids)
    assert logprobs == pytest.approx(expected.tolist(), abs=1e-2)
    assert logprobs == pytest.approx(rows_NV.max(dim=-1).values.tolist(), abs=1e-2)
    assert all(lp <= 0 for lp in logprobs)


def test_sampled_logprobs_are_of_the_tempered_distribution(smollm2_fp32, prompts) -> None:
    policy = HFPolicy(smollm2_fp32.model, smollm2_fp32.tokenizer)
    sampling = SamplingConfig(temperature=0.7, top_p=1.0, max_new_tokens=8, seed=5)
    [generation] = policy.generate(requests_for(prompts[2:], 8), sampling)
    ids = generation.token_ids or []
    _, tempered = forced_logprobs(smollm2_fp32.model, prompts[2], ids, temperature=0.7)
    assert generation.logprobs == pytest.approx(tempered.tolist(), abs=1e-2)
    # With a nucleus, the kept tokens' mass is renormalized: never less likely than tempered.
    nucleus = SamplingConfig(temperature=0.7, top_p=0.5, max_new_tokens=8, seed=5)
    [truncated] = policy.generate(requests_for(prompts[2:], 8), nucleus)
    _, tempered = forced_logprobs(smollm2_fp32.model, prompts[2], truncated.token_ids or [], 0.7)
    assert all(
        a >= b - 1e-4 for a, b in zip(truncated.logprobs or [], tempered.tolist(), strict=True)
    )


def test_model_generation_defaults_do_not_leak(smollm2_fp32, prompts, monkeypatch) -> None:
    # Qwen-style checkpoint defaults that generate() would otherwise apply to unset fields.
    config = smollm2_fp32.model.generation_config
    for name, value in {
        "do_sample": True,
        "temperature": 0.2,
        "top_k": 3,
        "top_p": 0.5,
        "repetition_penalty": 1.5,
        "no_repeat_ngram_size": 1,
    }.items():
        monkeypatch.setattr(config, name, value)
    policy = HFPolicy(smollm2_fp32.model, smollm2_fp32.tokenizer)
    sampling = SamplingConfig(temperature=1.0, max_new_tokens=8, seed=1)
    [generation] = policy.generate(requests_for(prompts[2:], 8), sampling)
    _, plain = forced_logprobs(smollm2_fp32.model, prompts[2], generation.token_ids or [])
    assert generation.logprobs == pytest.approx(plain.tolist(), abs=1e-2)


def test_sampling_is_reproducible_and_leaves_the_global_rng_alone(bf16, prompts) -> None:
    policy = HFPolicy(bf16.model, bf16.tokenizer)
    sampling = SamplingConfig(temperature=1.0, max_new_tokens=8, seed=3)
    state = torch.random.get_rng_state()
    first = policy.generate(requests_for(prompts, 8), sampling)
    assert torch.equal(torch.random.get_rng_state(), state)
    second = policy.generate(requests_for(prompts, 8), sampling)
    other = policy.generate(requests_for(prompts, 8), SamplingConfig(1.0, 1.0, 8, seed=4))
    assert [g.token_ids for g in first] == [g.token_ids for g in second]
    assert [g.token_ids for g in first] != [g.token_ids for g in other]
    for generation in first + other:
        logprobs = generation.logprobs or []
        assert len(logprobs) == len(generation.token_ids or [])
        assert all(math.isfinite(lp) and lp <= 0 for lp in logprobs)


def test_bad_requests_get_errors_and_spare_the_others(bf16, prompts) -> None:
    policy = HFPolicy(bf16.model, bf16.tokenizer)
    good = requests_for(prompts[:1], 6)[0]
    bad = [
        GenerationRequest(
            messages=[{"role": "user", "content": "hi"}], token_ids=None, max_new_tokens=6
        ),
        GenerationRequest(messages=[], token_ids=[], max_new_tokens=6),
        GenerationRequest(messages=[], token_ids=[1, 10**9], max_new_tokens=6),
        GenerationRequest(messages=[], token_ids=prompts[1], max_new_tokens=0),
    ]
    sampling = SamplingConfig(temperature=0.0, max_new_tokens=6)
    generations = policy.generate([bad[0], good, *bad[1:]], sampling)
    assert len(generations) == 5
    assert generations[1].error is None
    assert generations[1].token_ids == policy.generate([good], sampling)[0].token_ids
    for generation in generations[:1] + generations[2:]:
        assert generation.error and generation.text == "" and generation.token_ids is None
    assert policy.generate([], sampling) == []


def test_a_failed_batch_becomes_errors_and_the_next_batch_runs(
    bf16, prompts, monkeypatch, caplog
) -> None:
    real_generate = bf16.model.generate
    calls = []

    def out_of_memory_once(*args, **kwargs):
        calls.append(kwargs["input_ids"].shape[0])
        if len(calls) == 1:
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        return real_generate(*args, **kwargs)

    monkeypatch.setattr(bf16.model, "generate", out_of_memory_once)
    bf16.model.train()
    policy = HFPolicy(bf16.model, bf16.tokenizer, max_batch_size=2)
    with caplog.at_level(logging.ERROR, logger="grasp.rollout.hf_policy"):
        generations = policy.generate(requests_for(prompts, 2), SamplingConfig(0.0, 1.0, 2))
    assert bf16.model.training  # the caller's mode is restored
    bf16.model.eval()
    assert calls == [2, 1]
    # Rows are batched longest first: prompts 2 and 1 shared the failed batch.
    assert [g.error is not None for g in generations] == [False, True, True]
    assert "out of memory" in (generations[1].error or "")
    assert "generation failed" in caplog.text


def test_to_generation_cuts_at_the_stop_and_keeps_tool_call_tags(bf16) -> None:
    policy = HFPolicy(bf16.model, bf16.tokenizer)
    call = '<tool_call>\n{"name": "answer", "arguments": {"answer": "Paris"}}\n</tool_call>'
    ids = bf16.tokenizer.encode(call, add_special_tokens=False)
    assert all(t not in bf16.tokenizer.all_special_ids for t in ids)  # plain-text tags
    eot = policy.end_of_turn_id
    cut = policy.to_generation([*ids, eot, 17, eot], [-0.5] * (len(ids) + 3))
    assert cut == Generation(text=call, token_ids=[*ids, eot], logprobs=[-0.5] * (len(ids) + 1))
    open_ended = policy.to_generation(ids, [-0.5] * len(ids))
    assert open_ended.text == call and not open_ended.finished


def test_end_of_turn_token_must_be_one_token(bf16) -> None:
    with pytest.raises(ValueError, match="not a single token"):
        HFPolicy(bf16.model, bf16.tokenizer, end_of_turn_token="<|im_end|> and more")
