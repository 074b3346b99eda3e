"""A chat-level policy backend: any OpenAI-compatible ``/v1/chat/completions`` endpoint.

For evaluation and baselines with models served elsewhere (``vllm serve``, llama.cpp's server,
a hosted API). Requests go out concurrently from a thread pool; 429, 5xx, timeouts and
connection errors are retried with exponential backoff. The policy sends ``request.messages``
(and the tool schemas, when given, for servers that render them into the prompt) and returns
the assistant's text; structured ``tool_calls`` in the reply are rendered back into the Qwen
text form that ``grasp.env.parser`` reads::

    <tool_call>
    {"name": "semantic_search", "arguments": {"query": "..."}}
    </tool_call>

so one parser serves every backend. No token ids or log-probabilities come back: this policy
cannot be trained on. A request that still fails after the retries becomes
``Generation(text="", error=...)``; ``generate`` never raises.

Usage::

    policy = OpenAIChatPolicy("http://localhost:8000/v1", "Qwen/Qwen2.5-3B-Instruct",
                              tools=[tool_schema(name) for name in tool_names])
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import requests as http

from grasp.rollout.policy import Generation, GenerationRequest, SamplingConfig
from grasp.rollout.vllm_policy import request_seed

log = logging.getLogger(__name__)

_RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
_MAX_BACKOFF_S = 30.0


class _Retryable(Exception):
    """A failure worth another attempt (rate limit, server error, network)."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        """Seconds the server asked us to wait, when it said."""


class OpenAIChatPolicy:
    """A ``Policy`` calling an OpenAI-compatible chat-completions endpoint.

    Args:
        base_url: The API root including its version, e.g. ``http://localhost:8000/v1``;
            requests go to ``<base_url>/chat/completions``.
        model: The ``model`` field of each request (the served model's name).
        api_key: Sent as a bearer token when given.
        timeout: Seconds to wait for one HTTP response.
        max_retries: Further attempts after a retryable failure (0: a single attempt).
        max_concurrency: Requests in flight at once.
        tools: OpenAI-format tool schemas (``grasp.env.tool_specs.tool_schema``) sent with
            every request; None sends none (the tools are then described in the messages).
        backoff_s: First retry delay; doubles each retry (a server's Retry-After wins).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 3,
        max_concurrency: int = 8,
        tools: list[dict[str, Any]] | None = None,
        backoff_s: float = 1.0,
    ) -> None:
        if max_concurrency < 1 or max_retries < 0:
            raise ValueError("max_concurrency must be >= 1 and max_retries >= 0")
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.timeout = timeout
        self.max_retries = max_retries
        self.max_concurrency = max_concurrency
        self.tools = tools
        self.backoff_s = backoff_s
        self._headers = {"Content-Type": "application/json"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        # requests.Session is not documented as thread-safe: one per worker thread.
        self._local = threading.local()

    def generate(
        self, requests: Sequence[GenerationRequest], sampling: SamplingConfig
    ) -> list[Generation]:
        """One generation per request, in order; never raises."""
        if not requests:
            return []
        workers = min(self.max_concurrency, len(requests))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="openai-policy") as pool:
            futures = [
                pool.submit(self._generate_one, request, index, sampling)
                for index, request in enumerate(requests)
            ]
            return [future.result() for future in futures]

    def payload(self, request: GenerationRequest, index: int, sampling: SamplingConfig) -> dict:
        """The JSON body sent for one request."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": request.messages,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "max_tokens": min(request.max_new_tokens, sampling.max_new_tokens),
            "seed": request_seed(sampling.seed, request, index),
        }
        if self.tools:
            body["tools"] = self.tools
        return body

    def _generate_one(
        self, request: GenerationRequest, index: int, sampling: SamplingConfig
    ) -> Generation:
        try:
            reply = self._post_with_retries(self.payload(request, index, sampling))
            return reply_to_generation(reply)
        except Exception as error:  # noqa: BLE001 - a failed request is an episode error
            log.warning("chat completion failed for %r: %s", request.request_id, error)
            return Generation(text="", finished=False, error=f"{type(error).__name__}: {error}")

    def _post_with_retries(self, body: dict) -> dict:
        for attempt in range(self.max_retries + 1):
            try:
                return self._post(body)
            except _Retryable as error:
                if attempt == self.max_retries:
                    raise
                delay = error.retry_after
                if delay is None:
                    delay = self.backoff_s * 2**attempt
                log.info("retrying in %.2fs after: %s", delay, error)
                time.sleep(min(delay, _MAX_BACKOFF_S))
        raise AssertionError("unreachable")

    def _post(self, body: dict) -> dict:
        session = getattr(self._local, "session", None)
        if session is None:
            session = self._local.session = http.Session()
        try:
            response = session.post(
                self.url, json=body, headers=self._headers, timeout=self.timeout
            )
        except (http.ConnectionError, http.Timeout) as error:
            raise _Retryable(f"{type(error).__name__}: {error}") from error
        if response.status_code in _RETRY_STATUS:
            message = f"HTTP {response.status_code}: {response.text[:200]}"
            raise _Retryable(message, _retry_after(response))
        if response.status_code != 200:
            raise RuntimeError(f"HTTP {response.status_code}: {response.text[:500]}")
        return response.json()


def _retry_after(response: http.Response) -> float | None:
    """The server's Retry-After in seconds, when it gives a number."""
    try:
        return float(response.headers.get("Retry-After", ""))
    except ValueError:
        return None


def reply_to_generation(reply: dict) -> Generation:
    """Turn a chat-completions response body into a ``Generation``.

    Raises ValueError when the body has no ``choices[0].message``.
    """
    try:
        choice = reply["choices"][0]
        message = choice["message"]
    except (KeyError, IndexError, TypeError) as error:
        raise ValueError(f"malformed chat completion: {str(reply)[:200]}") from error
    content = message.get("content") or ""
    calls = [render_tool_call(call) for call in message.get("tool_calls") or []]
    text = "\n".join(([content] if content else []) + calls)
    finish_reason = choice.get("finish_reason")
    return Generation(
        text=text,
        finished=finish_reason != "length",
        extra={"finish_reason": finish_reason},
    )


def render_tool_call(call: dict) -> str:
    """One OpenAI ``tool_calls`` entry in Qwen's text form (the parser's input format).

    The ``arguments`` string is decoded when it is JSON; otherwise it is kept as a string,
    which the parser reports to the model as an invalid call.
    """
    function = call.get("function", call)
    arguments: Any = function.get("arguments", {})
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            pass
    body = json.dumps({"name": function.get("name"), "arguments": arguments}, ensure_ascii=False)
    return f"<tool_call>\n{body}\n</tool_call>"
