"""A test-only scripted backend: canned replies per prompt purpose, every prompt recorded."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import pytest

from grasp.baselines import Backend
from grasp.rollout.policy import Generation, GenerationRequest, SamplingConfig


class CannedLLM:
    """A scripted stand-in for an LLM (tests only): ``replies[purpose]`` is the reply text,
    or a function of the request. Records every request and every generate call."""

    def __init__(self, replies: Mapping[str, str | Callable[[GenerationRequest], str]]) -> None:
        self.replies = dict(replies)
        self.requests: list[GenerationRequest] = []
        self.calls: list[int] = []
        """Number of prompts in each generate call."""

    def generate(
        self, requests: Sequence[GenerationRequest], sampling: SamplingConfig
    ) -> list[Generation]:
        self.calls.append(len(requests))
        self.requests.extend(requests)
        out = []
        for request in requests:
            reply = self.replies[purpose(request)]
            out.append(Generation(text=reply(request) if callable(reply) else reply))
        return out

    def prompts(self, kind: str) -> list[str]:
        """The user messages of every prompt of one purpose, in order."""
        return [r.messages[-1]["content"] for r in self.requests if purpose(r) == kind]


def purpose(request: GenerationRequest) -> str:
    return request.request_id.rsplit("/", 1)[1]


@pytest.fixture
def canned():
    def make(**replies) -> tuple[CannedLLM, Backend]:
        llm = CannedLLM(replies)
        return llm, Backend(llm)

    return make
