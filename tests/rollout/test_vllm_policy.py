"""The vLLM backends. VLLMPolicy: imports and fails clearly without vLLM; its request and output
mapping, driven by a stand-in ``vllm`` module; and, where vLLM is installed (GPU), agreement with
HFPolicy. VLLMServerPolicy: the requests it sends to a loopback HTTP server that speaks the
``/v1/completions`` protocol of ``vllm serve``, and how it reads the replies."""

from __future__ import annotations

import importlib.util
import json
import socket
import sys
import threading
import types
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from grasp.rollout.policy import GenerationRequest, Policy, SamplingConfig
from grasp.rollout.vllm_policy import (
    VLLMPolicy,
    VLLMServerPolicy,
    completion_to_generation,
    request_seed,
)

HAS_VLLM = importlib.util.find_spec("vllm") is not None
EOT = 2
ENDOFTEXT = 6
VOCAB = {
    0: "<unk>",
    1: "<|im_start|>",
    2: "<|im_end|>",
    3: "Par",
    4: "is",
    5: " ",
    6: "<|endoftext|>",
}


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


def test_colocated_stops_include_the_models_declared_eos(fake_vllm) -> None:
    llm = FakeLLM(script=[([3, ENDOFTEXT], "stop")])
    policy = VLLMPolicy(llm, generation_config={"eos_token_id": [EOT, ENDOFTEXT]})
    [generation] = policy.generate([request([1, 3], rid="a")], SamplingConfig())
    [(_, [params])] = llm.calls
    assert params.kwargs["stop_token_ids"] == [EOT, ENDOFTEXT]
    assert (generation.text, generation.token_ids, generation.finished) == ("Par", [3, 6], True)


# ------------------------------------------------------------------ VLLMServerPolicy


def stub_reply(body: dict) -> tuple[int, dict]:
    """What the stub server answers: a completion whose length is set by the request's seed.

    ``seed % 3 + 1`` copies of "Par" then the end of turn, cut at ``max_tokens``; a prompt that
    starts with id 99 gets HTTP 400.
    """
    [prompt] = body["prompt"]
    if prompt[0] == 99:
        return 400, {"error": "bad prompt"}
    ids = ([3] * (body["seed"] % 3 + 1) + [EOT])[: body["max_tokens"]]
    reason = "stop" if ids[-1] == EOT else "length"
    logprobs = {
        "tokens": [f"token_id:{t}" for t in ids],
        "token_logprobs": [-0.5] * len(ids),
        "top_logprobs": [{f"token_id:{t}": -0.5} for t in ids],
    }
    choice = {"index": 0, "token_ids": ids, "logprobs": logprobs, "finish_reason": reason}
    return 200, {"choices": [choice]}


@dataclass
class StubServer:
    url: str
    bodies: list[dict]


@pytest.fixture
def stub_server() -> Iterator[StubServer]:
    bodies: list[dict] = []
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, payload: dict) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path == "/health":
                self._send(200, {})
            elif self.path == "/v1/models":
                self._send(200, {"object": "list", "data": [{"id": "stub/qwen"}]})
            else:
                self._send(404, {})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with lock:
                bodies.append(body)
            self._send(*stub_reply(body))

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield StubServer(f"http://127.0.0.1:{server.server_address[1]}", bodies)
    finally:
        server.shutdown()
        server.server_close()


def test_server_policy_gives_each_sample_of_a_group_its_own_seed(stub_server) -> None:
    policy = VLLMServerPolicy.connect(
        stub_server.url, FakeTokenizer(), {"eos_token_id": [EOT, ENDOFTEXT]}, wait_s=5
    )
    assert isinstance(policy, Policy) and policy.model == "stub/qwen"
    sampling = SamplingConfig(temperature=1.0, top_p=0.9, max_new_tokens=8, seed=7)
    group = [request([1, 3], 8, f"q1#{g}") for g in range(3)]
    generations = policy.generate(group, sampling)

    bodies = sorted(stub_server.bodies, key=lambda b: b["seed"])
    expected_seeds = sorted(request_seed(7, r, i) for i, r in enumerate(group))
    assert [b["seed"] for b in bodies] == expected_seeds and len(set(expected_seeds)) == 3
    assert bodies[0] | {"seed": 0} == {
        "model": "stub/qwen",
        "prompt": [[1, 3]],
        "n": 1,
        "max_tokens": 8,
        "temperature": 1.0,
        "top_p": 0.9,
        "top_k": 0,
        "min_p": 0.0,
        "repetition_penalty": 1.0,
        "seed": 0,
        "stop_token_ids": [EOT, ENDOFTEXT],
        "logprobs": 0,
        "skip_special_tokens": False,
        "include_stop_str_in_output": True,
        "return_token_ids": True,
        "return_tokens_as_token_ids": True,
    }
    # Each reply reaches its own request, whatever order the concurrent requests ran in.
    for r, i, generation in zip(group, range(3), generations, strict=True):
        copies = request_seed(7, r, i) % 3 + 1
        assert generation.token_ids == [3] * copies + [EOT]
        assert generation.text == "Par" * copies and generation.finished
        assert generation.logprobs == [-0.5] * (copies + 1)


def test_server_policy_maps_limits_and_errors_per_request(stub_server) -> None:
    policy = VLLMServerPolicy.connect(stub_server.url, FakeTokenizer(), wait_s=5)
    sampling = SamplingConfig(temperature=0.0, top_p=0.5, max_new_tokens=8, seed=0)
    requests = [request([1, 3], 1, "a"), request(None), request([99, 1], 8, "b")]
    cut, missing, refused = policy.generate(requests, sampling)

    [body] = [b for b in stub_server.bodies if b["prompt"] == [[1, 3]]]
    assert (body["max_tokens"], body["temperature"], body["top_p"]) == (1, 0.0, 1.0)
    assert body["stop_token_ids"] == [EOT]
    assert (cut.token_ids, cut.text, cut.finished) == ([3], "Par", False)
    assert cut.extra["finish_reason"] == "length"
    assert missing.error and "token_ids" in missing.error and len(stub_server.bodies) == 2
    assert refused.error and "HTTP 400" in refused.error and "bad prompt" in refused.error
    assert policy.generate([], sampling) == []


def test_server_policy_without_a_server_names_the_field() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"  # bound, not listening: refused
        with pytest.raises(ConnectionError, match=r"grpo\.vllm_server_base_url=.*within 0 s"):
            VLLMServerPolicy.connect(url, FakeTokenizer(), wait_s=0)


def test_server_reply_without_logprobs_leaves_them_to_the_trainer() -> None:
    from grasp.rollout.vllm_policy import choice_to_generation

    choice = {"token_ids": [3, EOT], "logprobs": None, "finish_reason": "stop"}
    generation = choice_to_generation(choice, 8, [EOT], FakeTokenizer())
    assert (generation.logprobs, generation.text, generation.finished) == (None, "Par", True)
    nan = {
        "token_ids": [3],
        "logprobs": {"token_logprobs": [float("nan")]},
        "finish_reason": "length",
    }
    assert choice_to_generation(nan, 8, [EOT], FakeTokenizer()).logprobs is None


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
