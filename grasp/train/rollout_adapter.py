"""The bridge between TRL's GRPOTrainer and our rollout engine and reward.

``GraspRollout`` is the ``rollout_func`` TRL calls each generation step. TRL hands it the
prompts of the step, each repeated G times in a row; it finds each group's question, runs
the rollout engine once for the whole batch (B questions x G samples), and returns the
token ids, the env mask (tool results carry no loss) and per-sample extra fields. An episode
that generated nothing (its first turn failed) reaches TRL with one masked id
(``trained_trace``): the failed batch trains nothing that step, and the run goes on.

The reward reaches TRL as five reward functions, one per term, weighted [1, alpha, beta,
gamma, delta] (``reward_weights``): TRL's weighted sum is exactly ``compute_reward(...).total``.
What the rollout did (``RolloutReport``: answer metrics, tool calls, stop reasons, reward terms,
seconds) travels to TRL in the rollout's output, beside the trajectories' rewards, and one
zero-weight function, ``log_rollout``, logs it through TRL's ``log_metric`` (averaged over the
processes like TRL's own metrics); the reward functions only compute rewards.

Each process also appends one line per rollout to its own ``rollouts/process-<i>.jsonl``
(``RolloutRecord``): the step, and each trajectory's question and group, so that a run of
several processes shows which process rolled out which questions.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from grasp.eval.summary import count_events
from grasp.reward import REWARD_TERMS, TERM_NAMES, RewardBreakdown, RewardConfig
from grasp.rollout.chat import TokenTrace
from grasp.rollout.engine import RolloutEngine
from grasp.rollout.policy import Policy
from grasp.rollout.trajectory import Trajectory
from grasp.train.dynamic_sampling import DynamicSamplingSettings, replacement_ids, select_groups
from grasp.train.metrics_log import drop_records_after
from grasp.types import Question, StopReason, ToolName

QUESTION_ID_KEY = "question_id"
"""Key of the user message (in the training dataset's prompts) that names the question."""

REPORT_KEY = "grasp_rollout"
"""Key of the ``RolloutReport`` in the rollout's output (TRL hands it to ``log_rollout``)."""

ROLLOUT_SECONDS_KEY = "time/rollout_s"
"""Wall-clock seconds of one rollout call (resampling included), as logged."""


@dataclass
class RolloutReport:
    """What one call of the rollout did: the trajectories it returned and their statistics."""

    trajectories: list[Trajectory]
    """The B x G trajectories TRL trains on, in TRL's order (after dynamic sampling)."""
    metrics: dict[str, float] = field(default_factory=dict)
    """``rollout_metrics``, the sampling metrics and the rollout's seconds, keyed area/name."""


@dataclass
class RolloutRecord:
    """One line of ``rollouts/process-<i>.jsonl``: what one process rolled out in one call."""

    step: int
    """The optimizer step the rollout feeds (1-based, as in metrics.jsonl)."""
    process_index: int
    """The process that played it (accelerate's ``process_index``)."""
    training: bool
    """A training rollout (False: TRL's evaluation)."""
    question_ids: list[str]
    """Each trajectory's question, in TRL's order (a group's G samples in a row)."""
    group_ids: list[int]
    """Each trajectory's group."""

    @classmethod
    def of(
        cls, trajectories: Sequence[Trajectory], step: int, process_index: int, training: bool
    ) -> RolloutRecord:
        question_ids = [t.question_id for t in trajectories]
        group_ids = [t.group_id for t in trajectories]
        return cls(step, process_index, training, question_ids, group_ids)


ROLLOUTS_DIR = "rollouts"
"""In the run directory: one ``process-<i>.jsonl`` of ``RolloutRecord`` lines per process."""


def prompt_messages(question: Question, env_messages: list[dict]) -> list[dict]:
    """The dataset prompt of a question: the environment's first messages, tagged with the id."""
    messages = [dict(m) for m in env_messages]
    messages[-1][QUESTION_ID_KEY] = question.question_id
    return messages


class GraspRollout:
    """TRL ``rollout_func``: prompts in, our engine's trajectories out, as TRL's fields."""

    def __init__(
        self,
        engine: RolloutEngine,
        questions: Mapping[str, Question],
        policy_for: Callable[[Any], Policy],
        return_logprobs: bool = False,
        dynamic_sampling: DynamicSamplingSettings | None = None,
        records_dir: Path | None = None,
    ) -> None:
        if engine.chat is None:
            raise ValueError(
                "training needs token bookkeeping: build the engine with a chat tokenizer"
            )
        self.engine = engine
        self.questions = questions
        self.policy_for = policy_for
        """The policy of a call, from the trainer: its current weights (or its vLLM engine)."""
        self.return_logprobs = return_logprobs
        self.dynamic_sampling = dynamic_sampling or DynamicSamplingSettings()
        self.records_dir = records_dir
        """Where each process appends its ``RolloutRecord`` lines (None: nowhere)."""
        self._records_opened = False

    def __call__(self, prompts: Sequence[list[dict]], trainer: Any) -> dict[str, Any]:
        group = trainer.num_generations if trainer.model.training else trainer.num_generations_eval
        ids = [self._question_id(p) for p in prompts]
        if len(ids) % group:
            raise ValueError(f"{len(ids)} prompts do not split into groups of {group}")
        heads = ids[::group]
        for start, head in zip(range(0, len(ids), group), heads, strict=True):
            if any(i != head for i in ids[start : start + group]):
                raise ValueError("each group of G prompts must be one question repeated")
        policy = self.policy_for(trainer)
        started = time.perf_counter()
        batch = self.engine.run(
            [self.questions[i] for i in heads],
            group_size=group,
            seed=self._step_seed(trainer, 0),
            policy=policy,
        )
        generation, environment = batch.timings.generation, batch.timings.environment
        trajectories = batch.scored(self.engine.config.reward)
        sampling: dict[str, float] = {}
        if self.dynamic_sampling.enabled and trainer.model.training:
            trajectories, sampling, extra = self._resample(
                trajectories, group, heads, trainer, policy
            )
            generation += extra[0]
            environment += extra[1]
        metrics = rollout_metrics(trajectories, group)
        metrics.update(sampling)
        metrics["time/rollout_generation_s"] = generation
        metrics["time/rollout_environment_s"] = environment
        metrics[ROLLOUT_SECONDS_KEY] = time.perf_counter() - started
        if self.records_dir is not None:
            self._record(trajectories, trainer)
        assert self.engine.chat is not None
        traces = [trained_trace(t.tokens, self.engine.chat.end_of_turn_id) for t in trajectories]
        logprobs = None
        if self.return_logprobs and all(trace.has_logprobs for trace in traces):
            logprobs = [trace.logprobs for trace in traces]
        return {
            "prompt_ids": [trace.prompt_ids for trace in traces],
            "completion_ids": [trace.completion_ids for trace in traces],
            "logprobs": logprobs,
            "env_mask": [trace.env_mask for trace in traces],
            "grasp_reward": [t.reward for t in trajectories],
            "group_id": [t.group_id for t in trajectories],
            "episode_id": [t.episode_id for t in trajectories],
            # Not a list: TRL hands the same report to every sample's reward kwargs.
            REPORT_KEY: RolloutReport(trajectories, metrics),
        }

    def _resample(
        self,
        trajectories: list[Trajectory],
        group: int,
        heads: list[str],
        trainer: Any,
        policy: Policy,
    ) -> tuple[list[Trajectory], dict[str, float], tuple[float, float]]:
        """Replace zero-spread groups with groups of fresh questions (grasp/train/dynamic_sampling.py).

        Returns the kept trajectories (B groups, renumbered 0..B-1), the step's sampling
        metrics, and the extra (generation, environment) seconds."""
        needed = len(heads)
        groups = [trajectories[i : i + group] for i in range(0, len(trajectories), group)]
        seen = set(heads)
        extra_generation = extra_environment = 0.0
        rounds = 0
        step = trainer.state.global_step
        for rounds in range(1, self.dynamic_sampling.max_rounds + 1):
            totals = [[t.reward.total for t in g] for g in groups]
            missing = needed - select_groups(totals, needed).with_spread
            if missing == 0:
                rounds -= 1
                break
            ids = replacement_ids(
                list(self.questions), seen, missing, trainer.args.seed, step, rounds
            )
            if not ids:  # every training question was rolled out this step
                rounds -= 1
                break
            seen.update(ids)
            batch = self.engine.run(
                [self.questions[i] for i in ids],
                group_size=group,
                seed=self._step_seed(trainer, rounds),
                policy=policy,
            )
            extra_generation += batch.timings.generation
            extra_environment += batch.timings.environment
            fresh = batch.scored(self.engine.config.reward)
            groups += [fresh[i : i + group] for i in range(0, len(fresh), group)]
        totals = [[t.reward.total for t in g] for g in groups]
        selection = select_groups(totals, needed)
        kept = [
            replace(t, group_id=number)
            for number, index in enumerate(selection.kept)
            for t in groups[index]
        ]
        metrics = {
            "sampling/groups_rolled_out": float(len(groups)),
            "sampling/dropped_group_share": 1.0 - needed / len(groups),
            "sampling/extra_rollouts": float((len(groups) - needed) * group),
            "sampling/rounds": float(rounds),
            "sampling/kept_zero_spread_share": 1.0 - selection.with_spread / needed,
        }
        return kept, metrics, (extra_generation, extra_environment)

    def _record(self, trajectories: Sequence[Trajectory], trainer: Any) -> None:
        """Append this call's ``RolloutRecord`` to this process's file. A resumed run first drops
        the records of the steps after its checkpoint (played again), as metrics.jsonl does."""
        assert self.records_dir is not None
        index = int(trainer.accelerator.process_index)
        step = int(trainer.state.global_step) + 1
        path = self.records_dir / f"process-{index}.jsonl"
        if not self._records_opened:
            self.records_dir.mkdir(parents=True, exist_ok=True)
            drop_records_after(path, step - 1)
            self._records_opened = True
        record = RolloutRecord.of(trajectories, step, index, bool(trainer.model.training))
        with path.open("a") as handle:
            handle.write(json.dumps(asdict(record)) + "\n")

    def _step_seed(self, trainer: Any, round_: int) -> int:
        """A sampling seed per step and rollout round: the same stream every step would
        correlate the samples of successive steps (a resumed run draws the same seeds)."""
        base = self.engine.config.sampling.seed
        return base + 100_003 * trainer.state.global_step + 1_009 * round_

    def _question_id(self, prompt: Sequence[dict]) -> str:
        for message in reversed(prompt):
            if QUESTION_ID_KEY in message:
                return str(message[QUESTION_ID_KEY])
        raise ValueError(
            "a training prompt carries no question id (build prompts with prompt_messages)"
        )


def trained_trace(trace: TokenTrace | None, end_of_turn_id: int) -> TokenTrace:
    """The trace TRL gets: an episode that generated nothing (its first turn failed) gets one
    masked end-of-turn id as its completion.

    TRL reads the last id of every completion (``ids[-1]``, for its clipped-ratio metric), so
    an empty one raises IndexError and ends the run. With the placeholder (env mask 0, no
    loss) a failed batch trains nothing that step instead."""
    if trace is None:
        raise ValueError("training needs token bookkeeping: a trajectory came without tokens")
    if trace.completion_ids:
        return trace
    padded = replace(trace, completion_ids=[], env_mask=[], logprobs=[])
    padded.add_inserted([end_of_turn_id])
    return padded


def rollout_metrics(trajectories: Sequence[Trajectory], group: int) -> dict[str, float]:
    """Per-step rollout statistics, keyed area/name."""
    n = len(trajectories)
    counts = count_events(trajectories)
    turns = counts.turns
    totals = [t.reward.total for t in trajectories]
    groups = [totals[i : i + group] for i in range(0, n, group)]
    flat = sum(1 for g in groups if max(g) - min(g) < 1e-9)
    metrics = {
        "answer/em": statistics.fmean(t.reward.em for t in trajectories),
        "answer/f1": statistics.fmean(t.reward.f1 for t in trajectories),
        "episode/turns": turns / n,
        "episode/generated_tokens": statistics.fmean(t.generated_tokens for t in trajectories),
        "episode/completion_tokens": statistics.fmean(t.completion_tokens for t in trajectories),
        "tools/parse_error_rate": counts.parse_errors / max(turns, 1),
        "tools/invalid_call_rate": counts.invalid_calls / max(turns, 1),
        "tools/repaired_call_rate": counts.repaired / max(turns, 1),
        "groups/zero_reward_spread": flat / max(len(groups), 1),
    }
    rewards = [t.reward.as_dict() for t in trajectories]  # logging is where keys are made
    for key in rewards[0]:
        if key.startswith("reward/"):
            metrics[key] = statistics.fmean(r[key] for r in rewards)
    for tool in ToolName:
        metrics[f"tools/{tool.value}_per_episode"] = counts.tool_calls[tool] / n
    for reason in StopReason:
        metrics[f"stop/{reason.value}"] = counts.stops[reason] / n
    return metrics


LOG_FUNCTION = "rollout_log"
"""Name of the zero-weight function that logs the rollout's statistics (``log_rollout``)."""


def reward_weights(config: RewardConfig) -> list[float]:
    """TRL's weight of each function of ``reward_functions``: each term's weight in
    ``config`` (``grasp.reward.REWARD_TERMS``: 1, alpha, beta, ...), then 0 for
    ``log_rollout``."""
    return [*(term.weight_of(config) for term in REWARD_TERMS), 0.0]


def reward_functions() -> list[Callable[..., list[float | None]]]:
    """One TRL reward function per term, then ``log_rollout`` (weight 0)."""

    def term(name: str) -> Callable[..., list[float | None]]:

        def reward(
            prompts, completions, grasp_reward: list[RewardBreakdown], **kwargs
        ) -> list[float | None]:
            return [float(r[name]) for r in grasp_reward]

        reward.__name__ = name
        return reward

    return [*(term(name) for name in TERM_NAMES), log_rollout]


def log_rollout(prompts, completions, log_metric=None, **kwargs) -> list[float | None]:
    """Log the rollout's statistics (``RolloutReport.metrics``) through TRL's ``log_metric``;
    pays nothing (None for every sample: TRL leaves it out of the rewards' sum)."""
    reports = kwargs.get(REPORT_KEY)
    if reports and log_metric is not None:
        for metric, value in reports[0].metrics.items():
            log_metric(metric, value)
    return [None] * len(prompts)


log_rollout.__name__ = LOG_FUNCTION
