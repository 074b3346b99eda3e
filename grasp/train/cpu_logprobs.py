"""The GRPO loss's per-token log-probabilities on CPU, from the model's own LM head.

TRL's GRPOTrainer scores completions through a fused, vocabulary-chunked LM head
(``trl.trainer.utils.add_fused_lm_head``). On CUDA it runs as Triton kernels over the
completion positions only. On CPU it falls back to torch code that scores every position of
the padded micro-batch (prompt and padding too), recomputes each vocabulary tile's logits in
its backward and runs the hidden-state gradient in float32: on our 2 cores the update's
backward took 1.7x a plain forward/backward over the same tokens (README, "GRPO step").
``GraspGRPOTrainer`` (grasp/train/trl_bridge.py) uses this module on CPU for the training
forward and the reference and old-policy passes, and leaves every other case to TRL (GPU, an
entropy bonus, MoE auxiliary losses, vision inputs, an fp32-cast head, soft-capped or scaled
logits).

``completion_logprobs`` (``grpo.loss_logprobs=rows``, the default) computes, per position, what
the model's own head gives: the logits divided by the sampling temperature, a float32
log-softmax gathered at the chosen id. Where a step's time and memory went
(``scripts/bench_train_step.py``, results/bench/) decided how:

- **One row at a time, without its padding.** TRL lays a micro-batch out as left-padded
  prompts and right-padded completions, all as wide as the longest completion of the step.
  Each row runs alone, cut to its own tokens (and to the last one a scored position reads):
  no padded position is computed, and with no
  padding left the attention runs as plain causal attention (PyTorch's CPU flash kernel),
  whose backward is about 2x faster than the masked one a padded batch needs. Positions
  start at 0 for each row, as in the rollout that sampled it (a left-padded batch shifts them;
  rotary attention depends on differences only, so this changes rounding, not values).
- **The head only where something is read.** The trunk's hidden states come from the model's
  own forward (a hook on its decoder); the LM head then runs only at the positions scored:
  the completion's, or, for the loss (``scored``), only the tokens the policy generated
  (``completion_mask * tool_mask``: observation tokens carry no loss, KL or entropy). Every
  other position scores 0, as padding does in TRL.
- **LoRA in two matmuls.** PEFT's LoRA layer casts its input to the adapter's float32 and
  back, scales the adapter's output and adds it, each a pass over [tokens, features] in both
  directions; under bf16 autocast ``fused_lora`` computes ``x W^T + (x A^T)(s B)^T`` as one
  linear and one ``addmm`` (1.2x the forward/backward of a 1,200-token row of SmolLM2 with
  r = 8). The same arithmetic up to rounding (``s B`` is rounded once to bfloat16).
- **No full-vocabulary logits kept.** The head, the log-softmax and the gather run over
  ``chunk`` positions at a time, each chunk under activation checkpointing: its
  [chunk, vocabulary] logits are dropped after the forward and recomputed in the backward,
  so at most one chunk's logits exist at a time (Liger's fused linear cross-entropy makes the
  same trade). The arithmetic is the plain head's, op for op.

``full_vocabulary_logprobs`` (``grpo.loss_logprobs=full_vocab``) is the former path, kept to
compare against (the benchmark's "before" arm and the tests): the padded micro-batch through
the whole model, float32 logits of every completion position.
"""

from __future__ import annotations

import contextlib
import types
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from typing import Any

import torch
from torch.utils.checkpoint import checkpoint

from grasp.rollout.hf_decode import grouped_query_attention
from grasp.types import StrEnum


class LossLogprobs(StrEnum):
    """How the CPU loss computes its log-probabilities (``grpo.loss_logprobs``)."""

    ROWS = "rows"
    """Each row without its padding, the head only at scored positions, in chunks."""
    FULL_VOCAB = "full_vocab"
    """The padded micro-batch, full-vocabulary logits at every completion position (former)."""


def completion_logprobs(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    logits_to_keep: int,
    *,
    temperature: float = 1.0,
    compute_entropy: bool = False,
    autocast: Callable[[], Any] | None = None,
    scored: torch.Tensor | None = None,
    chunk: int = 1024,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probabilities (and, without gradient, entropies) of the last ``logits_to_keep`` ids
    of each row under ``model``, as (rows, logits_to_keep) tensors.

    Args:
        input_ids: [rows, prompt + completion] TRL's layout (left-padded prompts,
            right-padded completions).
        attention_mask: [rows, prompt + completion] 1 on real tokens.
        scored: [rows, logits_to_keep] the completion positions to score (default: every
            completion position the attention mask keeps); the others are 0.
        chunk: positions per LM-head chunk (bounds the [chunk, vocabulary] logits alive).
        autocast: a context-manager factory around the model and head (mixed precision).
    """
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    keep = logits_to_keep
    rows, width = input_ids.shape
    completion_mask = attention_mask[:, -keep:].bool()
    scored_BK = completion_mask if scored is None else completion_mask & scored.bool()
    logps = torch.zeros((rows, keep), dtype=torch.float32, device=input_ids.device)
    entropies = torch.zeros_like(logps) if compute_entropy else None
    pieces: list[tuple[int, torch.Tensor, torch.Tensor]] = []
    head = output_head(model)
    for row in range(rows):
        columns = scored_BK[row].nonzero().squeeze(-1)
        if columns.numel() == 0:
            continue
        real = attention_mask[row].nonzero().squeeze(-1)
        # From the row's first real token to the one before its last scored id: an id is read
        # at the position before it, and nothing after the last scored id is read at all.
        start, end = int(real[0]), width - keep + int(columns[-1])
        ids_1L = input_ids[row : row + 1, start:end]
        mask_1L = attention_mask[row : row + 1, start:end]
        # None where the row is contiguous: plain causal attention, no mask to build.
        mask_1L = None if bool(mask_1L.all()) else mask_1L
        with autocast() if autocast is not None else nullcontext():
            with grouped_query_attention(input_ids.device):  # a row with holes has a mask
                hidden_LH = decoder_hidden_states(model, ids_1L, mask_1L)[0]
        # Completion column k is input column width - keep + k, predicted at the one before.
        at_M = columns + (width - keep - 1 - start)
        chosen_M = input_ids[row, width - keep + columns]
        row_logps, row_entropy = chunked_head_logprobs(
            head, hidden_LH[at_M], chosen_M, temperature, chunk, compute_entropy, autocast
        )
        pieces.append((row, columns, row_logps))
        if entropies is not None and row_entropy is not None:
            entropies[row, columns] = row_entropy
    # Written once, out of place: each row's log-probabilities keep their own graph.
    for row, columns, row_logps in pieces:
        logps = logps.index_put((torch.full_like(columns, row), columns), row_logps)
    if not pieces and torch.is_grad_enabled():
        # Nothing to score (every episode of the micro-batch failed before generating): the
        # loss is 0, and its backward must still run, with zero gradients.
        trainable = next((p for p in model.parameters() if p.requires_grad), None)
        if trainable is not None:
            logps = logps + 0.0 * trainable.reshape(-1)[0]
    return logps, entropies


def unwrapped_causal_lm(model: Any) -> Any:
    """The causal LM inside ``model``: a DDP wrapper's module, a PEFT model's base model."""
    inner = getattr(model, "module", model)
    return inner.get_base_model() if hasattr(inner, "get_base_model") else inner


def decoder_of(model: Any) -> torch.nn.Module:
    """The decoder (embeddings, layers, final norm) of ``model``'s causal LM."""
    return unwrapped_causal_lm(model).get_decoder()


def output_head(model: Any) -> torch.nn.Module:
    """The LM head of ``model``'s causal LM."""
    causal_lm = unwrapped_causal_lm(model)
    head = causal_lm.get_output_embeddings()
    if head is None:
        raise ValueError(f"{type(causal_lm).__name__} has no output embeddings (LM head)")
    return head


def decoder_hidden_states(
    model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor | None
) -> torch.Tensor:
    """[rows, length, hidden] the final hidden states (after the last norm) of ``model``.

    Runs the model's own forward, so that any wrapper (PEFT, DDP) sees the call, with its head
    on one position only; a hook on the decoder takes the hidden states on their way."""
    captured: list[torch.Tensor] = []

    def keep(_module: Any, _args: Any, output: Any) -> None:
        captured.append(output[0] if isinstance(output, tuple) else output.last_hidden_state)

    handle = decoder_of(model).register_forward_hook(keep)
    try:
        model(input_ids=input_ids, attention_mask=attention_mask, logits_to_keep=1, use_cache=False)
    finally:
        handle.remove()
    if len(captured) != 1:
        raise RuntimeError(f"the decoder ran {len(captured)} times in one forward")
    return captured[0]


def chunked_head_logprobs(
    head: torch.nn.Module,
    hidden_MH: torch.Tensor,
    chosen_M: torch.Tensor,
    temperature: float,
    chunk: int,
    compute_entropy: bool,
    autocast: Callable[[], Any] | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """[M] log-probability of each ``chosen_M`` id from its hidden state, ``chunk`` positions
    at a time; with gradient, each chunk's logits are recomputed in the backward instead of
    kept. Also [M] entropies (no gradient) when ``compute_entropy``."""

    def piece(hidden_CH: torch.Tensor, chosen_C: torch.Tensor) -> torch.Tensor:
        with autocast() if autocast is not None else nullcontext():
            logits_CV = head(hidden_CH)
        logits_CV = logits_CV.float()
        if temperature != 1.0:
            logits_CV = logits_CV / temperature
        return logits_CV.log_softmax(-1).gather(-1, chosen_C[:, None])[:, 0]

    logps, entropies = [], []
    for start in range(0, hidden_MH.shape[0], chunk):
        hidden_CH = hidden_MH[start : start + chunk]
        chosen_C = chosen_M[start : start + chunk]
        if torch.is_grad_enabled() and hidden_CH.requires_grad:
            logps.append(checkpoint(piece, hidden_CH, chosen_C, use_reentrant=False))
        else:
            logps.append(piece(hidden_CH, chosen_C))
        if compute_entropy:
            with torch.no_grad():
                with autocast() if autocast is not None else nullcontext():
                    logits_CV = head(hidden_CH.detach())
                logits_CV = logits_CV.float()
                if temperature != 1.0:
                    logits_CV = logits_CV / temperature
                entropies.append(_entropy(logits_CV))
    return torch.cat(logps), torch.cat(entropies) if compute_entropy else None


def _entropy(logits_CV: torch.Tensor) -> torch.Tensor:
    logps_CV = logits_CV.log_softmax(-1)
    return -(logps_CV.exp() * logps_CV).sum(-1)


def full_vocabulary_logprobs(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    logits_to_keep: int,
    *,
    temperature: float = 1.0,
    batch_size: int | None = None,
    compute_entropy: bool = False,
    autocast: Callable[[], Any] | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The former path: logits of every completion position of the padded micro-batch (the
    model's ``logits_to_keep``), copied to float32, divided by the temperature, a log-softmax
    gathered at the chosen ids; 0 where the attention mask is 0. Same shapes and meaning as
    ``completion_logprobs``."""
    from trl.trainer.utils import entropy_from_logits, selective_log_softmax

    batch_size = batch_size or input_ids.size(0)
    logps, entropies = [], []
    for start in range(0, input_ids.size(0), batch_size):
        ids_BT = input_ids[start : start + batch_size]
        mask_BT = attention_mask[start : start + batch_size]
        with autocast() if autocast is not None else nullcontext():
            # One more position than scored: position t's logits predict id t + 1.
            logits_BKV = model(
                input_ids=ids_BT,
                attention_mask=mask_BT,
                logits_to_keep=logits_to_keep + 1,
                use_cache=False,
            ).logits
        logits_BKV = logits_BKV[:, :-1].float()
        if temperature != 1.0:
            logits_BKV = logits_BKV / temperature
        padding_BK = mask_BT[:, -logits_to_keep:] == 0
        chosen_BK = ids_BT[:, -logits_to_keep:]
        logps.append(selective_log_softmax(logits_BKV, chosen_BK).masked_fill(padding_BK, 0.0))
        if compute_entropy:
            with torch.no_grad():
                entropies.append(entropy_from_logits(logits_BKV).masked_fill(padding_BK, 0.0))
    return torch.cat(logps), torch.cat(entropies) if compute_entropy else None


@contextlib.contextmanager
def fused_lora(model: Any) -> Iterator[None]:
    """Within the block, ``model``'s plain LoRA layers (PEFT's ``Linear``, no dropout, no
    variant such as DoRA) compute under autocast ``base(x) + (x A^T)(s B)^T`` in one
    ``addmm`` (module docstring); a layer whose adapters are disabled runs its base alone, as
    PEFT's does. Any other case (no autocast, merged adapters, extra arguments) runs PEFT's
    own forward. Nothing is changed outside the block."""
    from peft.tuners.lora import Linear as LoraLinear

    swapped = [m for m in model.modules() if type(m) is LoraLinear]
    for module in swapped:
        module.forward = types.MethodType(_fused_lora_forward, module)
    try:
        yield
    finally:
        for module in swapped:
            del module.forward  # the instance attribute: the class's forward shows again


def _fused_lora_forward(self: Any, x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
    plain = (
        not args
        and not kwargs
        and not self.merged
        and not self.lora_variant
        and torch.is_autocast_enabled(x.device.type)
        and all(
            isinstance(self.lora_dropout[name], torch.nn.Identity)
            for name in self.active_adapters
            if name in self.lora_A
        )
    )
    if not plain:
        return type(self).forward(self, x, *args, **kwargs)
    out = self.base_layer(x)
    if self.disable_adapters:
        return out
    for name in self.active_adapters:
        if name not in self.lora_A:
            continue
        xa = torch.nn.functional.linear(x, self.lora_A[name].weight)
        scaled_b = self.lora_B[name].weight * self.scaling[name]
        out = torch.addmm(
            out.reshape(-1, out.shape[-1]), xa.reshape(-1, xa.shape[-1]), scaled_b.t()
        ).view(out.shape)
    return out
