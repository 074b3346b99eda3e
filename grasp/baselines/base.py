"""The baseline policy: control flow in code, language from a backend, actions through the env.

A baseline is a ``Policy`` like any other: each turn it receives every active episode's
messages and returns the text of one tool call per episode, which the environment parses and
runs, so searches, recall, reward and metrics are exactly those of every other policy.

Each baseline writes its decision for one episode as a generator, ``step(view)``: it yields a
list of backend prompts, receives their reply texts, and finally returns the ``Action`` to
emit. ``generate`` drives the generators of all episodes of the turn together, so each round
of prompts (e.g. CRAG's five grades for each of 64 episodes) is ONE batched backend call::

    def step(self, view):
        [reply] = yield [answer_prompt(view.question, [], ...)]
        return Action(ToolName.ANSWER, {"answer": clean_answer(reply)})

What an episode reports (``Generation.extra["episode"]``, copied into the trajectory's
``extra``): the baseline's name, its route or corrections, the paragraph ids the backend
answered from (``context_paragraph_ids``), and the backend calls and tokens it used so far.
"""

from __future__ import annotations

import abc
from collections import Counter
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from typing import Any

from grasp.baselines.backend import Backend, Completion
from grasp.baselines.config import BaselineConfig, BaselineKind, SearchMode
from grasp.baselines.episode import EpisodeView, Passage, note_line
from grasp.baselines.prompts import Prompt, answer_prompt, clean_answer
from grasp.env.environment import EnvConfig
from grasp.rollout.policy import (
    EPISODE_EXTRA,
    Generation,
    GenerationRequest,
    SamplingConfig,
)
from grasp.rollout.scripted import tool_call_text
from grasp.types import ToolName

SEARCH_TOOL = {
    SearchMode.SEMANTIC: ToolName.SEMANTIC_SEARCH,
    SearchMode.LEXICAL: ToolName.KEYWORD_SEARCH,
}
OTHER_SEARCH = {
    ToolName.SEMANTIC_SEARCH: ToolName.KEYWORD_SEARCH,
    ToolName.KEYWORD_SEARCH: ToolName.SEMANTIC_SEARCH,
}


def single_search_tool(config: BaselineConfig) -> ToolName:
    """The one search tool ``baseline.search`` names; hybrid (two searches) is single_step's."""
    if config.search is SearchMode.HYBRID:
        raise ValueError(
            f"baseline.search=hybrid is for single_step; baseline={config.kind} needs "
            "semantic or lexical"
        )
    return SEARCH_TOOL[SearchMode(config.search)]


@dataclass
class Action:
    """The tool call a baseline emits this turn, with its reasoning, notes and episode facts."""

    tool: str
    """A tool's name (a ``ToolName`` for the shipped ones)."""
    arguments: dict[str, Any]
    reasoning: str = ""
    """Free text before the call (IRCoT's sentence); shown in the trajectory."""
    notes: dict[str, str] = field(default_factory=dict)
    """Decisions later turns read back (``EpisodeView.notes``)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Facts about the episode for the trajectory's extra."""

    def text(self) -> str:
        lines = [line for line in self.reasoning.splitlines() if line.strip()]
        lines += [note_line(key, value) for key, value in self.notes.items()]
        return tool_call_text(str(self.tool), "\n".join(lines), **self.arguments)


_USAGE_KEYS = ("backend_calls", "backend_prompt_tokens", "backend_generated_tokens")

Step = Generator[list[Prompt], list[str], Action]
"""A baseline's decision for one episode: yields prompts, receives replies, returns an Action."""


@dataclass
class _Run:
    """One episode's step generator during a ``generate`` call."""

    request: GenerationRequest
    view: EpisodeView
    step: Step
    prompts: list[Prompt] = field(default_factory=list)
    usage: Counter = field(default_factory=Counter)
    result: Generation | None = None


class BaselinePolicy(abc.ABC):
    """A policy whose tool calls are decided in code, with a backend for the language parts."""

    kind: BaselineKind
    """Set by each subclass."""

    def __init__(self, backend: Backend, config: BaselineConfig, env: EnvConfig) -> None:
        self.backend = backend
        self.config = config
        self.env = env
        self._usage: dict[str, Counter] = {}
        self.check_env(env)

    # ------------------------------------------------------------------ per baseline

    @abc.abstractmethod
    def step(self, view: EpisodeView) -> Step:
        """The decision for one episode this turn."""

    @abc.abstractmethod
    def check_env(self, env: EnvConfig) -> None:
        """Raise ValueError naming env.tools or env.turn_budget when the baseline cannot run."""

    # ------------------------------------------------------------------ shared pieces

    def answer(
        self,
        view: EpisodeView,
        passages: Sequence[Passage],
        reasoning: Sequence[str] = (),
        notes: dict[str, str] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> Step:
        """Ask the backend for the answer from ``passages``; return the answer call."""
        prompt = answer_prompt(
            view.question,
            passages,
            self.config.max_passage_chars,
            self.config.answer_tokens,
            reasoning,
        )
        [reply] = yield [prompt]
        context = sorted({p.paragraph_id for p in passages})
        return Action(
            ToolName.ANSWER,
            {"answer": clean_answer(reply)},
            notes=notes or {},
            extra={**(extra or {}), "context_paragraph_ids": context},
        )

    def search(self, tool: str, query: str, fallback: str = "", **fields: Any) -> Action:
        """A search call with ``query`` cut to env.max_query_chars (``fallback`` when empty)."""
        text = query.strip()[: self.env.max_query_chars].strip()
        if not text:
            text = fallback.strip()[: self.env.max_query_chars].strip()
        return Action(tool, {"query": text}, **fields)

    def require_tools(self, env: EnvConfig, tools: Sequence[str], turns: int) -> None:
        """Fail unless ``env`` offers ``tools`` and at least ``turns`` turns."""
        missing = [str(t) for t in tools if t not in env.tools]
        if missing:
            raise ValueError(
                f"baseline={self.kind} needs env.tools to include {missing} "
                f"(baseline.search={self.config.search}), got {[str(t) for t in env.tools]}"
            )
        if env.turn_budget < turns:
            raise ValueError(
                f"baseline={self.kind} needs env.turn_budget >= {turns}, got {env.turn_budget}"
            )

    # ------------------------------------------------------------------ the Policy protocol

    def generate(
        self, requests: Sequence[GenerationRequest], sampling: SamplingConfig
    ) -> list[Generation]:
        """One tool call per request; each round of backend prompts is one batched call."""
        runs = []
        for request in requests:
            view = EpisodeView.from_messages(request.messages, self.env.turn_budget)
            if view.turn == 0 or request.request_id not in self._usage:
                self._usage[request.request_id] = Counter(dict.fromkeys(_USAGE_KEYS, 0))
            run = _Run(request, view, self.step(view), usage=self._usage[request.request_id])
            self._advance(run, None)
            runs.append(run)
        while waiting := [run for run in runs if run.result is None]:
            prompts = [(run, prompt) for run in waiting for prompt in run.prompts]
            completions = self.backend.complete(
                [prompt for _, prompt in prompts],
                [run.request.request_id for run, _ in prompts],
                sampling,
            )
            replies: dict[int, list[Completion]] = {id(run): [] for run in waiting}
            for (run, _), completion in zip(prompts, completions, strict=True):
                replies[id(run)].append(completion)
            for run in waiting:
                self._receive(run, replies[id(run)])
        return [run.result for run in runs if run.result is not None]

    def _advance(self, run: _Run, replies: list[str] | None) -> None:
        """Run the step until it asks for prompts or returns its action."""
        try:
            prompts = next(run.step) if replies is None else run.step.send(replies)
            while not prompts:  # a round without prompts needs no backend call
                prompts = run.step.send([])
        except StopIteration as stop:
            run.result = self._finish(run, stop.value)
            return
        run.prompts = list(prompts)

    def _receive(self, run: _Run, completions: list[Completion]) -> None:
        run.usage["backend_calls"] += len(completions)
        run.usage["backend_prompt_tokens"] += sum(c.prompt_tokens for c in completions)
        run.usage["backend_generated_tokens"] += sum(c.generated_tokens for c in completions)
        failed = next((c.error for c in completions if c.error is not None), None)
        if failed is not None:
            run.step.close()
            run.result = Generation(text="", finished=False, error=f"backend: {failed}")
            return
        self._advance(run, [c.text for c in completions])

    def _finish(self, run: _Run, action: Action) -> Generation:
        if not isinstance(action, Action):
            raise TypeError(f"{type(self).__name__}.step returned {action!r}, not an Action")
        episode = {"baseline": str(self.kind), **action.extra, **dict(run.usage)}
        if action.tool == ToolName.ANSWER:
            self._usage.pop(run.request.request_id, None)
        return Generation(text=action.text(), extra={EPISODE_EXTRA: episode})
