"""VLLMPolicy: imports and fails clearly without vLLM; its request and output mapping, driven by
a stand-in ``vllm`` module; and, where vLLM is installed (GPU), agreement with HFPolicy."""

from __future__ import annotations

import importlib.util
import sys
import types
from dataclasses import dataclass, field
from typing import Any

import pytest

from grasp.rollout.policy import GenerationRequest, Policy, SamplingConfig
from grasp.rollout.vllm_policy import VLLMPolicy, completion_to_generation, request_seed

HAS_VLLM = importlib.util.find_spec("vllm") is not None
EOT = 2
VOCAB = {0: "<unk>", 1: "<|im_start|>", 2: "<|im_end|>", 3: "Par", 4: "is", 5: " "}


class FakeTokenizer:
    eos_token_id = EOT

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [i for i, t in VOCAB.items() if t == text] or [0, 0]

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return "".join(VOCAB[i] for i in ids)


@dataclass
class FakeSamplingParams:
    kwargs: dict[str, Any]


def fake_output(ids: list[int], finish_reason: str, logprob: float = -0.25) -> Any:
    steps = [{t: types.SimpleNamespace(logprob=logprob)} for t in ids]
    completion = types.SimpleNamespace(token_ids=ids, logprobs=steps, finish_reason=finish_reason)
    return types.SimpleNamespace(outputs=[completion])


@dataclass
class FakeLLM:
    """Answers each prompt with its scripted ids, or raises when told to."""

    script: list[tuple[list[int], str]]
    fail: bool = False
    calls: list[tuple[list[dict], list[FakeSamplingParams]]] = field(default_factory=list)

    def get_tokenizer(self) -> FakeTokenizer:
        return FakeTokenizer()

    def generate(self, prompts, sampling_params, use_tqdm=True):
        self.calls.append((prompts, sampling_params))
        if self.fail:
            raise RuntimeError("engine died")
        return [fake_output(ids, reason) for ids, reason in self.script[: len(prompts)]]


@pytest.fixture
def fake_vllm(monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("vllm")
    module.SamplingParams = lambda **kwargs: FakeSamplingParams(kwargs)
    monkeypatch.setitem(sys.modules, "vllm", module)


def request(ids: list[int] | None, max_new_tokens: int = 8, rid: str = "") -> GenerationRequest:
    return GenerationRequest(
        messages=[], token_ids=ids, max_new_tokens=max_new_tokens, request_id=rid
    )


@pytest.mark.skipif(HAS_VLLM, reason="vLLM is installed")
def test_without_vllm_construction_says_how_to_install() -> None:
    with pytest.raises(ImportError, match=r"pip install grasp\[gpu\]"):
        VLLMPolicy(FakeLLM(script=[]))


def test_request_seed_is_stable_and_distinct() -> None:
    a = request([1, 2, 3], rid="q1/0")
    assert request_seed(0, a, 0) == request_seed(0, a, 7)  # batch position is irrelevant
    assert 0 <= request_seed(0, a, 0) < 2**31
    others = {
        request_seed(1, a, 0),
        request_seed(0, request([1, 2, 3], rid="q1/1"), 0),
        request_seed(0, request([1, 2, 3, 4], rid="q1/0"), 0),  # the next turn
        request_seed(0, a, 0),
    }
    assert len(others) == 4
    # Without episode ids, identical prompts (a GRPO group) still get different seeds.
    assert request_seed(0, request([1, 2]), 0) != request_seed(0, request([1, 2]), 1)


def test_generate_maps_requests_and_outputs(fake_vllm) -> None:
    llm = FakeLLM(script=[([3, 4, EOT], "stop"), ([5, 3, 4], "length")])
    policy = VLLMPolicy(llm)
    assert isinstance(policy, Policy)
    sampling = SamplingConfig(temperature=0.7, top_p=0.9, max_new_tokens=5, seed=11)
    requests = [request([1, 3], 8, "a"), request(None), request([1, 4], 3, "b")]
    generations = policy.generate(requests, sampling)

    [(prompts, params)] = llm.calls
    assert prompts == [{"prompt_token_ids": [1, 3]}, {"prompt_token_ids": [1, 4]}]
    assert [p.kwargs["max_tokens"] for p in params] == [5, 3]
    first = params[0].kwargs
    assert first["stop_token_ids"] == [EOT] and first["logprobs"] == 0
    assert first["seed"] == request_seed(11, requests[0], 0)
    assert first["include_stop_str_in_output"] and not first["skip_special_tokens"]
    assert (first["temperature"], first["top_p"]) == (0.7, 0.9)

    done, missing, cut = generations
    assert (done.text, done.token_ids, done.finished) == ("Paris", [3, 4, EOT], True)
    assert done.logprobs == [-0.25] * 3
    assert missing.error and missing.token_ids is None
    assert (cut.text, cut.finished, cut.extra["finish_reason"]) == (" Paris", False, "length")


def test_an_engine_failure_becomes_errors(fake_vllm) -> None:
    policy = VLLMPolicy(FakeLLM(script=[], fail=True))
    generations = policy.generate([request([1]), request([1, 3])], SamplingConfig())
    assert all("engine died" in (g.error or "") for g in generations)
    assert policy.generate([], SamplingConfig()) == []


def test_completion_without_logprobs() -> None:
    completion = types.SimpleNamespace(token_ids=[3, EOT], logprobs=None, finish_reason="stop")
    generation = completion_to_generation(completion, [EOT], FakeTokenizer())
    assert generation.logprobs is None and generation.text == "Par" and generation.finished


@pytest.mark.vllm
@pytest.mark.gpu
@pytest.mark.skipif(not HAS_VLLM, reason="needs vLLM (pip install grasp[gpu])")
def test_real_vllm_matches_hf_greedy() -> None:
    import torch
    from vllm import LLM

    from grasp.models import ModelConfig, load_policy_model, prepare_model
    from grasp.rollout.hf_policy import HFPolicy

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    path = prepare_model(ModelConfig())
    llm = LLM(
        str(path), dtype="float32", gpu_memory_utilization=0.3, logprobs_mode="processed_logprobs"
    )
    loaded = load_policy_model(ModelConfig(dtype="float32", device="cuda"))
    ids = loaded.tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is the capital of France?"}],
        add_generation_prompt=True,
        return_dict=False,
    )
    sampling = SamplingConfig(temperature=0.0, max_new_tokens=12)
    [expected] = HFPolicy(loaded.model, loaded.tokenizer).generate([request(ids, 12)], sampling)
    [actual] = VLLMPolicy(llm).generate([request(ids, 12)], sampling)
    assert actual.token_ids == expected.token_ids and actual.text == expected.text
    assert actual.logprobs == pytest.approx(expected.logprobs, abs=2e-2)
