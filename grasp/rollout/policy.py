"""The policy protocol: one batched generation call for every active episode of a turn.

A backend receives, for each active episode, both the chat messages so far and the exact
token ids of the conversation (built incrementally by the rollout engine). Token-level
backends (transformers, vLLM) generate from the ids, so the trajectory the trainer sees is
exactly what the model saw; chat-level backends (an OpenAI-compatible endpoint, scripted
policies) use the messages and may return no ids.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass
class SamplingConfig:
    """How a policy samples one turn."""

    temperature: float = 1.0
    """0 means greedy decoding."""
    top_p: float = 1.0
    """Nucleus sampling mass."""
    max_new_tokens: int = 256
    """Upper bound on tokens generated in one turn."""
    seed: int = 0
    """Base seed; backends derive per-request seeds from it where they can."""


@dataclass
class GenerationRequest:
    """One active episode's context for the next turn."""

    messages: list[dict[str, Any]]
    """The conversation so far (system, user, assistant and tool messages)."""
    token_ids: list[int] | None
    """[context_len] exact ids of the conversation, ending with the assistant header."""
    max_new_tokens: int
    """Tokens this turn may use (the smaller of the turn limit and what the context allows)."""
    request_id: str = ""
    """Stable id of the episode (question, sample), for seeding and for scripted policies."""


@dataclass
class Generation:
    """What a policy produced for one request."""

    text: str
    """The generated text, without the end-of-turn token."""
    token_ids: list[int] | None = None
    """[new_tokens] generated ids, including the end-of-turn token when one was produced."""
    logprobs: list[float] | None = None
    """[new_tokens] log-probability of each generated id under the sampling policy."""
    finished: bool = True
    """False when generation hit max_new_tokens before the end-of-turn token."""
    error: str | None = None
    """Set when the backend failed for this request; the episode stops with generation_error."""
    extra: dict[str, Any] = field(default_factory=dict)
    """What the backend reports about this turn (finish reason...). Under ``EPISODE_EXTRA``, a
    dict of facts about the whole episode (a baseline's route...): the rollout engine copies it
    into the trajectory's ``extra``, a later turn's keys overwriting an earlier turn's."""


EPISODE_EXTRA = "episode"
"""The key of ``Generation.extra`` whose dict the rollout engine merges into the episode's."""


@runtime_checkable
class Policy(Protocol):
    """Anything that turns a batch of contexts into a batch of generations."""

    def generate(
        self, requests: Sequence[GenerationRequest], sampling: SamplingConfig
    ) -> list[Generation]:
        """One generation per request, in order."""
        ...
