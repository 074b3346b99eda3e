"""The language model behind a baseline: any ``Policy``, called with the baseline's own prompts.

Token-level policies (transformers, vLLM) generate from token ids, so each prompt is rendered
through the backend's chat template (a ``ChatTokenizer`` built without tool schemas: the
backend never sees the environment's tools, the baseline calls them). Chat-level policies
(an OpenAI-compatible server, scripted test backends) take the messages as they are.

    backend = Backend(built.policy, built.chat)
    [completion] = backend.complete([prompt], ["q1#0/answer"], sampling)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from grasp.baselines.prompts import Prompt
from grasp.rollout.chat import ChatTokenizer
from grasp.rollout.policy import GenerationRequest, Policy, SamplingConfig


@dataclass(frozen=True)
class Completion:
    """The backend's reply to one prompt."""

    text: str
    error: str | None = None
    """Set when the backend failed on this prompt."""
    prompt_tokens: int = 0
    """Tokens of the rendered prompt (0 for chat-level backends)."""
    generated_tokens: int = 0
    """Tokens generated (0 when the backend returns no ids)."""


class Backend:
    """Runs a batch of baseline prompts through a policy in one ``generate`` call."""

    def __init__(self, policy: Policy, chat: ChatTokenizer | None = None) -> None:
        self.policy = policy
        self.chat = chat

    def complete(
        self, prompts: Sequence[Prompt], request_ids: Sequence[str], sampling: SamplingConfig
    ) -> list[Completion]:
        """One completion per prompt, in order; never raises for a failed generation."""
        if len(prompts) != len(request_ids):
            raise ValueError(f"{len(request_ids)} request ids for {len(prompts)} prompts")
        if not prompts:
            return []
        requests = []
        for prompt, request_id in zip(prompts, request_ids, strict=True):
            messages = prompt.messages()
            requests.append(
                GenerationRequest(
                    messages=messages,
                    token_ids=self.chat.prompt_ids(messages) if self.chat else None,
                    max_new_tokens=prompt.max_new_tokens,
                    request_id=f"{request_id}/{prompt.purpose}",
                )
            )
        turn_sampling = SamplingConfig(
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            max_new_tokens=max(p.max_new_tokens for p in prompts),
            seed=sampling.seed,
        )
        generations = self.policy.generate(requests, turn_sampling)
        if len(generations) != len(requests):
            raise RuntimeError(
                f"backend returned {len(generations)} generations for {len(requests)} prompts"
            )
        return [
            Completion(
                text=generation.text,
                error=generation.error,
                prompt_tokens=len(request.token_ids or ()),
                generated_tokens=len(generation.token_ids or ()),
            )
            for request, generation in zip(requests, generations, strict=True)
        ]
