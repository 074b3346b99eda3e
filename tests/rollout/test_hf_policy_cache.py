"""HFPolicy(reuse_cache=True) on the real SmolLM2-135M-Instruct in float32: turns that continue
a kept KV cache generate what a full prefill generates, while prefilling only the new ids; the
rollout engine's episodes continue their caches turn after turn (what training relies on)."""

from __future__ import annotations

import pytest
import torch

from grasp.env.environment import EnvConfig, RetrievalEnvironment
from grasp.reward import DEFAULT_REWARD_CONFIG
from grasp.rollout.chat import ChatTokenizer
from grasp.rollout.engine import RolloutConfig, RolloutEngine
from grasp.rollout.hf_policy import HFPolicy
from grasp.rollout.policy import GenerationRequest, SamplingConfig

pytestmark = pytest.mark.slow

QUESTIONS = (
    "What is the capital of France?",
    "Who wrote the play Hamlet? Answer in one short sentence, please.",
    "Name a river in Africa.",
)
OBSERVATIONS = (
    "Paris is the capital and largest city of France.",
    "Hamlet is a tragedy written by William Shakespeare sometime between 1599 and 1601.",
    "The Nile.",
)
GREEDY = SamplingConfig(temperature=0.0, max_new_tokens=8)


def observation_ids(tokenizer, text: str) -> list[int]:
    """A tool response and the next assistant header, as the engine appends them."""
    rendered = (
        f"<|im_end|>\n<|im_start|>user\n<tool_response>\n{text}\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    return tokenizer.encode(rendered, add_special_tokens=False)


def play(policy: HFPolicy, tokenizer, turns: int, keep: list[list[int]]):
    """``turns`` turns of the three conversations (``keep[t]``: the ones still running at turn
    t); each turn's request is the last one, what it generated, and an observation. Returns
    every turn's generations and the ids each turn prefilled."""
    contexts = {
        f"q{i}": tokenizer.apply_chat_template(
            [{"role": "user", "content": q}], add_generation_prompt=True, return_dict=False
        )
        for i, q in enumerate(QUESTIONS)
    }
    played, prefilled = [], []
    for turn in range(turns):
        requests = [
            GenerationRequest([], list(contexts[f"q{i}"]), 4 + 2 * i, request_id=f"q{i}")
            for i in keep[turn]
        ]
        before = policy.prefilled_tokens
        generations = policy.generate(requests, GREEDY)
        prefilled.append(policy.prefilled_tokens - before)
        played.append(generations)
        for i, generation in zip(keep[turn], generations, strict=True):
            assert generation.error is None
            contexts[f"q{i}"] += (generation.token_ids or []) + observation_ids(
                tokenizer, OBSERVATIONS[i][: 10 * (turn + 1)]
            )
    return played, prefilled


def test_continued_turns_generate_as_a_full_prefill_does_from_fewer_ids(smollm2_fp32) -> None:
    keep = [[0, 1, 2], [0, 1, 2], [2, 0]]  # the third turn drops q1 and reorders the rows
    full, full_prefilled = play(
        HFPolicy(smollm2_fp32.model, smollm2_fp32.tokenizer), smollm2_fp32.tokenizer, 3, keep
    )
    policy = HFPolicy(smollm2_fp32.model, smollm2_fp32.tokenizer, reuse_cache=True)
    reused, prefilled = play(policy, smollm2_fp32.tokenizer, 3, keep)
    for turn_full, turn_reused in zip(full, reused, strict=True):
        assert [g.token_ids for g in turn_reused] == [g.token_ids for g in turn_full]
        for a, b in zip(turn_reused, turn_full, strict=True):
            assert a.logprobs == pytest.approx(b.logprobs, abs=1e-3)
            assert a.finished == b.finished
    # Turn 1 has no cache to continue; turns 2 and 3 prefill one left-padded block of the new
    # ids: the observation and the header after each row's (cached) generated ids.
    assert prefilled[0] == full_prefilled[0]
    for turn in (1, 2):
        assert 0 < prefilled[turn] < full_prefilled[turn] / 2
    assert len(policy._continuations) == 1


def test_a_changed_weight_or_a_rewritten_context_is_prefilled_in_full(smollm2_fp32) -> None:
    policy = HFPolicy(smollm2_fp32.model, smollm2_fp32.tokenizer, reuse_cache=True)
    plain = HFPolicy(smollm2_fp32.model, smollm2_fp32.tokenizer)
    (first,), _ = play(policy, smollm2_fp32.tokenizer, 1, [[0]])
    prompt = smollm2_fp32.tokenizer.apply_chat_template(
        [{"role": "user", "content": QUESTIONS[0]}], add_generation_prompt=True, return_dict=False
    )
    continued = prompt + first[0].token_ids + observation_ids(smollm2_fp32.tokenizer, "Paris.")
    # The history rewritten (one id of the prompt changed): no prefix of the cache.
    rewritten = [prompt[0] + 1, *continued[1:]]
    before = policy.prefilled_tokens
    [again] = policy.generate([GenerationRequest([], rewritten, 4, request_id="q0")], GREEDY)
    assert policy.prefilled_tokens - before == len(rewritten)
    [expected] = plain.generate([GenerationRequest([], rewritten, 4, request_id="q0")], GREEDY)
    assert again.token_ids == expected.token_ids
    # An in-place write to a parameter (an optimizer step) makes every kept cache stale.
    [_] = policy.generate([GenerationRequest([], continued, 4, request_id="q0")], GREEDY)
    longer = continued + observation_ids(smollm2_fp32.tokenizer, "Yes.")
    parameter = next(smollm2_fp32.model.parameters())
    with torch.no_grad():
        parameter.add_(0.0)
    before = policy.prefilled_tokens
    policy.generate([GenerationRequest([], longer, 4, request_id="q0")], GREEDY)
    assert policy.prefilled_tokens - before == len(longer)


def test_the_engines_episodes_continue_their_caches_and_play_as_without(
    smollm2_fp32, tiny_index, tiny_questions
) -> None:
    """The engine's next request of an episode is its last one, the generated ids, the
    observation and the assistant prefix: with reuse_cache every turn after the first continues
    the cache, and the trajectories (ids, loss mask, log-probabilities) are those of full
    prefills."""
    env = RetrievalEnvironment(tiny_index, EnvConfig(turn_budget=3, top_k=2))
    chat = ChatTokenizer(smollm2_fp32.tokenizer, env.prompt_tool_schemas)
    config = RolloutConfig(
        sampling=SamplingConfig(temperature=0.0, max_new_tokens=24),
        assistant_prefix='<tool_call>\n{"name": "',
    )

    def play(reuse_cache: bool):
        policy = HFPolicy(smollm2_fp32.model, smollm2_fp32.tokenizer, reuse_cache=reuse_cache)
        batch = RolloutEngine(env, policy, config, chat=chat).run(tiny_questions[:3])
        return batch.scored(DEFAULT_REWARD_CONFIG), policy.prefilled_tokens

    full, full_prefilled = play(False)
    reused, prefilled = play(True)
    assert max(t.turns_used for t in full) >= 2, "the test needs episodes of several turns"
    for a, b in zip(reused, full, strict=True):
        assert a.tokens.prompt_ids == b.tokens.prompt_ids
        assert a.tokens.completion_ids == b.tokens.completion_ids
        assert a.tokens.env_mask == b.tokens.env_mask
        assert a.tokens.logprobs == pytest.approx(b.tokens.logprobs, abs=1e-3)
    # Only the first turn prefills the prompts; later turns prefill what was appended.
    first_turn = sum(len(t.tokens.prompt_ids) for t in full)
    assert first_turn <= prefilled < full_prefilled
    assert prefilled - first_turn < (full_prefilled - first_turn) / 2
