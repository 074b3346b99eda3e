"""The GRPO loss's per-token log-probabilities on CPU, from the model's own LM head.

TRL's GRPOTrainer scores completions through a fused, vocabulary-chunked LM head
(``trl.trainer.utils.add_fused_lm_head``). On CUDA it runs as Triton kernels over the
completion positions only. On CPU it falls back to torch code that scores every position of
the padded micro-batch (prompt and padding too), recomputes each vocabulary tile's logits in
its backward and runs the hidden-state gradient in float32: on our 2 cores the update's
backward took 1.7x a plain forward/backward over the same tokens (README, "GRPO step").

``completion_logprobs`` computes the same quantities the plain way: logits of the completion
positions only (the model's ``logits_to_keep``), divided by the sampling temperature, a
float32 log-softmax gathered at the chosen ids, autograd's backward; padding positions get 0,
as in TRL. ``GraspGRPOTrainer`` (grasp/train/trl_bridge.py) uses it on CPU for the training
forward and the reference and old-policy passes, and leaves every other case to TRL (GPU, an
entropy bonus, MoE auxiliary losses, vision inputs, an fp32-cast head, soft-capped or scaled
logits).
"""

from __future__ import annotations

from typing import Any

import torch


def completion_logprobs(
    model: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    logits_to_keep: int,
    *,
    temperature: float = 1.0,
    batch_size: int | None = None,
    compute_entropy: bool = False,
    autocast: Any = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probabilities (and, without gradient, entropies) of the last ``logits_to_keep`` ids
    of each row under ``model``, as (rows, logits_to_keep) tensors; 0 where the attention
    mask is 0. ``autocast``: a context-manager factory around the model call (the trainer's
    mixed precision)."""
    from contextlib import nullcontext

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


def unwrapped_causal_lm(model: Any) -> Any:
    """The causal LM inside ``model``: a DDP wrapper's module, a PEFT model's base model."""
    inner = getattr(model, "module", model)
    return inner.get_base_model() if hasattr(inner, "get_base_model") else inner


def decoder_of(model: Any) -> torch.nn.Module:
    """The decoder (embeddings, layers, final norm) of ``model``'s causal LM."""
    return unwrapped_causal_lm(model).get_decoder()
