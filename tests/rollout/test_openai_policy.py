"""OpenAIChatPolicy against a real local HTTP server answering canned chat completions.

The last user message picks the server's behaviour, so one server serves every test.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler

import pytest

from grasp.env.parser import parse_turn
from grasp.env.tool_specs import tool_schema, tool_specs
from grasp.rollout.openai_policy import OpenAIChatPolicy, render_tool_call, reply_to_generation
from grasp.rollout.policy import GenerationRequest, Policy, SamplingConfig
from grasp.types import ToolName


def completion(
    content: str | None, tool_calls: list | None = None, finish_reason: str = "stop"
) -> dict:
    message: dict = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": "x",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
    }


TOOL_CALL = {
    "id": "call_1",
    "type": "function",
    "function": {
        "name": "semantic_search",
        "arguments": json.dumps({"query": "capital of Poland"}),
    },
}


@dataclass
class Server:
    url: str
    bodies: list[dict] = field(default_factory=list)
    headers: list[dict] = field(default_factory=list)
    hits: Counter = field(default_factory=Counter)


def _handler(server: Server) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # keep pytest output clean
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            server.bodies.append(body)
            server.headers.append(dict(self.headers))
            scenario = body["messages"][-1]["content"]
            server.hits[scenario] += 1
            if self.path != "/v1/chat/completions":
                return self._send(404, b"not found")
            if scenario == "fail once" and server.hits[scenario] == 1:
                return self._send(500, b"try again")
            if scenario == "always busy":
                return self._send(429, b"slow down", {"Retry-After": "0"})
            if scenario == "bad request":
                return self._send(400, b'{"error": "bad"}')
            if scenario == "malformed":
                return self._send(200, b"{not json")
            if scenario == "slow":
                time.sleep(0.5)
            replies = {
                "tool": completion("I will search.", [TOOL_CALL], "tool_calls"),
                "cut": completion("Once upon a", finish_reason="length"),
                "no choices": {"choices": []},
            }
            reply = replies.get(scenario, completion(f"echo: {scenario}"))
            self._send(200, json.dumps(reply).encode())

        def _send(self, status: int, data: bytes, headers: dict | None = None) -> None:
            self.send_response(status)
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            try:
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up first (the timeout test)

    return Handler


@pytest.fixture(scope="module")
def server(loopback) -> Iterator[Server]:
    state = Server(url="")
    with loopback(_handler(state)) as url:
        state.url = url
        yield state


def ask(*contents: str, max_new_tokens: int = 32) -> list[GenerationRequest]:
    return [
        GenerationRequest(
            messages=[{"role": "user", "content": c}],
            token_ids=None,
            max_new_tokens=max_new_tokens,
            request_id=f"r{i}",
        )
        for i, c in enumerate(contents)
    ]


def policy_for(server: Server, **kwargs) -> OpenAIChatPolicy:
    settings = {"timeout": 5.0, "max_retries": 2, "backoff_s": 0.01, **kwargs}
    return OpenAIChatPolicy(server.url + "/", "test-model", **settings)


def test_plain_replies_in_order_with_the_request_fields(server: Server) -> None:
    tools = [tool_schema(ToolName.SEMANTIC_SEARCH)]
    policy = policy_for(server, api_key="sk-test", tools=tools, max_concurrency=3)
    assert isinstance(policy, Policy)
    sampling = SamplingConfig(temperature=0.3, top_p=0.9, max_new_tokens=16, seed=7)
    contents = [f"question {i}" for i in range(6)]
    generations = policy.generate(ask(*contents), sampling)
    assert [g.text for g in generations] == [f"echo: {c}" for c in contents]
    assert all(g.error is None and g.finished and g.token_ids is None for g in generations)
    body = next(b for b in server.bodies if b["messages"][-1]["content"] == "question 0")
    assert body["model"] == "test-model" and body["tools"] == tools
    assert (body["temperature"], body["top_p"], body["max_tokens"]) == (0.3, 0.9, 16)
    assert isinstance(body["seed"], int)
    assert server.headers[-1]["Authorization"] == "Bearer sk-test"


def test_structured_tool_calls_become_parseable_text(server: Server) -> None:
    [generation] = policy_for(server).generate(ask("tool"), SamplingConfig())
    assert generation.text == (
        "I will search.\n<tool_call>\n"
        '{"name": "semantic_search", "arguments": {"query": "capital of Poland"}}\n</tool_call>'
    )
    parsed = parse_turn(generation.text, tool_specs([ToolName.SEMANTIC_SEARCH]))
    assert parsed.call is not None and parsed.call.arguments == {"query": "capital of Poland"}


def test_a_server_error_is_retried(server: Server) -> None:
    [generation] = policy_for(server).generate(ask("fail once"), SamplingConfig())
    assert generation.error is None and generation.text == "echo: fail once"
    assert server.hits["fail once"] == 2


def test_failures_become_errors_without_raising(server: Server) -> None:
    policy = policy_for(server, max_retries=1)
    started = time.monotonic()
    busy, bad, malformed, empty, cut = policy.generate(
        ask("always busy", "bad request", "malformed", "no choices", "cut"), SamplingConfig()
    )
    assert time.monotonic() - started < 3
    assert "429" in (busy.error or "") and server.hits["always busy"] == 2
    assert "400" in (bad.error or "") and server.hits["bad request"] == 1  # not retried
    assert malformed.error and empty.error and "malformed" in empty.error
    assert all(g.text == "" for g in (busy, bad, malformed, empty))
    assert cut.error is None and cut.text == "Once upon a" and not cut.finished


def test_timeouts_and_refused_connections_become_errors(server: Server) -> None:
    [slow] = policy_for(server, timeout=0.1, max_retries=0).generate(ask("slow"), SamplingConfig())
    assert slow.error and "Timeout" in slow.error
    refused = OpenAIChatPolicy("http://127.0.0.1:9/v1", "m", max_retries=1, backoff_s=0.01)
    [down] = refused.generate(ask("anyone?"), SamplingConfig())
    assert down.error and "ConnectionError" in down.error
    assert refused.generate([], SamplingConfig()) == []


def test_tool_call_rendering_edge_cases() -> None:
    raw = {"function": {"name": "answer", "arguments": "not json"}}
    assert render_tool_call(raw) == (
        '<tool_call>\n{"name": "answer", "arguments": "not json"}\n</tool_call>'
    )
    only_call = reply_to_generation(completion(None, [TOOL_CALL]))
    assert only_call.text.startswith("<tool_call>\n")
    with pytest.raises(ValueError, match="malformed"):
        reply_to_generation({"choices": [{}]})
