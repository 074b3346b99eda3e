"""HFPolicy's decoding loop: ``generate``'s sampling loop without its per-step costs.

``LoopDecoder`` is passed to ``model.generate(custom_generate=...)``: ``generate`` prepares the
inputs, position ids, KV cache, logits processors and stopping criteria as always, then calls it
instead of its own ``_sample``. Per step it does what ``_sample`` does with HFPolicy's settings
(the float32 copy of the last logits, the processors on the ids so far, ``softmax`` then
``torch.multinomial`` or ``argmax``, finished rows continued with the pad id, the stopping
criteria; the loop ends when every row stopped or at ``max_length``), so the ids, the
log-probabilities and the random numbers drawn are ``generate``'s. What it does not do, the
per-step costs of HFPolicy's former path (``generate`` + ``ChosenLogprobs``):

- **A KV cache grown by concatenation.** transformers' ``DynamicLayer.update`` is
  ``torch.cat([keys, new])``: every step copies every layer's whole cache into a new block a
  little larger than the last (3.6 GB per step for 64 rows x 1,536 tokens of Qwen2.5-3B). The
  CUDA caching allocator rounds large blocks to 2 MB, so a freed block serves the next, larger
  request only for ~2 MB / (rows x kv heads x head dim x 2 bytes) steps (64 at batch 64); then
  every layer's keys and values need new segments and the old ones stay reserved, unusable for
  the growing cache: reserved memory climbs by about the cache's size every few dozen steps
  until the device is full, when the allocator frees everything and retries (synchronously).
  ``PreallocatedLayer`` allocates each layer's keys and values once, for context + new tokens,
  and writes each step in place; attention still sees only the filled part (a view), so the
  arithmetic, and the result, are the concatenating cache's.
- **A host-device synchronization per step.** ``ChosenLogprobs`` copied each step's chosen
  log-probabilities to the CPU (``.cpu()``), and ``_sample`` reads ``unfinished.max() == 0``
  on the host: two syncs per step, the host waiting with nothing queued. Here the
  log-probabilities stay in a [rows, steps] device buffer copied once at the end, and on CUDA
  the "every row stopped" flag is copied asynchronously and read only after the next forward is
  queued. When it says stopped, that forward is discarded (the cache cropped by one); it drew no
  random numbers, so the random stream stays ``generate``'s.
- **Growing bookkeeping**: ``torch.cat`` of the ids, the attention mask and the position ids
  every step, ``prepare_inputs_for_generation``'s clones, ``LogitsProcessorList``'s signature
  inspection. The ids and the mask are written into buffers allocated once and passed as views
  (no mask at all without padding, as ``generate`` drops an all-ones mask).

What stays: one [rows, vocabulary] float32 copy of the step's logits, its softmax (when
sampling) and log-softmax, all dropped before the next step (never every step's scores), and
the model's own per-layer Python, which is ``generate``'s too.

``grouped_query_attention`` lets transformers' SDPA attention run grouped-query attention
natively on the CPU with a mask (left padding, a continued cache), as it already does without
one, instead of first copying every key/value head once per query head: the same numbers,
and on our 2 cores 1.6-1.9x faster prefill attention (280 new tokens against a 1,500-2,500
token cache, SmolLM2's 9 query and 3 key/value heads) and 1.2-1.5x faster decoding attention.

``PartTimer`` and ``forward_timing`` split a generation call's wall time into prefill, decode
forwards, log-probabilities and the rest, with a memory sample after every forward (allocated
and reserved on CUDA, the process RSS on the CPU): ``HFPolicy.timer`` and
``grasp/bench/rollout.py`` use them.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

PARTS = ("prefill", "decode", "logprob", "other")
"""The parts of a generation call's wall time ``PartTimer`` reports (``other``: sampling, stop
checks, batch assembly, host copies and Python bookkeeping)."""


def _rss_bytes() -> int:
    """This process's resident set size, from /proc when it is there (cheap), else psutil."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        import psutil

        return int(psutil.Process().memory_info().rss)


@dataclass
class PartTimer:
    """Seconds per part of generation calls, and memory after each forward.

    ``lap(part)`` adds the time since the previous lap to ``part``. With ``sync`` (a CUDA
    device), each lap first waits for the device, so that the time is the part's own and not
    whatever was queued before it: that changes the timing (no overlap), so time totals in a run
    without a timer. ``memory`` holds one sample per forward: ``(allocated, reserved)`` bytes on
    CUDA, ``(rss, rss)`` on the CPU."""

    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    sync: bool = False
    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PARTS, 0.0))
    forwards: int = 0
    memory: list[tuple[int, int]] = field(default_factory=list)
    _last: float = field(default_factory=time.perf_counter)

    def start(self) -> None:
        """Start (or restart) the clock without counting the time since the last lap."""
        self._wait()
        self._last = time.perf_counter()

    def lap(self, part: str) -> None:
        self._wait()
        now = time.perf_counter()
        self.seconds[part] += now - self._last
        self._last = now

    def sample_memory(self) -> None:
        if self.device.type == "cuda":
            self.memory.append(
                (torch.cuda.memory_allocated(self.device), torch.cuda.memory_reserved(self.device))
            )
        else:
            rss = _rss_bytes()
            self.memory.append((rss, rss))

    def _wait(self) -> None:
        if self.sync and self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


GQA_VARIABLE = "TRANSFORMERS_SDPA_FORCE_GQA"
"""What transformers reads, at each attention call, to pass ``enable_gqa`` to SDPA even with a
mask (by default only without one: on CUDA a mask then falls back to the slow math kernel)."""


@contextlib.contextmanager
def grouped_query_attention(device: torch.device | str) -> Iterator[None]:
    """Within the block, on the CPU only, SDPA attention with a mask runs grouped-query
    attention natively (module docstring); elsewhere, nothing changes. The variable is set
    for the block and restored after it."""
    if torch.device(device).type != "cpu":
        yield
        return
    before = os.environ.get(GQA_VARIABLE)
    os.environ[GQA_VARIABLE] = "1"
    try:
        yield
    finally:
        if before is None:
            del os.environ[GQA_VARIABLE]
        else:
            os.environ[GQA_VARIABLE] = before


@contextlib.contextmanager
def forward_timing(model: Any, timer: PartTimer | None) -> Iterator[None]:
    """Time ``model``'s forwards into ``timer``: the time before each is ``other``, the first is
    ``prefill``, the rest ``decode``, and memory is sampled after each. Nothing without a
    timer."""
    if timer is None:
        yield
        return
    first = [True]

    def before(*_: Any, **__: Any) -> None:
        timer.lap("other")

    def after(*_: Any, **__: Any) -> None:
        timer.lap("prefill" if first[0] else "decode")
        first[0] = False
        timer.forwards += 1
        timer.sample_memory()

    handles = [
        model.register_forward_pre_hook(before, with_kwargs=True),
        model.register_forward_hook(after, with_kwargs=True),
    ]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


@functools.cache
def preallocated_layer_class() -> type:
    """``PreallocatedLayer``, a subclass of transformers' ``DynamicLayer`` (imported lazily)."""
    from transformers.cache_utils import DynamicLayer

    class PreallocatedLayer(DynamicLayer):
        """A ``DynamicLayer`` whose keys and values live in buffers allocated once.

        ``keys``/``values`` are always views ``buffer[:, :, :length]``, so every
        ``DynamicLayer`` method (length, mask sizes, crop, batch selection) works unchanged,
        and attention sees exactly the tokens a concatenating layer would hold. ``update``
        writes the new states into place; only when the buffer is too small (or a batch
        selection replaced the view by a copy) does it allocate once ``capacity`` (at least the
        new length) and copy what it holds."""

        def __init__(self, capacity: int = 0, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.capacity = capacity
            self.key_buffer: torch.Tensor | None = None
            self.value_buffer: torch.Tensor | None = None

        def _holds(self, length: int, states: torch.Tensor) -> bool:
            buffer = self.key_buffer
            return (
                buffer is not None
                and length <= buffer.shape[2]
                and buffer.shape[0] == states.shape[0]
                and buffer.dtype == states.dtype
                and buffer.device == states.device
                and self.keys.data_ptr() == buffer.data_ptr()
                and self.keys.stride() == buffer.stride()
            )

        def _grow(self, length: int, keys: torch.Tensor, values: torch.Tensor) -> None:
            size = max(length, self.capacity)
            held = self.get_seq_length()
            key_buffer = keys.new_empty((*keys.shape[:2], size, keys.shape[3]))
            value_buffer = values.new_empty((*values.shape[:2], size, values.shape[3]))
            if held:
                key_buffer[:, :, :held].copy_(self.keys)
                value_buffer[:, :, :held].copy_(self.values)
            self.key_buffer, self.value_buffer = key_buffer, value_buffer

        def update(
            self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
        ) -> tuple[torch.Tensor, torch.Tensor]:
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            held = self.get_seq_length()
            length = held + key_states.shape[-2]
            if not self._holds(length, key_states):
                self._grow(length, key_states, value_states)
            assert self.key_buffer is not None and self.value_buffer is not None
            self.key_buffer[:, :, held:length].copy_(key_states)
            self.value_buffer[:, :, held:length].copy_(value_states)
            self.keys = self.key_buffer[:, :, :length]
            self.values = self.value_buffer[:, :, :length]
            return self.keys, self.values

        def batch_select_indices(self, indices: torch.Tensor) -> None:
            super().batch_select_indices(indices)
            self.key_buffer = self.value_buffer = None  # the rows were copied out of it

        def reset(self) -> None:
            self.key_buffer = self.value_buffer = None
            super().reset()

    return PreallocatedLayer


def prepare_cache(model: Any, cache: Any, capacity: int) -> Any:
    """A cache whose full-attention layers are ``PreallocatedLayer``s of ``capacity`` tokens:
    ``cache`` itself when given (its plain ``DynamicLayer``s replaced, keeping what they hold),
    else a new ``DynamicCache`` of the model's layer types. Other layer types (sliding window,
    linear attention) are kept as they are."""
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer

    layer_class = preallocated_layer_class()
    if cache is None:
        cache = DynamicCache(config=model.config)
    for index, layer in enumerate(cache.layers):
        if isinstance(layer, layer_class):
            layer.capacity = capacity
        elif type(layer) is DynamicLayer:
            replacement = layer_class(capacity)
            if layer.is_initialized:
                replacement.is_initialized = True
                replacement.device = layer.device
                replacement.keys, replacement.values = layer.keys, layer.values
            cache.layers[index] = replacement
    return cache


CACHE_KEYS = ("cache", "past_key_values")
"""What ``generate`` calls the KV cache among its model keyword arguments (transformers 5 renamed
``past_key_values`` to ``cache``)."""


@dataclass
class Decoded:
    """What ``model.generate(custom_generate=LoopDecoder(...))`` returns."""

    sequences: torch.Tensor
    """[rows, context + generated] the input ids and the generated ids, on the model's device
    (finished rows continue with the pad id), as ``generate``'s ``sequences``."""
    logprobs_BN: torch.Tensor
    """[rows, generated] float32 log-probability of each generated id under the processed
    (sampling) distribution, on the model's device."""
    cache: Any
    """The KV cache: it holds every id of ``sequences`` but the last."""


class LoopDecoder:
    """``generate``'s sampling loop for HFPolicy, passed as ``model.generate(custom_generate=...)``.

    ``generate`` prepares everything as usual (generation config, special tokens, position ids
    from the mask, the all-ones mask dropped, ``logits_to_keep``, a ``DynamicCache`` or the one
    passed, the logits processors and the stopping criteria) and then calls this object instead
    of its own ``_sample``. Per step it does what ``_sample`` does (module docstring), on
    preallocated buffers, and keeps the chosen ids' log-probabilities of the processed scores;
    the result is a ``Decoded``.

    Args:
        timer: Adds the time of the log-probabilities (``logprob``) and of the rest of each step
            (``other``) to it; the forwards are timed by ``forward_timing``.
        defer_stop_check: Queue the next forward before reading whether every row stopped (and
            discard it when they had); None: on CUDA only, where it keeps the host from waiting
            with nothing queued. On the CPU it only wastes the last forward (the tests force it
            to check that the discarded forward changes nothing).
    """

    def __init__(
        self, timer: PartTimer | None = None, defer_stop_check: bool | None = None
    ) -> None:
        self.timer = timer
        self.defer_stop_check = defer_stop_check

    def _lap(self, part: str) -> None:
        if self.timer is not None:
            self.timer.lap(part)

    @torch.no_grad()
    def __call__(
        self,
        model: Any,
        input_ids: torch.Tensor,
        logits_processor: Any,
        stopping_criteria: Any,
        generation_config: Any,
        **model_kwargs: Any,
    ) -> Decoded:
        device = input_ids.device
        rows, total = input_ids.shape
        steps = generation_config.max_length - total
        if steps < 1:
            raise ValueError(f"nothing to generate: max_length {generation_config.max_length}")
        key = next((k for k in CACHE_KEYS if model_kwargs.get(k) is not None), CACHE_KEYS[0])
        cache = prepare_cache(model, model_kwargs.pop(key, None), total + steps)
        held = int(cache.get_seq_length())
        mask_BT = model_kwargs.pop("attention_mask", None)  # None: no padding (generate dropped it)
        position_ids_BT = model_kwargs.pop("position_ids", None)
        if position_ids_BT is None:
            position_ids_BT = torch.arange(total, device=device).expand(rows, total)
        model_kwargs.pop("use_cache", None)
        mask_BL = None
        if mask_BT is not None:
            mask_BL = mask_BT.new_ones((rows, total + steps))
            mask_BL[:, :total] = mask_BT
        last_position_B1 = position_ids_BT[:, -1:]
        # Every id so far, written in place: a view of it is what the processors and the
        # stopping criteria see (generate concatenates a new tensor every step).
        ids_BL = input_ids.new_empty((rows, total + steps))
        ids_BL[:, :total] = input_ids
        logprobs_BN = torch.zeros((rows, steps), dtype=torch.float32, device=device)
        unfinished_B = torch.ones(rows, dtype=torch.bool, device=device)
        pad = generation_config._pad_token_tensor
        pad_B = None if pad is None else pad.to(device).expand(rows)
        stops = any(hasattr(criteria, "eos_token_id") for criteria in stopping_criteria)
        plain = all(len(inspect.signature(p.__call__).parameters) == 2 for p in logits_processor)
        cuda = device.type == "cuda"
        deferred = cuda if self.defer_stop_check is None else self.defer_stop_check
        if deferred and cuda:
            stopped_host = torch.zeros((), dtype=torch.bool, pin_memory=True)
            stopped_event = torch.cuda.Event()

        def forward(ids: torch.Tensor, positions: torch.Tensor, length: int) -> Any:
            return model(
                input_ids=ids,
                attention_mask=None if mask_BL is None else mask_BL[:, :length],
                position_ids=positions,
                use_cache=True,
                return_dict=True,
                **{key: cache},
                **model_kwargs,
            )

        outputs = forward(
            input_ids[:, held:].contiguous(), position_ids_BT[:, held:].contiguous(), total
        )
        generated = 0
        for step in range(steps):
            length = total + step
            seen_BT = ids_BL[:, :length]
            scores_BV = outputs.logits[:, -1].to(copy=True, dtype=torch.float32)
            del outputs
            if plain:
                for processor in logits_processor:
                    scores_BV = processor(seen_BT, scores_BV)
            else:
                scores_BV = logits_processor(seen_BT, scores_BV)
            if generation_config.do_sample:
                probs_BV = torch.nn.functional.softmax(scores_BV, dim=-1)
                chosen_B = torch.multinomial(probs_BV, num_samples=1).squeeze(1)
                del probs_BV
            else:
                chosen_B = torch.argmax(scores_BV, dim=-1)
            if stops and pad_B is not None:
                chosen_B = torch.where(unfinished_B, chosen_B, pad_B)
            self._lap("other")
            # Only the chosen id's log-probability is kept: the step's [rows, vocabulary]
            # tensors are dropped here, never all steps' scores.
            logprobs_BV = torch.log_softmax(scores_BV, dim=-1)
            logprobs_BN[:, step] = logprobs_BV.gather(-1, chosen_B[:, None])[:, 0]
            del logprobs_BV, scores_BV
            self._lap("logprob")
            ids_BL[:, length] = chosen_B
            generated = step + 1
            unfinished_B &= ~stopping_criteria(ids_BL[:, : length + 1], None)
            if generated == steps:
                break
            if not deferred:
                if not bool(unfinished_B.any()):
                    break
            elif cuda:
                stopped_host.copy_(~unfinished_B.any(), non_blocking=True)
                stopped_event.record()
            else:
                stopped_B = ~unfinished_B.any()
            outputs = forward(chosen_B[:, None], last_position_B1 + generated, length + 1)
            if deferred:
                if cuda:
                    stopped_event.synchronize()
                    stopped_B = stopped_host
                if bool(stopped_B):
                    # Every row had stopped: the forward just queued was not needed (and drew
                    # no random numbers); the cache forgets the id it fed.
                    del outputs
                    cache.crop(-1)
                    break
        return Decoded(
            sequences=ids_BL[:, : total + generated],
            logprobs_BN=logprobs_BN[:, :generated],
            cache=cache,
        )
