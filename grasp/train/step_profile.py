"""Where a GRPO step's time goes: generation, environment, reference and old log-probabilities,
forward, backward and optimizer, with the tokens each part processes.

``StepProfiler.attach(trainer)`` wraps, on one ``GRPOTrainer`` instance (no TRL code is
changed), the calls that make a step: our rollout engine's ``run`` (whose own timings split
generation from environment), the no-grad log-probability passes TRL makes for the reference
(and for the old policy when it needs one), ``compute_loss`` (the training forward),
``accelerator.backward``, and the optimizer step (between the ``on_pre_optimizer_step`` and
``on_optimizer_step`` callbacks). Each finished step becomes a ``StepTiming``; what the wrapped
parts leave over ("other": reward functions, padding, advantage computation, logging) is the
step's wall time minus their sum. ``scripts/bench_train_step.py`` uses it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from grasp.train.trl_bridge import GRPOTrainerView, wrap_step_calls

PARTS = ("generation", "environment", "logprobs_no_grad", "forward", "backward", "optimizer")
"""The parts of a step, in the order they happen."""


@dataclass
class StepTokens:
    """Tokens of one step's B x G trajectories."""

    prompt: int = 0
    """Prompt (system, tool list, demonstration, question) tokens, summed over trajectories."""
    generated: int = 0
    """Tokens the policy generated (env mask 1: they carry the loss)."""
    inserted: int = 0
    """Observation and scaffold tokens the environment inserted (env mask 0)."""
    prefilled: int = 0
    """Context tokens the policy ran through the model before generating, over every turn
    (``HFPolicy.prefilled_tokens``, padding included; 0 for another backend): every turn's
    whole context, or with ``grpo.reuse_cache`` only what was appended since the last."""
    trajectories: int = 0
    turns: int = 0
    """Generation calls of the step (turns of its longest episode)."""

    @property
    def sequence(self) -> int:
        """Every token the training forward pass reads."""
        return self.prompt + self.generated + self.inserted


@dataclass
class StepTiming:
    """Seconds of one optimizer step, by part."""

    step: int
    wall: float
    parts: dict[str, float]
    tokens: StepTokens

    @property
    def other(self) -> float:
        return self.wall - sum(self.parts.values())

    def to_json(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "wall_s": self.wall,
            "parts_s": {**self.parts, "other": self.other},
            "tokens": asdict(self.tokens) | {"sequence": self.tokens.sequence},
        }


@dataclass
class StepProfiler:
    """Collects ``StepTiming``s from a trainer it is attached to."""

    steps: list[StepTiming] = field(default_factory=list)
    last_batch: Any = None
    """The rollout batch (``grasp.rollout.engine.RolloutBatch``) of the latest step."""
    _parts: dict[str, float] = field(default_factory=dict)
    _tokens: StepTokens = field(default_factory=StepTokens)
    _started: float = 0.0
    _optimizer_started: float = 0.0

    def attach(self, trainer: GRPOTrainerView) -> StepProfiler:
        """Wrap the step's calls on ``trainer`` (a GRPOTrainer built by make_grpo_trainer)."""
        from transformers import TrainerCallback

        wrappers = {
            "rollout": self._timed_rollout,
            "logprobs": self._timed_logprobs,
            "forward": lambda call: self._timed(call, "forward"),
            "backward": lambda call: self._timed(call, "backward"),
        }
        wrap_step_calls(trainer, lambda part, call: wrappers[part](call))
        profiler = self

        class _Boundaries(TrainerCallback):
            def on_step_begin(self, args, state, control, **kwargs):
                profiler._begin()

            def on_pre_optimizer_step(self, args, state, control, **kwargs):
                profiler._optimizer_started = time.perf_counter()

            def on_optimizer_step(self, args, state, control, **kwargs):
                profiler._add("optimizer", time.perf_counter() - profiler._optimizer_started)

            def on_step_end(self, args, state, control, **kwargs):
                profiler._end(state.global_step)

        trainer.add_callback(_Boundaries())
        return self

    # ------------------------------------------------------------------ wrappers

    def _timed(self, function: Callable[..., Any], part: str) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self._add(part, time.perf_counter() - started)

        return timed

    def _timed_logprobs(self, function: Callable[..., Any]) -> Callable[..., Any]:
        import torch

        def timed(*args: Any, **kwargs: Any) -> Any:
            if torch.is_grad_enabled():  # the training forward: counted inside compute_loss
                return function(*args, **kwargs)
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self._add("logprobs_no_grad", time.perf_counter() - started)

        return timed

    def _timed_rollout(self, run: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            policy = kwargs.get("policy")
            before = getattr(policy, "prefilled_tokens", 0)
            batch = run(*args, **kwargs)
            self._tokens.prefilled += getattr(policy, "prefilled_tokens", 0) - before
            self.last_batch = batch
            self._add("generation", batch.timings.generation)
            self._add("environment", batch.timings.environment)
            tokens = self._tokens
            tokens.turns += batch.timings.turns
            for trace in batch.traces:
                tokens.trajectories += 1
                tokens.prompt += len(trace.prompt_ids)
                tokens.generated += sum(trace.env_mask)
                tokens.inserted += len(trace.env_mask) - sum(trace.env_mask)
            return batch

        return timed

    # ------------------------------------------------------------------ step boundaries

    def _add(self, part: str, seconds: float) -> None:
        self._parts[part] = self._parts.get(part, 0.0) + seconds

    def _begin(self) -> None:
        self._parts = dict.fromkeys(PARTS, 0.0)
        self._tokens = StepTokens()
        self._started = time.perf_counter()

    def _end(self, step: int) -> None:
        wall = time.perf_counter() - self._started
        self.steps.append(StepTiming(step, wall, dict(self._parts), self._tokens))


def mean_timing(steps: list[StepTiming]) -> dict[str, Any]:
    """Per-part means over ``steps`` (seconds and tokens), plus samples per minute."""
    if not steps:
        raise ValueError("no step was timed")
    n = len(steps)
    parts = {part: sum(s.parts[part] for s in steps) / n for part in PARTS}
    parts["other"] = sum(s.other for s in steps) / n
    wall = sum(s.wall for s in steps) / n
    samples = sum(s.tokens.trajectories for s in steps) / n
    tokens = {
        name: sum(getattr(s.tokens, name) for s in steps) / n
        for name in ("prompt", "generated", "inserted", "prefilled", "turns")
    }
    tokens["sequence"] = sum(s.tokens.sequence for s in steps) / n
    return {
        "steps": n,
        "wall_s": wall,
        "parts_s": parts,
        "tokens": tokens,
        "samples_per_step": samples,
        "samples_per_minute": 60.0 * samples / wall,
    }
