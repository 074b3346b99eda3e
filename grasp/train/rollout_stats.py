"""What a training rollout did, in the forms the run keeps: statistics and records.

- ``rollout_metrics``: a step's rollout statistics (answer metrics, reward terms, tool calls,
  parse and repair rates, stop reasons, zero-spread groups), keyed area/name as in
  metrics.jsonl. A tool's well-formed calls per episode (``tools/<name>_per_episode``) are
  split into those that ran (``ran/<name>_per_episode``) and those the environment refused
  (``refused/<name>_per_episode``: a read of a hit never shown, say); ``grasp.train.trl_bridge.GraspRollout`` logs them through TRL.
- ``RolloutReport``: the trajectories of one rollout call and those statistics, returned to
  TRL beside the token fields (``REPORT_KEY``), where tests and callbacks read them.
- ``RolloutRecord``: one line of ``rollouts/process-<i>.jsonl`` per call and process, so that
  a run of several processes shows which process rolled out which questions.
- ``trained_trace``: the token trace TRL trains on (an empty completion padded with one
  masked id).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from grasp.env.tools import tool_names
from grasp.eval.summary import count_events
from grasp.rollout.chat import TokenTrace
from grasp.rollout.trajectory import Trajectory
from grasp.types import StopReason

REPORT_KEY = "grasp_rollout"
"""Key of the ``RolloutReport`` in the rollout's output."""

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
    for name in tool_names():
        metrics[f"tools/{name}_per_episode"] = counts.tool_calls[name] / n
        metrics[f"ran/{name}_per_episode"] = counts.ran(name) / n
        metrics[f"refused/{name}_per_episode"] = counts.refused_calls[name] / n
    for reason in StopReason:
        metrics[f"stop/{reason.value}"] = counts.stops[reason] / n
    return metrics
