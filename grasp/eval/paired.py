"""Paired differences between two evaluations of the same questions.

Two rows of the baseline table evaluated on the same dev questions can be compared question
by question: for each question, the difference of a metric between row A and row B, and
the 95% percentile-bootstrap interval of the mean difference, resampling questions (the
paired bootstrap). An interval that excludes 0 says that A and B differ on these questions;
two unpaired intervals that overlap do not say the opposite. This is how the table separates
what GRPO added to a policy from what its warm start gave it::

    a = read_trajectories(sweep / "cpu_grasp" / "hotpotqa")
    b = read_trajectories(sweep / "cpu_grasp_warm_start" / "hotpotqa")
    paired_differences(a, b)["em"].difference   # Interval(mean, low, high, n)

Per question, a metric is the mean over that question's episodes (one under greedy
evaluation), computed as the evaluation's own summary computes it (``metric_values``), so
that each side's mean equals the table's on the same questions. The table pairs EM, F1 and
recall (``PAIRED_METRICS``); any of ``COMPARABLE_METRICS`` (answer containment, read recall,
reads that ran, answer in evidence, the reward under the policy's own reward and each of its
terms) pairs the
same way, as a run's dev learning curve compares two steps::

    compare_folders(run / "dev_curve/step_000050", run / "dev_curve/step_000000",
                    metrics=COMPARABLE_METRICS)

Comparing at equal settings favours whoever reads more. ``compare_at_matched_context`` pairs
an evaluation against a baseline swept over its depth k (scripts/k_sweep.py) at the depth
whose context tokens per episode are the least at or above the evaluation's own: recall at
matched context (the baseline table's ``matched_context`` section)::

    compare_at_matched_context(Path("results/baselines/hf/cpu_grasp_v2"),
                               Path("results/baselines/k_sweep_hybrid"), "single_step_hybrid",
                               count)
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grasp.eval.context import (
    TokenCounter,
    answer_in_evidence,
    context_tokens,
    has_trajectories,
    read_trajectories,
)
from grasp.eval.results import Interval
from grasp.eval.summary import metric_values
from grasp.metrics import bootstrap_ci
from grasp.reward import TERM_NAMES
from grasp.rollout.trajectory import Trajectory

PAIRED_METRICS = ("em", "f1", "recall")
"""The baseline table's paired metrics: answer EM and F1, and paragraph recall over the whole
trajectory."""
SUMMARY_METRICS = (*PAIRED_METRICS, "containment", "read_recall", "reads_run_per_episode")
"""Per-episode metrics of the evaluation summary (``metric_values``) that every episode has."""
REWARD_METRICS = ("reward/total", *(f"reward/{name}" for name in TERM_NAMES))
"""The reward each trajectory recorded (the policy's own reward) and each of its terms."""
EVIDENCE_METRICS = ("answer_in_evidence",)
"""Per-episode metrics of what the tools showed (grasp/eval/context.py); NaN where undefined
(a yes/no question), and then left out of the pairing."""
COMPARABLE_METRICS = (*SUMMARY_METRICS, *EVIDENCE_METRICS, *REWARD_METRICS)
"""Every metric ``paired_differences`` can pair."""


def check_metrics(metrics: Sequence[str]) -> None:
    """Refuse a metric ``paired_differences`` cannot pair, naming the ones it can."""
    unknown = [m for m in metrics if m not in COMPARABLE_METRICS]
    if unknown or not metrics:
        raise ValueError(
            f"metrics: {unknown or 'none named'}; choose among {', '.join(COMPARABLE_METRICS)}"
        )


QuestionKey = tuple[str, str]
"""(dataset, question id): a question, whatever the episode ids of the two runs."""


@dataclass(frozen=True)
class PairedDifference:
    """A minus B on one metric, over the questions both evaluated."""

    metric: str
    mean_a: float
    mean_b: float
    difference: Interval
    """Mean of the per-question differences, its paired-bootstrap 95% interval and n."""
    a_higher: int
    """Questions on which A scores higher than B."""
    b_higher: int
    """Questions on which B scores higher than A."""

    def as_json(self) -> dict[str, Any]:
        d = self.difference
        return {
            "metric": self.metric,
            "mean_a": self.mean_a,
            "mean_b": self.mean_b,
            "difference": d.mean,
            "ci": [d.low, d.high],
            "questions": d.n,
            "a_higher": self.a_higher,
            "b_higher": self.b_higher,
        }


def question_values(
    trajectories: Sequence[Trajectory], metrics: Sequence[str] = PAIRED_METRICS
) -> dict[QuestionKey, dict[str, float]]:
    """Each question's value of every metric of ``metrics``: the mean over its episodes."""
    check_metrics(metrics)
    values = metric_values(trajectories)
    values["answer_in_evidence"] = [answer_in_evidence(t) for t in trajectories]
    for name in REWARD_METRICS:
        term = name.removeprefix("reward/")
        values[name] = [t.reward.total if term == "total" else t.reward[term] for t in trajectories]
    sums: dict[QuestionKey, dict[str, float]] = defaultdict(lambda: dict.fromkeys(metrics, 0.0))
    counts: dict[QuestionKey, int] = defaultdict(int)
    for i, t in enumerate(trajectories):
        key = (str(t.dataset), t.question_id)
        counts[key] += 1
        for metric in metrics:
            sums[key][metric] += values[metric][i]
    return {
        key: {metric: total / counts[key] for metric, total in by_metric.items()}
        for key, by_metric in sums.items()
    }


def paired_differences(
    a: Sequence[Trajectory],
    b: Sequence[Trajectory],
    seed: int = 0,
    metrics: Sequence[str] = PAIRED_METRICS,
) -> dict[str, PairedDifference]:
    """A minus B per metric of ``metrics``, over the questions both evaluated (and, for a
    metric undefined on some questions, NaN there, over those it is defined on).

    Raises:
        ValueError: if A and B have no question in common (there is nothing to pair).
    """
    values_a, values_b = question_values(a, metrics), question_values(b, metrics)
    common = sorted(values_a.keys() & values_b.keys())
    if not common:
        raise ValueError("the two evaluations have no question in common")
    differences = {}
    for metric in metrics:
        pairs = [(values_a[k][metric], values_b[k][metric]) for k in common]
        pairs = [(x, y) for x, y in pairs if not (math.isnan(x) or math.isnan(y))]
        if not pairs:
            raise ValueError(f"{metric} is undefined on every question the two share")
        interval = bootstrap_ci([x - y for x, y in pairs], seed=seed)
        differences[metric] = PairedDifference(
            metric=metric,
            mean_a=sum(x for x, _ in pairs) / len(pairs),
            mean_b=sum(y for _, y in pairs) / len(pairs),
            difference=Interval(interval.mean, interval.low, interval.high, interval.n),
            a_higher=sum(x > y for x, y in pairs),
            b_higher=sum(y > x for x, y in pairs),
        )
    return differences


@dataclass(frozen=True)
class PairedComparison:
    """Evaluation folder A minus folder B, per dataset both hold and pooled over them."""

    a: str
    b: str
    datasets: dict[str, dict[str, PairedDifference]]
    pooled: dict[str, PairedDifference]

    def as_json(self) -> dict[str, Any]:
        def part(compared: dict[str, PairedDifference]) -> dict[str, Any]:
            return {metric: d.as_json() for metric, d in compared.items()}

        return {
            "a": self.a,
            "b": self.b,
            "datasets": {name: part(compared) for name, compared in self.datasets.items()},
            "pooled": part(self.pooled),
        }

    def markdown(self) -> str:
        """A row per part (each dataset, then pooled) and metric: questions, each side's mean,
        A − B with its interval, and on how many questions each side scores higher."""
        header = ["part", "metric", "questions", "A", "B", "A − B [95%]", "higher: A / B"]
        cells = []
        for name, compared in [*self.datasets.items(), ("pooled", self.pooled)]:
            for metric, d in compared.items():
                cells.append(
                    [
                        name,
                        metric,
                        str(d.difference.n),
                        f"{d.mean_a:.3f}",
                        f"{d.mean_b:.3f}",
                        signed(d.as_json()),
                        f"{d.a_higher} / {d.b_higher}",
                    ]
                )
        lines = [f"A: {self.a}", f"B: {self.b}", ""]
        lines += ["| " + " | ".join(header) + " |", "|---" * len(header) + "|"]
        lines += ["| " + " | ".join(row) + " |" for row in cells]
        return "\n".join(lines) + "\n"


def signed(cell: dict[str, Any]) -> str:
    """``+0.040 [+0.012, +0.069]``: a difference and its interval, as ``as_json`` holds them."""
    low, high = cell["ci"]
    return f"{cell['difference']:+.3f} [{low:+.3f}, {high:+.3f}]"


def compare_folders(
    a: Path,
    b: Path,
    datasets: Sequence[str] | None = None,
    metrics: Sequence[str] = PAIRED_METRICS,
) -> PairedComparison:
    """Folder A minus folder B, two evaluations' output folders (``<dataset>/trajectories.jsonl``
    each), on ``metrics``: on ``datasets``, or every dataset both hold. An evaluation still running can be
    compared: its folder is read, not changed, on the questions it has done so far.

    Raises:
        ValueError: if a named dataset is missing from either folder, or none is shared, or
            a metric is not one of ``COMPARABLE_METRICS``.
    """
    check_metrics(metrics)

    def held(folder: Path) -> set[str]:
        return {p.name for p in folder.glob("*") if p.is_dir() and has_trajectories(p)}

    if datasets is None:
        datasets = sorted(held(a) & held(b))
        if not datasets:
            raise ValueError(f"{a} and {b} hold no dataset's trajectories in common")
    for folder in (a, b):
        missing = [d for d in datasets if d not in held(folder)]
        if missing:
            raise ValueError(f"{folder}: no trajectories of {missing}")
    sides = [{d: read_trajectories(folder / d) for d in datasets} for folder in (a, b)]
    per_dataset = {
        d: paired_differences(sides[0][d], sides[1][d], metrics=metrics) for d in datasets
    }
    pooled = paired_differences(
        *([t for d in datasets for t in side[d]] for side in sides), metrics=metrics
    )
    return PairedComparison(str(a), str(b), per_dataset, pooled)


# --------------------------------------------------------------------------- matched context


@dataclass(frozen=True)
class ContextPoint:
    """One depth of a baseline swept over k: its evaluation folder and what it cost."""

    k: int
    folder: Path
    context_tokens: float
    """Observation tokens per episode, pooled over the compared datasets."""

    def as_json(self) -> dict[str, Any]:
        return {"k": self.k, "folder": str(self.folder), "context_tokens": self.context_tokens}


def pooled_context(folder: Path, datasets: Sequence[str], count: TokenCounter) -> float:
    """Mean observation tokens per episode of ``folder``'s datasets, pooled."""
    trajectories = [t for d in datasets for t in read_trajectories(folder / d)]
    if not trajectories:
        raise ValueError(f"{folder}: no trajectories of {list(datasets)}")
    return context_tokens(trajectories, count).mean


def sweep_points(
    root: Path, baseline: str, datasets: Sequence[str], count: TokenCounter
) -> list[ContextPoint]:
    """Each depth of a k sweep (``root``/k<K>/``baseline``, scripts/k_sweep.py) that holds
    every one of ``datasets``, by k."""
    points = []
    for folder in root.glob(f"k*/{baseline}"):
        k = folder.parent.name.removeprefix("k")
        if k.isdigit() and all(has_trajectories(folder / d) for d in datasets):
            points.append(ContextPoint(int(k), folder, pooled_context(folder, datasets, count)))
    if not points:
        raise ValueError(f"{root}: no k<K>/{baseline} folder holds {list(datasets)}")
    return sorted(points, key=lambda p: p.k)


def matched_point(points: Sequence[ContextPoint], context: float) -> ContextPoint:
    """The point with the least context at or above ``context`` (so that B shows A at least as
    much text); the largest when every point shows less."""
    above = [p for p in points if p.context_tokens >= context]
    if above:
        return min(above, key=lambda p: p.context_tokens)
    return max(points, key=lambda p: p.context_tokens)


@dataclass(frozen=True)
class MatchedComparison:
    """Evaluation A minus a swept baseline at the depth whose context matches A's."""

    a_context: float
    point: ContextPoint
    points: list[ContextPoint]
    comparison: PairedComparison

    @property
    def at_or_above(self) -> bool:
        """Whether B's context is at least A's (else A showed more than every depth)."""
        return self.point.context_tokens >= self.a_context

    def as_json(self) -> dict[str, Any]:
        return {
            "a_context_tokens": self.a_context,
            "b_k": self.point.k,
            "b_context_tokens": self.point.context_tokens,
            "b_at_or_above": self.at_or_above,
            "points": [p.as_json() for p in self.points],
            **self.comparison.as_json(),
        }

    def markdown(self) -> str:
        curve = ", ".join(f"k={p.k}: {p.context_tokens:.0f}" for p in self.points)
        where = "the least at or above A's" if self.at_or_above else "A shows more than any k"
        lines = [
            f"Context tokens per episode: A {self.a_context:.0f}; B by depth {curve}.",
            f"B at k={self.point.k} ({self.point.context_tokens:.0f}: {where}).",
            "",
        ]
        return "\n".join(lines) + self.comparison.markdown()


def compare_at_matched_context(
    a: Path,
    root: Path,
    baseline: str,
    count: TokenCounter,
    datasets: Sequence[str] | None = None,
    metrics: Sequence[str] = PAIRED_METRICS,
) -> MatchedComparison:
    """Folder A minus ``baseline`` of the k sweep in ``root`` at the depth with the least
    context at or above A's (``matched_point``), on ``metrics``: recall at matched context,
    where comparing at equal settings favours whoever reads more."""
    if datasets is None:
        held = {p.name for p in a.glob("*") if p.is_dir() and has_trajectories(p)}
        datasets = sorted(held)
        if not datasets:
            raise ValueError(f"{a} holds no dataset's trajectories")
    points = sweep_points(root, baseline, datasets, count)
    a_context = pooled_context(a, datasets, count)
    point = matched_point(points, a_context)
    comparison = compare_folders(a, point.folder, datasets, metrics)
    return MatchedComparison(a_context, point, points, comparison)
