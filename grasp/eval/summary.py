"""Summaries of a set of trajectories: answer quality, retrieval recall, tool use, cost.

Recall counts gold paragraphs found anywhere in the trajectory (a hit of any search, or a
read), and separately the read paragraphs only. Means come with 95% bootstrap intervals
over questions' episodes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from grasp.metrics import all_gold_found, bootstrap_ci, paragraph_recall
from grasp.rollout.trajectory import Trajectory


@dataclass
class EventCounts:
    """Totals over a set of trajectories."""

    tool_calls: Counter
    """Valid calls by tool name."""
    errors: Counter
    """Refused turns by parse-error kind (and "invalid_call")."""
    stops: Counter
    """Episodes by stop reason."""
    turns: int

    @property
    def parse_errors(self) -> int:
        return sum(v for k, v in self.errors.items() if k != "invalid_call")


def count_events(trajectories: Sequence[Trajectory]) -> EventCounts:
    counts = EventCounts(Counter(), Counter(), Counter(), 0)
    for t in trajectories:
        counts.tool_calls.update(t.tool_calls)
        counts.errors.update(t.errors)
        counts.stops[t.stop_reason] += 1
        counts.turns += t.turns_used
    return counts


def _mean_ci(values: Sequence[float]) -> dict[str, float]:
    interval = bootstrap_ci(list(values))
    return {"mean": interval.mean, "low": interval.low, "high": interval.high}


def summarize(trajectories: Sequence[Trajectory]) -> dict[str, Any]:
    """Aggregate metrics of ``trajectories``; the first keys are em, f1 and recall (means)."""
    n = len(trajectories)
    if n == 0:
        raise ValueError("no trajectories to summarize")
    em = [t.reward["answer/em"] for t in trajectories]
    f1 = [t.reward["answer/f1"] for t in trajectories]
    recall, complete, read_recall = [], [], []
    for t in trajectories:
        gold = set(t.gold_paragraph_ids)
        found = t.retrieved_paragraph_ids
        recall.append(paragraph_recall(found, gold))
        complete.append(all_gold_found(found, gold))
        read_recall.append(paragraph_recall(set(t.read_paragraph_ids), gold))
    counts = count_events(trajectories)
    turns = counts.turns
    reward_keys = [k for k in trajectories[0].reward if k.startswith("reward/")]
    return {
        "em": sum(em) / n,
        "f1": sum(f1) / n,
        "recall": sum(recall) / n,
        "recall_all_gold": sum(complete) / n,
        "read_recall": sum(read_recall) / n,
        "ci": {"em": _mean_ci(em), "f1": _mean_ci(f1), "recall": _mean_ci(recall)},
        "reward": {k: sum(t.reward[k] for t in trajectories) / n for k in reward_keys},
        "reward_ci": {k: _mean_ci([t.reward[k] for t in trajectories]) for k in reward_keys},
        "tool_calls_per_episode": {k: v / n for k, v in sorted(counts.tool_calls.items())},
        "parse_error_rate": counts.parse_errors / max(turns, 1),
        "invalid_call_rate": counts.errors["invalid_call"] / max(turns, 1),
        "errors": dict(sorted(counts.errors.items())),
        "stop_reasons": {k: v / n for k, v in sorted(counts.stops.items())},
        "turns_per_episode": turns / n,
        "generated_tokens_per_episode": sum(t.generated_tokens for t in trajectories) / n,
        "completion_tokens_per_episode": sum(t.completion_tokens for t in trajectories) / n,
        "prompt_tokens_per_episode": sum(t.prompt_tokens for t in trajectories) / n,
        "episodes": n,
    }
