"""The vLLM policy backend: a colocated ``vllm.LLM`` engine generating from exact token ids (GPU).

``VLLMPolicy.generate`` sends every request's ``token_ids`` to one ``llm.generate`` call with
one ``SamplingParams`` per request (its own ``max_tokens`` and seed), stopping at the
end-of-turn token, and maps each output to a ``Generation`` with the same meaning as
``HFPolicy``'s: ``token_ids`` include the stop token when the turn ended, ``text`` does not.

Usage (on a GPU machine, ``pip install grasp[gpu]``)::

    from vllm import LLM
    llm = LLM(model_path, logprobs_mode="processed_logprobs", enable_prefix_caching=True)
    policy = VLLMPolicy(llm)

vLLM is imported lazily, so this module imports without it. The log-probabilities are whatever
the engine's ``logprobs_mode`` says: vLLM's default is the raw model distribution; create the
engine with ``logprobs_mode="processed_logprobs"`` to get the temperature-scaled, top-p-truncated
sampling distribution that ``HFPolicy`` returns and importance correction needs.

Seeds are per request (``request_seed``), so a sampled row does not depend on its batch-mates.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from typing import Any

from grasp.rollout.policy import Generation, GenerationRequest, SamplingConfig

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


class VLLMPolicy:
    """A ``Policy`` running a colocated ``vllm.LLM`` on the requests' token ids.

    Args:
        llm: The engine (``vllm.LLM``); its tokenizer gives the stop ids and decodes the text.
        end_of_turn_token: The token that ends an assistant turn (``<|im_end|>`` for ChatML).
            Generation also stops at the tokenizer's eos.

    Raises:
        ImportError: vLLM is not installed.
    """

    def __init__(self, llm: Any, end_of_turn_token: str = "<|im_end|>") -> None:
        self._vllm = _import_vllm()
        self.llm = llm
        self.tokenizer = llm.get_tokenizer()
        ids = self.tokenizer.encode(end_of_turn_token, add_special_tokens=False)
        if len(ids) != 1:
            raise ValueError(f"end-of-turn token {end_of_turn_token!r} is not a single token")
        self.end_of_turn_id = int(ids[0])
        eos = self.tokenizer.eos_token_id
        self.stop_ids = [self.end_of_turn_id] + (
            [int(eos)] if eos is not None and eos != self.end_of_turn_id else []
        )

    def generate(
        self, requests: Sequence[GenerationRequest], sampling: SamplingConfig
    ) -> list[Generation]:
        """One generation per request, in order; never raises for a bad request or batch."""
        generations: list[Generation | None] = [None] * len(requests)
        valid: list[int] = []
        for index, request in enumerate(requests):
            limit = min(request.max_new_tokens, sampling.max_new_tokens)
            if not request.token_ids:
                error = "request has no token_ids: VLLMPolicy generates from token ids only"
            elif limit < 1:
                error = f"no tokens left to generate (max_new_tokens={request.max_new_tokens})"
            else:
                valid.append(index)
                continue
            generations[index] = Generation(text="", finished=False, error=error)
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
    """Map a ``vllm.CompletionOutput`` (``token_ids``, ``logprobs``, ``finish_reason``).

    vLLM keeps a stop token id in ``token_ids`` but, depending on version and options, keeps
    or strips its text; decoding the ids here gives the same text as ``HFPolicy`` in every case.
    """
    ids = [int(t) for t in completion.token_ids]
    finished = completion.finish_reason == "stop"
    logprobs = None
    if completion.logprobs is not None:
        logprobs = [
            float(step[t].logprob) for step, t in zip(completion.logprobs, ids, strict=True)
        ]
    text_ids = ids[:-1] if finished and ids and ids[-1] in stop_ids else ids
    text = tokenizer.decode(text_ids, skip_special_tokens=False)
    return Generation(
        text=text,
        token_ids=ids,
        logprobs=logprobs,
        finished=finished,
        extra={"finish_reason": completion.finish_reason},
    )


class VLLMServerPolicy:
    """A ``Policy`` on a ``trl vllm-serve`` server (vLLM on its own GPUs), through TRL's client.

    The trainer pushes new weights to the server each step; this sends the token ids of every
    request in one ``generate`` call and maps the completions back. The server returns
    completion ids and their log-probabilities; a turn counts as finished when its last id is
    a stop id.
    """

    def __init__(self, client: Any, tokenizer: Any, end_of_turn_token: str = "<|im_end|>") -> None:
        self.client = client
        self.tokenizer = tokenizer
        end_of_turn_id = int(tokenizer.convert_tokens_to_ids(end_of_turn_token))
        self.stop_ids = sorted({end_of_turn_id, int(tokenizer.eos_token_id or end_of_turn_id)})

    def generate(
        self, requests: Sequence[GenerationRequest], sampling: SamplingConfig
    ) -> list[Generation]:
        """One generation per request, in order; never raises."""
        if not requests:
            return []
        limit = max(min(r.max_new_tokens, sampling.max_new_tokens) for r in requests)
        try:
            output = self.client.generate(
                prompts=[list(r.token_ids or ()) for r in requests],
                temperature=max(sampling.temperature, 1e-6),
                top_p=sampling.top_p,
                max_tokens=limit,
                logprobs=0,
                generation_kwargs={"stop_token_ids": self.stop_ids, "seed": sampling.seed},
            )
        except Exception as error:  # noqa: BLE001 - a failed call must not end the rollout
            log.exception("vLLM server generation failed for %d requests", len(requests))
            return [Generation(text="", finished=False, error=str(error)) for _ in requests]
        generations = []
        for request, ids, logprobs in zip(
            requests, output["completion_ids"], output["logprobs"], strict=True
        ):
            cap = min(request.max_new_tokens, sampling.max_new_tokens)
            ids = [int(t) for t in ids][:cap]
            flat = [float(x[0]) if isinstance(x, list) else float(x) for x in logprobs][:cap]
            finished = bool(ids) and ids[-1] in self.stop_ids
            text_ids = ids[:-1] if finished else ids
            generations.append(
                Generation(
                    text=self.tokenizer.decode(text_ids, skip_special_tokens=False),
                    token_ids=ids,
                    logprobs=flat,
                    finished=finished,
                )
            )
        return generations
