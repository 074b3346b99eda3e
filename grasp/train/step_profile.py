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

Inside those parts (``DETAILS``, not added to the wall time's split): a timer on each
transformers rollout policy splits generation into prefill, decode forwards, the sampled
ids' log-probabilities and the rest, turn by turn (``TurnTiming``); a hook on the model's
decoder times the trunk (embeddings, layers, final norm) of every log-probability pass, so
that a pass's remainder is its LM head, log-softmax and loss arithmetic.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, TypedDict

from grasp.train.cpu_logprobs import decoder_of
from grasp.train.trl_bridge import GRPOTrainerView, scoring_models, wrap_step_calls

PARTS = ("generation", "environment", "logprobs_no_grad", "forward", "backward", "optimizer")
"""The parts of a step, in the order they happen."""
DETAILS = (
    "generation_prefill",
    "generation_decode",
    "generation_logprob",
    "generation_other",
    "logprobs_no_grad_trunk",
    "logprobs_no_grad_head",
    "forward_trunk",
    "forward_head",
)
"""Sub-parts: generation split by the policy's timer (transformers policies only), and each
log-probability pass split into the decoder's trunk and the rest (LM head, log-softmax; in
``forward_head`` also the loss arithmetic)."""


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
class TurnTiming:
    """One generation call of a step's rollout (a turn of every running episode)."""

    rows: int
    """Episodes generating in this turn."""
    prefilled: int
    """Context ids run through the model before generating (padding included)."""
    forwards: int
    """Model forwards: the prefill, then one per decoding step."""
    seconds: dict[str, float]
    """``PartTimer``'s parts: prefill, decode, logprob, other."""


class StepTimingJson(TypedDict):
    """One step's timing as the benchmark writes it (``StepTiming.to_json``)."""

    step: int
    wall_s: float
    parts_s: dict[str, float]
    """``PARTS``, then ``other``."""
    details_s: dict[str, float]
    tokens: dict[str, int]
    """``StepTokens``'s fields, then ``sequence``."""
    turns: list[dict[str, Any]]
    """Each ``TurnTiming``'s fields."""
    peak_rss_bytes: int


class MeanTiming(TypedDict):
    """Per-part means over the timed steps (``mean_timing``)."""

    steps: int
    wall_s: float
    parts_s: dict[str, float]
    details_s: dict[str, float]
    tokens: dict[str, float]
    peak_rss_bytes: int
    samples_per_step: float
    samples_per_minute: float


@dataclass
class StepTiming:
    """Seconds of one optimizer step, by part."""

    step: int
    wall: float
    parts: dict[str, float]
    tokens: StepTokens
    details: dict[str, float] = field(default_factory=dict)
    """``DETAILS``: sub-parts of generation and of the log-probability passes."""
    turns: list[TurnTiming] = field(default_factory=list)
    """Each generation call of the step (empty for a policy without a timer)."""
    peak_rss: int = 0
    """The process's peak resident memory so far, at the step's end (bytes)."""

    @property
    def other(self) -> float:
        return self.wall - sum(self.parts.values())

    def to_json(self) -> StepTimingJson:
        return {
            "step": self.step,
            "wall_s": self.wall,
            "parts_s": {**self.parts, "other": self.other},
            "details_s": dict(self.details),
            "tokens": asdict(self.tokens) | {"sequence": self.tokens.sequence},
            "turns": [asdict(turn) for turn in self.turns],
            "peak_rss_bytes": self.peak_rss,
        }


@dataclass
class StepProfiler:
    """Collects ``StepTiming``s from a trainer it is attached to."""

    steps: list[StepTiming] = field(default_factory=list)
    last_batch: Any = None
    """The rollout batch (``grasp.rollout.engine.RolloutBatch``) of the latest step."""
    _parts: dict[str, float] = field(default_factory=dict)
    _details: dict[str, float] = field(default_factory=dict)
    _turns: list[TurnTiming] = field(default_factory=list)
    _tokens: StepTokens = field(default_factory=StepTokens)
    _started: float = 0.0
    _optimizer_started: float = 0.0
    _trunk: str | None = None
    """Where the decoder's time goes now (a ``*_trunk`` detail), None outside the passes."""

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
        for model in scoring_models(trainer):
            self._time_trunk(decoder_of(model))
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
            return self._pass(part, function, args, kwargs)

        return timed

    def _pass(
        self, part: str, function: Callable[..., Any], args: Any, kwargs: dict[str, Any]
    ) -> Any:
        """Run one timed call of ``part``; a log-probability pass also splits its trunk."""
        trunk = f"{part}_trunk" if f"{part}_trunk" in DETAILS else None
        outer, self._trunk = self._trunk, trunk or self._trunk
        before = self._details.get(trunk, 0.0) if trunk else 0.0
        started = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            seconds = time.perf_counter() - started
            self._trunk = outer
            self._add(part, seconds)
            if trunk:
                spent = self._details.get(trunk, 0.0) - before
                self._detail(f"{part}_head", seconds - spent)

    def _timed_logprobs(self, function: Callable[..., Any]) -> Callable[..., Any]:
        import torch

        def timed(*args: Any, **kwargs: Any) -> Any:
            if torch.is_grad_enabled():  # the training forward: counted inside compute_loss
                return function(*args, **kwargs)
            return self._pass("logprobs_no_grad", function, args, kwargs)

        return timed

    def _time_trunk(self, decoder: Any) -> None:
        """Hooks on ``decoder`` adding each forward's time to the current ``*_trunk`` detail
        (none during rollouts: the trunk is timed inside log-probability passes only)."""
        started: list[float] = []

        def before(*_: Any, **__: Any) -> None:
            started.append(time.perf_counter())

        def after(*_: Any, **__: Any) -> None:
            begun = started.pop() if started else None
            if self._trunk is not None and begun is not None:
                self._detail(self._trunk, time.perf_counter() - begun)

        decoder.register_forward_pre_hook(before, with_kwargs=True)
        decoder.register_forward_hook(after, with_kwargs=True)

    def _timed_rollout(self, run: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            policy = kwargs.get("policy")
            before = getattr(policy, "prefilled_tokens", 0)
            restore = self._time_turns(policy)
            try:
                batch = run(*args, **kwargs)
            finally:
                restore()
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

    def _time_turns(self, policy: Any) -> Callable[[], None]:
        """Give a transformers ``policy`` a ``PartTimer`` and record each of its generation
        calls as a ``TurnTiming``; returns what undoes it. Nothing for other policies."""
        if policy is None or not hasattr(policy, "timer") or not hasattr(policy, "generate"):
            return lambda: None
        from grasp.rollout.hf_decode import PARTS as GENERATION_PARTS
        from grasp.rollout.hf_decode import PartTimer

        timer, generate = PartTimer(), policy.generate
        policy.timer = timer

        def timed_generate(requests: Any, sampling: Any) -> Any:
            seconds, forwards = dict(timer.seconds), timer.forwards
            prefilled = policy.prefilled_tokens
            timer.start()
            try:
                return generate(requests, sampling)
            finally:
                timer.lap("other")
                spent = {p: timer.seconds[p] - seconds[p] for p in GENERATION_PARTS}
                for part, value in spent.items():
                    self._detail(f"generation_{part}", value)
                self._turns.append(
                    TurnTiming(
                        rows=len(requests),
                        prefilled=policy.prefilled_tokens - prefilled,
                        forwards=timer.forwards - forwards,
                        seconds=spent,
                    )
                )

        policy.generate = timed_generate

        def restore() -> None:
            policy.timer = None
            del policy.generate  # the instance attribute: the method shows again

        return restore

    # ------------------------------------------------------------------ step boundaries

    def _add(self, part: str, seconds: float) -> None:
        self._parts[part] = self._parts.get(part, 0.0) + seconds

    def _detail(self, name: str, seconds: float) -> None:
        self._details[name] = self._details.get(name, 0.0) + seconds

    def _begin(self) -> None:
        self._parts = dict.fromkeys(PARTS, 0.0)
        self._details = dict.fromkeys(DETAILS, 0.0)
        self._turns = []
        self._tokens = StepTokens()
        self._started = time.perf_counter()

    def _end(self, step: int) -> None:
        wall = time.perf_counter() - self._started
        self.steps.append(
            StepTiming(
                step,
                wall,
                dict(self._parts),
                self._tokens,
                dict(self._details),
                list(self._turns),
                peak_rss_bytes(),
            )
        )


def peak_rss_bytes() -> int:
    """The peak resident memory of this process so far (Linux reports KiB, macOS bytes)."""
    import resource
    import sys

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


def mean_timing(steps: list[StepTiming]) -> MeanTiming:
    """Per-part means over ``steps`` (seconds and tokens), plus samples per minute."""
    if not steps:
        raise ValueError("no step was timed")
    n = len(steps)
    parts = {part: sum(s.parts[part] for s in steps) / n for part in PARTS}
    parts["other"] = sum(s.other for s in steps) / n
    details = {name: sum(s.details.get(name, 0.0) for s in steps) / n for name in DETAILS}
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
        "details_s": details,
        "tokens": tokens,
        "peak_rss_bytes": max(s.peak_rss for s in steps),
        "samples_per_step": samples,
        "samples_per_minute": 60.0 * samples / wall,
    }
