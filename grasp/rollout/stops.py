"""The token ids that end an assistant turn: one definition for every token-level backend.

A turn ends at the end-of-turn token (``<|im_end|>`` in ChatML), at the tokenizer's eos, and at
every eos the model's ``generation_config`` declares. Qwen2.5-Instruct declares two
(``<|im_end|>`` and ``<|endoftext|>``) while its tokenizer names only the first, so a backend
that read only the tokenizer would let a turn run past ``<|endoftext|>`` where another backend
stops: the same policy would then write different trajectories depending on the backend.

    stops = stop_token_ids(tokenizer, model.generation_config)  # [end_of_turn, *eos...]
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

END_OF_TURN = "<|im_end|>"
"""The ChatML end-of-turn token (Qwen2.5, SmolLM2 with the Qwen2.5 template)."""


def end_of_turn_id(tokenizer: Any, token: str = END_OF_TURN) -> int:
    """The id of ``token``; ValueError when the tokenizer does not encode it as one token."""
    ids = tokenizer.encode(token, add_special_tokens=False)
    if len(ids) != 1:
        raise ValueError(f"end-of-turn token {token!r} is not a single token: {ids}")
    return int(ids[0])


def declared_eos_ids(generation_config: Any) -> list[int]:
    """The eos ids a ``GenerationConfig`` (or its dict form) declares: none, one or a list."""
    if generation_config is None:
        return []
    if isinstance(generation_config, Mapping):
        declared = generation_config.get("eos_token_id")
    else:
        declared = getattr(generation_config, "eos_token_id", None)
    if declared is None:
        return []
    values = declared if isinstance(declared, (list, tuple)) else [declared]
    return [int(v) for v in values if v is not None]


def stop_token_ids(
    tokenizer: Any, generation_config: Any = None, end_of_turn_token: str = END_OF_TURN
) -> list[int]:
    """The end-of-turn id first, then the tokenizer's eos, then the model's declared eos ids.

    Args:
        tokenizer: The policy's tokenizer (``encode`` and ``eos_token_id``).
        generation_config: The model's ``GenerationConfig``, a dict with ``eos_token_id``, or
            None when the model declares nothing beyond its tokenizer.
        end_of_turn_token: The token that ends an assistant turn.

    Returns:
        Distinct ids in that order; the first is always the end-of-turn id.
    """
    stops = [end_of_turn_id(tokenizer, end_of_turn_token)]
    for token_id in [tokenizer.eos_token_id, *declared_eos_ids(generation_config)]:
        if token_id is not None and int(token_id) not in stops:
            stops.append(int(token_id))
    return stops
