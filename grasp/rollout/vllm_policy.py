"""The vLLM policy backends: a colocated ``vllm.LLM`` engine, or a vLLM server over HTTP (GPU).

``VLLMPolicy.generate`` sends every request's ``token_ids`` to one ``llm.generate`` call with
one ``SamplingParams`` per request (its own ``max_tokens`` and seed), stopping at the
end-of-turn token, and maps each output to a ``Generation`` with the same meaning as
``HFPolicy``'s: ``token_ids`` include the stop token when the turn ended, ``text`` does not.

``VLLMServerPolicy`` does the same against a ``trl vllm-serve`` (that is, ``vllm serve``) server
through its OpenAI-compatible ``/v1/completions`` route, one HTTP request per episode, sent
concurrently: every training process builds its own (``VLLMServerPolicy.connect``) and
generates its own episodes, while pushing new weights to the server stays with TRL's client on
the main process.

Usage (on a GPU machine, ``pip install grasp[gpu]``)::

    from vllm import LLM
    llm = LLM(model_path, logprobs_mode="processed_logprobs", enable_prefix_caching=True)
    policy = VLLMPolicy(llm, generation_config=model.generation_config)

    policy = VLLMServerPolicy.connect("http://localhost:8000", tokenizer, model.generation_config)

vLLM is imported lazily, so this module imports without it. The log-probabilities are whatever
the engine's ``logprobs_mode`` says: vLLM's default is the raw model distribution; create the
engine with ``logprobs_mode="processed_logprobs"`` to get the temperature-scaled, top-p-truncated
sampling distribution that ``HFPolicy`` returns and importance correction needs (``trl
vllm-serve`` starts its server that way).

Seeds are per request (``request_seed``), so a sampled row does not depend on its batch-mates,
and the G identical prompts of a GRPO group sample differently. Both backends stop at
``grasp.rollout.stops.stop_token_ids``, the same ids as ``HFPolicy``.
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from grasp.rollout.policy import Generation, GenerationRequest, SamplingConfig
from grasp.rollout.stops import END_OF_TURN, stop_token_ids

log = logging.getLogger(__name__)

_INSTALL_HINT = "vLLM is not installed: pip install grasp[gpu] (needs a CUDA GPU)"


def _import_vllm() -> Any:
    try:
        import vllm
    except ImportError as error:
        raise ImportError(_INSTALL_HINT) from error
    return vllm


def request_seed(base_seed: int, request: GenerationRequest, index: int) -> int:
    """A 31-bit seed for one request, stable across batches and distinct between turns.

    Mixes the base seed, the episode id (the batch position when it is empty, so that the
    identical prompts of a GRPO group still sample differently) and the context length (which
    grows every turn, so turns do not replay one random stream).
    """
    episode = request.request_id or f"#{index}"
    context = len(request.token_ids) if request.token_ids is not None else len(request.messages)
    key = f"{base_seed}|{episode}|{context}".encode()
    return int.from_bytes(hashlib.blake2b(key, digest_size=4).digest(), "little") & 0x7FFFFFFF


def engine_generation_config(llm: Any) -> dict[str, Any] | None:
    """The generation config vLLM read from the model folder, or None when it cannot say.

    ``ModelConfig.try_get_generation_config`` returns the non-default fields of the folder's
    ``generation_config.json`` (its ``eos_token_id`` among them).
    """
    model_config = getattr(llm, "model_config", None) or getattr(
        getattr(llm, "llm_engine", None), "model_config", None
    )
    getter = getattr(model_config, "try_get_generation_config", None)
    if getter is None:
        log.warning("the vLLM engine exposes no generation config: stopping at the tokenizer's eos")
        return None
    return dict(getter() or {})


class VLLMPolicy:
    """A ``Policy`` running a colocated ``vllm.LLM`` on the requests' token ids.

    Args:
        llm: The engine (``vllm.LLM``); its tokenizer gives the stop ids and decodes the text.
        end_of_turn_token: The token that ends an assistant turn (``<|im_end|>`` for ChatML).
        generation_config: The model's ``GenerationConfig`` (or its dict), whose eos ids also
            end a turn; None reads the one vLLM loaded from the model folder.

    Raises:
        ImportError: vLLM is not installed.
    """

    def __init__(
        self, llm: Any, end_of_turn_token: str = END_OF_TURN, generation_config: Any = None
    ) -> None:
        self._vllm = _import_vllm()
        self.llm = llm
        self.tokenizer = llm.get_tokenizer()
        if generation_config is None:
            generation_config = engine_generation_config(llm)
        self.stop_ids = stop_token_ids(self.tokenizer, generation_config, end_of_turn_token)
        self.end_of_turn_id = self.stop_ids[0]

    def generate(
        self, requests: Sequence[GenerationRequest], sampling: SamplingConfig
    ) -> list[Generation]:
        """One generation per request, in order; never raises for a bad request or batch."""
        generations, valid = _refuse_bad_requests(requests, sampling)
        if valid:
            for index, generation in zip(
                valid, self._generate_valid(requests, valid, sampling), strict=True
            ):
                generations[index] = generation
        return [g for g in generations if g is not None]

    def _generate_valid(
        self, requests: Sequence[GenerationRequest], valid: list[int], sampling: SamplingConfig
    ) -> list[Generation]:
        prompts = [{"prompt_token_ids": list(requests[i].token_ids or ())} for i in valid]
        params = [self._sampling_params(requests[i], i, sampling) for i in valid]
        try:
            outputs = self.llm.generate(prompts, sampling_params=params, use_tqdm=False)
            return [self.to_generation(output) for output in outputs]
        except Exception as error:  # noqa: BLE001 - one failed batch must not end the rollout
            log.exception("vLLM generation failed for %d requests", len(valid))
            message = f"{type(error).__name__}: {error}"
            return [Generation(text="", finished=False, error=message) for _ in valid]

    def _sampling_params(
        self, request: GenerationRequest, index: int, sampling: SamplingConfig
    ) -> Any:
        return self._vllm.SamplingParams(
            temperature=sampling.temperature,
            top_p=sampling.top_p if sampling.temperature > 0 else 1.0,
            max_tokens=min(request.max_new_tokens, sampling.max_new_tokens),
            stop_token_ids=self.stop_ids,
            logprobs=0,  # 0: only the chosen token's log-probability
            seed=request_seed(sampling.seed, request, index),
            include_stop_str_in_output=True,
            skip_special_tokens=False,
        )

    def to_generation(self, output: Any) -> Generation:
        """Map one ``vllm.RequestOutput`` to a ``Generation`` (text re-decoded without the stop)."""
        return completion_to_generation(output.outputs[0], self.stop_ids, self.tokenizer)


def completion_to_generation(completion: Any, stop_ids: list[int], tokenizer: Any) -> Generation:
    """Map a ``vllm.CompletionOutput`` (``token_ids``, ``logprobs``, ``finish_reason``)."""
    ids = [int(t) for t in completion.token_ids]
    logprobs = None
    if completion.logprobs is not None:
        logprobs = [
            float(step[t].logprob) for step, t in zip(completion.logprobs, ids, strict=True)
        ]
    return to_generation(ids, logprobs, completion.finish_reason, stop_ids, tokenizer)


def to_generation(
    ids: list[int],
    logprobs: list[float] | None,
    finish_reason: str | None,
    stop_ids: Sequence[int],
    tokenizer: Any,
) -> Generation:
    """One vLLM completion as a ``Generation``: the stop id stays in the ids, not in the text.

    vLLM keeps a stop token id in ``token_ids`` but, depending on version and options, keeps
    or strips its text; decoding the ids here gives the same text as ``HFPolicy`` in every case.
    """
    finished = finish_reason == "stop"
    text_ids = ids[:-1] if finished and ids and ids[-1] in stop_ids else ids
    text = tokenizer.decode(text_ids, skip_special_tokens=False)
    return Generation(
        text=text,
        token_ids=ids,
        logprobs=logprobs,
        finished=finished,
        extra={"finish_reason": finish_reason},
    )


def request_problem(request: GenerationRequest, sampling: SamplingConfig) -> str | None:
    """Why a vLLM backend cannot generate for ``request``, or None when it can."""
    if not request.token_ids:
        return "request has no token_ids: the vLLM backends generate from token ids only"
    if min(request.max_new_tokens, sampling.max_new_tokens) < 1:
        return f"no tokens left to generate (max_new_tokens={request.max_new_tokens})"
    return None


SERVER_URL_FIELD = "grpo.vllm_server_base_url"
"""The config field that names the server; connection errors name it."""


class VLLMServerPolicy:
    """A ``Policy`` on a vLLM server (``trl vllm-serve``), one HTTP request per episode.

    Every process of a run builds its own (``connect``) and generates its own episodes: TRL
    creates its ``VLLMClient`` on the main process only, and that client keeps the job it alone
    can do, pushing the trained weights to the server. One request per episode is what lets
    each episode have its own seed (the server takes one ``seed`` per request), so the G
    identical prompts of a group sample G different completions; the server batches the
    concurrent requests itself. Every sampling field the server would otherwise fill from the
    model's ``generation_config.json`` (Qwen2.5 sets top_k=20, repetition_penalty=1.05) is sent
    with its neutral value, as ``HFPolicy`` pins them.

    Args:
        base_url: The server, e.g. ``http://localhost:8000`` (``grpo.vllm_server_base_url``).
        model: The served model's name, which every request names (``/v1/models``).
        tokenizer: The policy's tokenizer (stop ids, decoding the text).
        generation_config: The model's ``GenerationConfig`` (or dict); its eos ids end a turn.
        end_of_turn_token: The token that ends an assistant turn.
        request_timeout_s: How long one request may take (a turn of 512 tokens under load).
        max_concurrent_requests: Requests in flight at once from this process.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        tokenizer: Any,
        generation_config: Any = None,
        end_of_turn_token: str = END_OF_TURN,
        request_timeout_s: float = 600.0,
        max_concurrent_requests: int = 64,
    ) -> None:
        if max_concurrent_requests < 1:
            raise ValueError(
                f"max_concurrent_requests must be positive, got {max_concurrent_requests}"
            )
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.tokenizer = tokenizer
        self.stop_ids = stop_token_ids(tokenizer, generation_config, end_of_turn_token)
        self.request_timeout_s = request_timeout_s
        self.max_concurrent_requests = max_concurrent_requests
        self.session = _session(max_concurrent_requests)

    @classmethod
    def connect(
        cls,
        base_url: str,
        tokenizer: Any,
        generation_config: Any = None,
        wait_s: float = 240.0,
        **kwargs: Any,
    ) -> VLLMServerPolicy:
        """Wait for the server to be up, read the name it serves, and build the policy.

        Any process may call it (no collective, no weight-transfer group). Raises
        ConnectionError naming ``grpo.vllm_server_base_url`` when the server does not answer
        within ``wait_s`` seconds.
        """
        model = served_model(base_url, wait_s)
        return cls(base_url, model, tokenizer, generation_config, **kwargs)

    def generate(
        self, requests: Sequence[GenerationRequest], sampling: SamplingConfig
    ) -> list[Generation]:
        """One generation per request, in order; never raises for a bad request or reply."""
        generations, valid = _refuse_bad_requests(requests, sampling)
        if valid:
            workers = min(self.max_concurrent_requests, len(valid))
            with ThreadPoolExecutor(max_workers=workers) as pool:
                done = pool.map(lambda i: self._generate_one(requests[i], i, sampling), valid)
                for index, generation in zip(valid, done, strict=True):
                    generations[index] = generation
        return [g for g in generations if g is not None]

    def payload(self, request: GenerationRequest, index: int, sampling: SamplingConfig) -> dict:
        """The ``/v1/completions`` body of one request (``index``: its batch position)."""
        sample = sampling.temperature > 0
        return {
            "model": self.model,
            "prompt": [list(request.token_ids or ())],
            "n": 1,
            "max_tokens": min(request.max_new_tokens, sampling.max_new_tokens),
            "temperature": sampling.temperature,
            "top_p": sampling.top_p if sample else 1.0,
            "top_k": 0,
            "min_p": 0.0,
            "repetition_penalty": 1.0,
            "seed": request_seed(sampling.seed, request, index),
            "stop_token_ids": list(self.stop_ids),
            "logprobs": 0,
            "skip_special_tokens": False,
            "include_stop_str_in_output": True,
            "return_token_ids": True,
            "return_tokens_as_token_ids": True,
        }

    def _generate_one(
        self, request: GenerationRequest, index: int, sampling: SamplingConfig
    ) -> Generation:
        body = self.payload(request, index, sampling)
        try:
            response = self.session.post(
                f"{self.base_url}/v1/completions", json=body, timeout=self.request_timeout_s
            )
            if response.status_code != 200:
                message = f"vLLM server answered HTTP {response.status_code}: {response.text[:300]}"
                return Generation(text="", finished=False, error=message)
            choice = response.json()["choices"][0]
            return choice_to_generation(choice, body["max_tokens"], self.stop_ids, self.tokenizer)
        except (requests.RequestException, ValueError, KeyError, IndexError, TypeError) as error:
            log.warning("vLLM server generation failed for %r: %s", request.request_id, error)
            return Generation(text="", finished=False, error=f"{type(error).__name__}: {error}")


def choice_to_generation(
    choice: dict[str, Any], limit: int, stop_ids: Sequence[int], tokenizer: Any
) -> Generation:
    """One ``/v1/completions`` choice (``token_ids``, ``logprobs``, ``finish_reason``).

    The chosen tokens' log-probabilities are ``logprobs.token_logprobs``; a reply without
    them (or with a missing entry) gives ``logprobs=None``, so the trainer computes its own.
    A reply longer than ``limit`` is cut there and counts as unfinished.
    """
    ids = [int(t) for t in choice["token_ids"]]
    reason = choice.get("finish_reason")
    if len(ids) > limit:
        ids, reason = ids[:limit], "length"
    logprobs = None
    entries = (choice.get("logprobs") or {}).get("token_logprobs")
    if entries is not None and len(entries) >= len(ids):
        values = entries[: len(ids)]
        if all(isinstance(v, (int, float)) and not math.isnan(v) for v in values):
            logprobs = [float(v) for v in values]
    return to_generation(ids, logprobs, reason, stop_ids, tokenizer)


def served_model(base_url: str, wait_s: float, retry_s: float = 2.0) -> str:
    """The model name a vLLM server serves, waiting up to ``wait_s`` for its ``/health``."""
    base = base_url.rstrip("/")
    deadline = time.monotonic() + wait_s
    while True:
        try:
            if requests.get(f"{base}/health", timeout=10).status_code == 200:
                break
        except requests.RequestException:
            pass
        if time.monotonic() >= deadline:
            raise ConnectionError(
                f"{SERVER_URL_FIELD}={base_url!r}: no vLLM server answered /health within "
                f"{wait_s:.0f} s (start it with the launch plan's trl vllm-serve command)"
            )
        time.sleep(retry_s)
    response = requests.get(f"{base}/v1/models", timeout=30)
    try:
        return str(response.json()["data"][0]["id"])
    except (ValueError, KeyError, IndexError, TypeError) as error:
        raise ConnectionError(
            f"{SERVER_URL_FIELD}={base_url!r}: /v1/models answered {response.text[:200]!r}, "
            "not an OpenAI-style model list"
        ) from error


def _session(pool_size: int) -> requests.Session:
    """A session whose connection pool holds every concurrent request; transient 5xx retried."""
    session = requests.Session()
    retry = Retry(
        total=3,
        connect=3,
        read=0,
        status=2,
        status_forcelist=[502, 503],
        backoff_factor=1,
        allowed_methods=["GET", "POST"],
    )
    adapter = HTTPAdapter(max_retries=retry, pool_maxsize=pool_size)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


def _refuse_bad_requests(
    requests: Sequence[GenerationRequest], sampling: SamplingConfig
) -> tuple[list[Generation | None], list[int]]:
    """An error generation for each request that cannot be generated from, and the indices of
    the others (left None in the list, for the caller to fill)."""
    generations: list[Generation | None] = [None] * len(requests)
    valid: list[int] = []
    for index, request in enumerate(requests):
        error = request_problem(request, sampling)
        if error is None:
            valid.append(index)
        else:
            generations[index] = Generation(text="", finished=False, error=error)
    return generations, valid
