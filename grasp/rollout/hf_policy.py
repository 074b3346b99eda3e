"""The transformers policy backend: batched ``model.generate`` on exact token ids (CPU or GPU).

``HFPolicy.generate`` left-pads every request's ``token_ids`` into one batch (or micro-batches of
``max_batch_size``), runs one ``model.generate`` per batch, and cuts each row at its own
``max_new_tokens`` and at its first end-of-turn token. Each generated token comes with its
log-probability under the distribution it was sampled from.

Usage::

    loaded = load_policy_model(ModelConfig())  # grasp.models
    policy = HFPolicy(loaded.model, loaded.tokenizer)
    [generation] = policy.generate([GenerationRequest(messages, ids, 64)], SamplingConfig())

What the log-probabilities are: ``log_softmax`` of the *processed* scores, i.e. of the logits
divided by the temperature, with tokens outside the top-p nucleus removed and the rest
renormalized. That is the sampling policy itself, which is what importance correction against
the trainer's policy needs (vLLM's ``logprobs_mode="processed_logprobs"`` means the same). With
temperature 0 (greedy) nothing is processed: they are log-probabilities of the model's own
distribution, and each one is the maximum of its row.

Turns without re-encoding (``reuse_cache=True``): a multi-turn episode's next request is its
previous request, plus what was generated, plus the observation and the next assistant header,
so the KV cache of the previous ``generate`` already holds most of it. The policy keeps each
batch's cache and, when the next call's requests continue its rows (same ``request_id``, the
cached tokens a prefix of the new ``token_ids``), prefills only the appended tokens: the new
block is left-padded after the cached part, and the attention mask hides every padding and
every token generated after a row's stop, wherever they lie (positions follow the mask). A
cache is dropped when the weights changed since it was made (an optimizer step: tensor
versions), or when the next call does not continue it. The rounding differs from a full
prefill (other shapes), as it does between batchings.

Decoding (``decoder``): ``"loop"`` (the default) runs ``model.generate`` with
``custom_generate=LoopDecoder()`` (grasp/rollout/hf_decode.py): ``generate`` prepares the inputs,
processors and stopping criteria as always, and the loop does per step what its ``_sample``
does, with the same ids, log-probabilities and random numbers drawn, but on a KV cache
allocated once for context + new tokens (``generate``'s ``DynamicCache`` concatenates every layer's
whole cache every step; on CUDA the allocator cannot reuse the outgrown blocks and reserved
memory climbs until the device is full), without a host-device sync per step, and keeping
each step's chosen log-probabilities on the device until the end. ``"generate"`` is the former
path (``generate``'s own loop with ``ChosenLogprobs``), kept to compare against
(``scripts/bench_rollout.py``) and as a fallback.

Memory: the scores of every step are never kept (``output_scores`` would hold rows x new
tokens x vocabulary, about 20 GB for 64 rows x 512 tokens of Qwen2.5's 152k vocabulary). The
temperature and top-p warpers are passed to ``generate`` as logits processors; the loop takes
the log-probabilities of their output, and with ``decoder="generate"`` ``ChosenLogprobs``, the
last processor of the chain, does: it sees each step's processed scores, keeps them until the
next step names the chosen id, and keeps only that id's log-probability. Either way one step's
[rows, vocabulary] scores are alive at a time. Warpers a model's ``generation_config`` could add
after ours (min_p, top_h, watermarking) are refused at construction, since they would shape
sampling after the log-probabilities are taken.

Determinism: the torch RNG is seeded with ``sampling.seed`` once per call, inside a forked RNG
state, so the caller's random stream is left as it was. One ``generate`` call draws one random
stream for the whole batch, so a sampled row depends on its batch-mates; vary ``seed`` between
steps and turns. Greedy rows depend on their batch-mates only through rounding: left padding
is masked, but it changes the shapes, hence the order of the sums, and in bf16 a
log-probability moves by up to ~0.1. Over hundreds of tokens that flips near-ties: the prompted
agent on 32 HotpotQA questions scored F1 0.069 with ``max_batch_size=32`` and 0.096 with 8.
A greedy evaluation repeats exactly at the same batching (``policy.max_batch_size`` and
``batch_questions``, both in the evaluation's config.json), not across batchings.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from grasp.rollout.hf_decode import (
    LoopDecoder,
    PartTimer,
    forward_timing,
    grouped_query_attention,
)
from grasp.rollout.policy import Generation, GenerationRequest, SamplingConfig
from grasp.rollout.stops import stop_token_ids

log = logging.getLogger(__name__)

# Explicit neutral values: generate() fills every *unset* field from the model's own
# generation_config (Qwen2.5 ships top_k=20, repetition_penalty=1.05...), which would silently
# change the sampling distribution and the log-probabilities.
_NEUTRAL_ALWAYS: dict[str, Any] = {
    "repetition_penalty": 1.0,
    "no_repeat_ngram_size": 0,
    "min_length": 0,
}
# Warpers act only when sampling; setting them for greedy decoding draws warnings.
_NEUTRAL_SAMPLING: dict[str, Any] = {
    "top_k": 0,
    "typical_p": 1.0,
    "epsilon_cutoff": 0.0,
    "eta_cutoff": 0.0,
}
# Fields that can only be "unset" as None, which generate() would fill from the model's config.
_UNPINNABLE = (
    "min_new_tokens",
    "min_p",
    "top_h",
    "sequence_bias",
    "bad_words_ids",
    "suppress_tokens",
    "begin_suppress_tokens",
    "forced_bos_token_id",
    "forced_eos_token_id",
    "watermarking_config",
)
# Of those, the ones generate() applies after the temperature and top-p warpers.
_AFTER_WARPERS = ("min_p", "top_h", "watermarking_config")
DECODERS = ("loop", "generate")
"""``HFPolicy(decoder=...)``: HFPolicy's own loop inside ``generate``, or ``generate``'s loop."""


@functools.cache
def _cache_argument() -> str:
    """What ``generate`` calls its KV cache, as an argument and in its output: ``cache`` since
    transformers 5.x renamed ``past_key_values``."""
    from transformers.generation.utils import GenerateDecoderOnlyOutput

    fields = GenerateDecoderOnlyOutput.__dataclass_fields__
    return "cache" if "cache" in fields else "past_key_values"


@dataclass
class _Batch:
    """What one ``model.generate`` call returned, reduced to what the rows need."""

    new_ids: list[list[int]]
    """[batch][generated] ids after the prompt (finished rows continue with padding)."""
    logprobs: list[list[float]]
    """[batch][generated] log-probability of each of those ids."""
    cache: Any = None
    """The ``generate`` call's KV cache (``reuse_cache``): it holds ``sequences[:, :-1]``."""
    sequences_BL: torch.Tensor | None = None
    """[batch, context + generated] every id the call saw or produced, padding included."""
    attention_mask_BL: torch.Tensor | None = None
    """[batch, context + generated] the call's input mask, then 1 for each generated id."""


@dataclass
class _Continuation:
    """A finished batch's KV cache, kept for the next turn of its rows (``reuse_cache``)."""

    cache: Any
    """Holds the keys and values of ``ids_BL``."""
    ids_BL: torch.Tensor
    """[rows, cached] the ids the cache holds, padding and post-stop ids included."""
    mask_BL: torch.Tensor
    """[rows, cached] 1 where an id is part of its row's conversation."""
    prefixes: list[list[int]]
    """[rows][...] each row's conversation as cached: ``ids_BL[row]`` where ``mask_BL`` is 1."""
    rows: dict[str, int]
    """Row of each request id."""
    version: int
    """The weights' version when it was made (``_weights_version``)."""

    def continues(self, request: GenerationRequest) -> int | None:
        """The row ``request`` continues (its cached conversation a strict prefix of the
        request's ids), or None."""
        row = self.rows.get(request.request_id)
        if row is None or not request.request_id:
            return None
        prefix, ids = self.prefixes[row], request.token_ids or []
        if len(ids) <= len(prefix) or ids[: len(prefix)] != prefix:
            return None
        return row


class HFPolicy:
    """A ``Policy`` running a transformers causal LM on the requests' token ids.

    Args:
        model: A causal LM (a PEFT-wrapped one works too). It is put in eval mode during a call
            and restored to its previous mode afterwards.
        tokenizer: Its tokenizer (for the end-of-turn id, the pad id and decoding).
        end_of_turn_token: The token that ends an assistant turn; ChatML models use
            ``<|im_end|>``. Generation also stops at the tokenizer's and the model's eos
            (``grasp.rollout.stops``, the same definition as the vLLM backends).
        max_batch_size: Rows per ``model.generate`` call; None puts all requests in one call.
            Memory grows with rows x (context + new tokens) for the KV cache, and with rows x
            vocabulary for one step's scores.
        reuse_cache: Keep each call's KV cache and prefill only the tokens appended since,
            when the next call continues its rows (module docstring). The caches of one
            call stay in memory until the next.
        decoder: ``"loop"`` (``LoopDecoder``, preallocated KV cache, no per-step sync) or
            ``"generate"`` (``generate``'s own loop, the former path); both give the same ids
            and log-probabilities (module docstring).
        autocast_dtype: Generate under ``torch.autocast`` with this dtype: the compute dtype of
            a model whose weights are kept in float32 for training (full fine-tuning's master
            weights), so that rollouts run the matrix work in it as the loss does. None
            generates in the weights' own dtype. Log-probabilities are float32 either way.
        native_gqa: On the CPU, attention with a mask runs grouped-query attention natively
            (``hf_decode.grouped_query_attention``: the same numbers, faster); false copies
            the key/value heads first, as transformers does by default.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        end_of_turn_token: str = "<|im_end|>",
        max_batch_size: int | None = None,
        reuse_cache: bool = False,
        decoder: str = "loop",
        autocast_dtype: torch.dtype | None = None,
        native_gqa: bool = True,
    ) -> None:
        if max_batch_size is not None and max_batch_size < 1:
            raise ValueError(f"max_batch_size must be positive, got {max_batch_size}")
        if decoder not in DECODERS:
            raise ValueError(f"decoder must be one of {DECODERS}, got {decoder!r}")
        self.decoder = decoder
        self.autocast_dtype = autocast_dtype
        self.native_gqa = native_gqa
        self.timer: PartTimer | None = None
        """When set, every call adds the time of its parts (prefill, decode forwards,
        log-probabilities, the rest) and a memory sample per forward to it (the benchmark's)."""
        self.model = model
        self.tokenizer = tokenizer
        self.max_batch_size = max_batch_size
        self.reuse_cache = reuse_cache
        self._continuations: list[_Continuation] = []
        self.prefilled_tokens = 0
        """Context ids run through the model before generating, over every call: with
        ``reuse_cache``, only the ids no kept cache held (padding included)."""
        self.end_of_turn_token = end_of_turn_token
        self.stop_ids = stop_token_ids(tokenizer, model.generation_config, end_of_turn_token)
        self.end_of_turn_id = self.stop_ids[0]
        pad = tokenizer.pad_token_id
        self.pad_id: int = self.end_of_turn_id if pad is None else int(pad)
        self.vocab_size: int = model.get_input_embeddings().num_embeddings
        leaked = [f for f in _UNPINNABLE if getattr(model.generation_config, f, None) is not None]
        late = [f for f in _AFTER_WARPERS if f in leaked]
        if late:
            raise ValueError(
                f"the model's generation_config sets {late}, which generate() applies after the "
                "log-probabilities are taken (grasp.rollout.hf_policy): unset them"
            )
        if leaked:
            log.warning("model generation_config sets %s: they will shape sampling", leaked)

    def generate(
        self, requests: Sequence[GenerationRequest], sampling: SamplingConfig
    ) -> list[Generation]:
        """One generation per request, in order; never raises for a bad request or batch."""
        generations: list[Generation | None] = [None] * len(requests)
        valid: list[int] = []
        for index, request in enumerate(requests):
            problem = self._check(request, sampling)
            if problem is None:
                valid.append(index)
            else:
                generations[index] = Generation(text="", finished=False, error=problem)
        version = self._weights_version() if self.reuse_cache else 0
        kept, self._continuations = self._continuations, []
        # Requests that continue a kept cache's rows run with it, batch by batch as before.
        continued: list[tuple[_Continuation, list[int], list[int]]] = []
        for continuation in kept if version else []:
            if continuation.version != version:
                continue
            chunk, rows = [], []
            for index in valid:
                row = continuation.continues(requests[index])
                if row is not None:
                    chunk.append(index)
                    rows.append(row)
            if chunk:
                continued.append((continuation, chunk, rows))
                claimed = set(chunk)
                valid = [i for i in valid if i not in claimed]
        # Similar lengths side by side: less padding when micro-batches split the work.
        valid.sort(key=lambda i: len(requests[i].token_ids or ()), reverse=True)
        size = self.max_batch_size or max(len(valid), 1)
        batches: list[tuple[_Continuation | None, list[int], list[int]]] = [
            *continued,
            *((None, valid[start : start + size], []) for start in range(0, len(valid), size)),
        ]
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.random.fork_rng(devices=self._rng_devices()), self._precision():
                torch.manual_seed(sampling.seed)
                for continuation, chunk, rows in batches:
                    batch = [requests[i] for i in chunk]
                    results = self._generate_batch(batch, sampling, continuation, rows, version)
                    for index, generation in zip(chunk, results, strict=True):
                        generations[index] = generation
        finally:
            self.model.train(was_training)
        return [g for g in generations if g is not None]

    def _precision(self) -> contextlib.AbstractContextManager:
        """``torch.autocast`` to ``autocast_dtype`` when set, else nothing."""
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.model.device.type, dtype=self.autocast_dtype)

    def _weights_version(self) -> int:
        """A number that changes whenever a parameter is written in place (an optimizer
        step), and is at least 1: the sum of the parameters' tensor versions, plus one."""
        return 1 + sum(p._version for p in self.model.parameters())

    def _check(self, request: GenerationRequest, sampling: SamplingConfig) -> str | None:
        """Why a request cannot be generated from, or None when it can."""
        if not request.token_ids:
            return "request has no token_ids: HFPolicy generates from token ids only"
        if min(request.max_new_tokens, sampling.max_new_tokens) < 1:
            return f"no tokens left to generate (max_new_tokens={request.max_new_tokens})"
        if any(not 0 <= t < self.vocab_size for t in request.token_ids):
            return f"token_ids outside the vocabulary [0, {self.vocab_size})"
        return None

    def _generate_batch(
        self,
        batch: list[GenerationRequest],
        sampling: SamplingConfig,
        continuation: _Continuation | None = None,
        rows: list[int] | None = None,
        version: int = 0,
    ) -> list[Generation]:
        """Generate one micro-batch (continuing ``rows`` of ``continuation`` when given); an
        exception (OOM...) becomes an error on each of its rows."""
        limits = [min(r.max_new_tokens, sampling.max_new_tokens) for r in batch]
        try:
            output = self._run(batch, sampling, max(limits), continuation, rows or [])
            generations = [
                self.to_generation(ids[:limit], logprobs[:limit])
                for ids, logprobs, limit in zip(
                    output.new_ids, output.logprobs, limits, strict=True
                )
            ]
            if version:
                self._keep(batch, generations, output, version)
            return generations
        except Exception as error:  # noqa: BLE001 - one failed batch must not end the rollout
            log.exception("generation failed for a batch of %d requests", len(batch))
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            message = f"{type(error).__name__}: {error}"
            return [Generation(text="", finished=False, error=message) for _ in batch]

    def _run(
        self,
        batch: list[GenerationRequest],
        sampling: SamplingConfig,
        steps: int,
        continuation: _Continuation | None = None,
        rows: list[int] | None = None,
    ) -> _Batch:
        """One ``generate`` call. With ``continuation``, row i of the batch continues its row
        ``rows[i]``: only the ids after the cached conversation are new input."""
        device = self.model.device
        cached = {}
        if continuation is None:
            suffixes = [r.token_ids or [] for r in batch]
            old_ids_BC = torch.zeros((len(batch), 0), dtype=torch.long)
            old_mask_BC = torch.zeros((len(batch), 0), dtype=torch.long)
        else:
            rows = rows or []
            suffixes = [
                (r.token_ids or [])[len(continuation.prefixes[row]) :]
                for r, row in zip(batch, rows, strict=True)
            ]
            index = torch.tensor(rows, dtype=torch.long)
            old_ids_BC, old_mask_BC = continuation.ids_BL[index], continuation.mask_BL[index]
            cache = continuation.cache
            if rows != list(range(len(continuation.prefixes))):
                cache.batch_select_indices(index.to(device))
            cached = {_cache_argument(): cache}
        width = max(len(ids) for ids in suffixes)
        new_ids_BT = torch.full((len(batch), width), self.pad_id, dtype=torch.long)
        new_mask_BT = torch.zeros((len(batch), width), dtype=torch.long)
        for row, ids in enumerate(suffixes):
            new_ids_BT[row, width - len(ids) :] = torch.tensor(ids, dtype=torch.long)
            new_mask_BT[row, width - len(ids) :] = 1
        input_ids_BT = torch.cat([old_ids_BC, new_ids_BT], dim=1)
        attention_mask_BT = torch.cat([old_mask_BC, new_mask_BT], dim=1)
        self.prefilled_tokens += len(batch) * width
        arguments = {
            "input_ids": input_ids_BT.to(device),
            "attention_mask": attention_mask_BT.to(device),
            "generation_config": self._generation_config(sampling, steps),
            # Whole parameters, one process: transformers would otherwise sync every decoding
            # step with the other processes under ZeRO-3 or FSDP, who are not generating (the
            # main process evaluates alone; rollouts on sharded parameters are refused).
            "synced_gpus": False,
            **cached,
        }
        total = input_ids_BT.shape[1]
        timing = forward_timing(_forward_module(self.model), self.timer)
        gqa = grouped_query_attention(device) if self.native_gqa else contextlib.nullcontext()
        with timing, gqa:
            if self.decoder == "loop":
                decoded = self.model.generate(
                    logits_processor=sampling_processors(sampling),
                    custom_generate=LoopDecoder(self.timer),
                    **arguments,
                )
                sequences_BL = decoded.sequences.cpu()
                logprobs_BN = decoded.logprobs_BN.cpu()
                cache = decoded.cache
            else:
                recorder = ChosenLogprobs(self.timer)
                output = self.model.generate(
                    logits_processor=sampling_processors(sampling, recorder), **arguments
                )
                sequences_BL = output.sequences.cpu()
                logprobs_BN = recorder.finish(sequences_BL[:, total:])
                cache = getattr(output, _cache_argument(), None)
        new_ids_BN = sequences_BL[:, total:]
        generated = torch.ones_like(new_ids_BN, dtype=torch.long)
        return _Batch(
            new_ids=new_ids_BN.tolist(),
            logprobs=logprobs_BN.tolist(),
            cache=cache if self.reuse_cache else None,
            sequences_BL=sequences_BL,
            attention_mask_BL=torch.cat([attention_mask_BT, generated], dim=1),
        )

    def _keep(
        self,
        batch: list[GenerationRequest],
        generations: list[Generation],
        output: _Batch,
        version: int,
    ) -> None:
        """Keep a batch's cache for the next turn of its rows (``reuse_cache``): the ids it
        holds, with each row's ids after what it kept (its stop, its own limit) masked."""
        cache, sequences_BL, mask_BL = output.cache, output.sequences_BL, output.attention_mask_BL
        if cache is None or sequences_BL is None or mask_BL is None:
            return
        length = sequences_BL.shape[1] - 1  # the last chosen ids were never fed to the model
        if cache.get_seq_length() != length:
            return
        generated = len(output.new_ids[0]) if output.new_ids else 0
        start = sequences_BL.shape[1] - generated
        mask_BL = mask_BL.clone()
        for row, generation in enumerate(generations):
            mask_BL[row, start + len(generation.token_ids or ()) :] = 0
        ids_BL, mask_BL = sequences_BL[:, :length], mask_BL[:, :length]
        prefixes = [ids[mask == 1].tolist() for ids, mask in zip(ids_BL, mask_BL, strict=True)]
        self._continuations.append(
            _Continuation(
                cache=cache,
                ids_BL=ids_BL,
                mask_BL=mask_BL,
                prefixes=prefixes,
                rows={r.request_id: row for row, r in enumerate(batch) if r.request_id},
                version=version,
            )
        )

    def _generation_config(self, sampling: SamplingConfig, steps: int) -> Any:
        """The generation config: temperature and top-p neutral here, since
        ``sampling_processors`` applies them (before ``ChosenLogprobs``)."""
        from transformers import GenerationConfig

        sample = sampling.temperature > 0
        warpers = {"temperature": 1.0, "top_p": 1.0, **_NEUTRAL_SAMPLING} if sample else {}
        return GenerationConfig(
            max_new_tokens=steps,
            do_sample=sample,
            eos_token_id=self.stop_ids,
            pad_token_id=self.pad_id,
            return_dict_in_generate=True,
            output_scores=False,
            renormalize_logits=False,
            **_NEUTRAL_ALWAYS,
            **warpers,
        )

    def to_generation(self, ids: list[int], logprobs: list[float]) -> Generation:
        """Cut one row at its first stop token (kept in ids, dropped from the text)."""
        stop_at = next((i for i, t in enumerate(ids) if t in self.stop_ids), None)
        finished = stop_at is not None
        if stop_at is not None:
            ids, logprobs = ids[: stop_at + 1], logprobs[: stop_at + 1]
        text_ids = ids[:-1] if finished else ids
        # Special tokens stay in the text (skip_special_tokens=False) so that nothing the model
        # wrote disappears; <tool_call> tags are plain text in ChatML vocabularies anyway.
        text = self.tokenizer.decode(
            text_ids, skip_special_tokens=False, clean_up_tokenization_spaces=False
        )
        return Generation(text=text, token_ids=ids, logprobs=logprobs, finished=finished)

    def _rng_devices(self) -> list[int]:
        device = torch.device(self.model.device)
        return [device.index or 0] if device.type == "cuda" else []


def _forward_module(model: Any) -> Any:
    """The module whose forward ``generate`` runs: a PEFT model's base model (LoRA layers
    included), else the model itself."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def sampling_processors(sampling: SamplingConfig, recorder: ChosenLogprobs | None = None) -> Any:
    """The logits processors ``generate`` gets: temperature and top-p (when sampling, in the
    order and with the parameters transformers itself would use), then ``recorder`` if given.

    ``generate`` runs custom processors after its own default ones and before its own warpers,
    so the warpers are ours: that way the recorder (or ``LoopDecoder``, which takes the
    log-probabilities of the chain's output) sees the sampling scores."""
    from transformers import LogitsProcessorList, TemperatureLogitsWarper, TopPLogitsWarper

    processors = LogitsProcessorList()
    if sampling.temperature > 0:
        if sampling.temperature != 1.0:
            processors.append(TemperatureLogitsWarper(sampling.temperature))
        if sampling.top_p < 1.0:
            processors.append(TopPLogitsWarper(top_p=sampling.top_p, min_tokens_to_keep=1))
    if recorder is not None:
        processors.append(recorder)
    return processors


class ChosenLogprobs:
    """The last logits processor: the log-probability of each chosen id, one step at a time.

    At step t it receives the ids so far (ending with the id chosen at step t-1) and step t's
    processed scores [B, V]. It keeps step t's scores only until step t+1 names the chosen id,
    so at most one step's scores are alive, instead of all of them. Each step's column is copied
    to the CPU at once (a host-device sync per step; ``LoopDecoder`` avoids it)."""

    def __init__(self, timer: PartTimer | None = None) -> None:
        self._pending_BV: torch.Tensor | None = None
        self._columns: list[torch.Tensor] = []
        self._timer = timer

    def __call__(self, input_ids_BT: torch.Tensor, scores_BV: torch.Tensor) -> torch.Tensor:
        if self._timer is not None:
            self._timer.lap("other")
        self._take(input_ids_BT[:, -1:])
        self._pending_BV = scores_BV
        if self._timer is not None:
            self._timer.lap("logprob")
        return scores_BV

    def _take(self, chosen_B1: torch.Tensor) -> None:
        if self._pending_BV is None:
            return
        logprobs_BV = torch.log_softmax(self._pending_BV.float(), dim=-1)
        chosen_B1 = chosen_B1.to(logprobs_BV.device)
        self._columns.append(logprobs_BV.gather(-1, chosen_B1).squeeze(-1).cpu())
        self._pending_BV = None

    def finish(self, new_ids_BN: torch.Tensor) -> torch.Tensor:
        """[B, N] float32 log-probabilities on the CPU, N the steps generated.

        Args:
            new_ids_BN: [B, N] ids generated after the prompt (padding after a row's end)."""
        if self._pending_BV is not None:
            step = len(self._columns)
            self._take(new_ids_BN[:, step : step + 1])
        if not self._columns:
            return torch.zeros((new_ids_BN.shape[0], 0))
        return torch.stack(self._columns, dim=1)
