"""Summaries of a set of trajectories: answer quality, retrieval recall, tool use, cost.

Per episode: EM and F1 (official normalization, best alias), EM again split by the question's
type (``em_comparison``: HotpotQA ``comparison`` and 2WikiMultiHopQA ``comparison`` and
``bridge_comparison`` questions; ``em_other``: every other type, MuSiQue's included; only the
episodes whose question type is known, ``EpisodeScores.question_types``), answer containment
(``grasp.metrics.answer_contains``: a gold answer's tokens appear in the answer), JD (the
judge's verdict, when a judge ran), recall of gold paragraphs found anywhere in the trajectory
(a hit of any search, or a read) as a fraction and as all-gold-found, the same over read
paragraphs only, the recall of supporting sentences (questions with sentence-level facts
only), and the read_paragraph calls that ran and those that were refused (``read_calls``).
Every mean comes with a 95% bootstrap interval over episodes (``ci``).

``overall_summary`` pools the episodes of several datasets and adds the macro average (the
mean of the datasets' means) with a stratified bootstrap interval.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

from grasp.env.tools import ToolRole, has_role
from grasp.eval.judge import VERDICT_SCORES, JudgeResult, Verdict
from grasp.eval.results import (
    NO_VERDICTS,
    NOT_AVAILABLE,
    NOT_COMPUTED,
    NOT_RECORDED,
    Interval,
    MacroResults,
    Mean,
    PolicyExtra,
    Summary,
)
from grasp.metrics import (
    all_gold_found,
    answer_contains,
    bootstrap_ci,
    macro_bootstrap_ci,
    paragraph_recall,
)
from grasp.rollout.trajectory import Trajectory
from grasp.types import RefusalKind, is_parse_error

MEAN_METRICS = (
    "em",
    "f1",
    "jd",
    "em_comparison",
    "em_other",
    "containment",
    "recall",
    "recall_all_gold",
    "read_recall",
    "read_recall_all_gold",
    "supporting_sentence_recall",
    "supporting_sentence_all_found",
    "turns_per_episode",
    "reads_run_per_episode",
    "reads_refused_per_episode",
)
"""Per-episode metrics reported as means with intervals, per dataset, pooled and macro."""

TYPED_METRICS = ("em_comparison", "em_other")
"""EM over the episodes of one kind of question; "not available" when there are none."""

COMPARISON_TYPES = frozenset({"comparison", "bridge_comparison"})
"""Question types (``Question.type``) that compare two entities: HotpotQA's ``comparison``,
2WikiMultiHopQA's ``comparison`` and ``bridge_comparison``. MuSiQue's hop patterns and every
other type are "other"."""


def is_comparison(question_type: str) -> bool:
    """True for a comparison question's type (``COMPARISON_TYPES``)."""
    return question_type in COMPARISON_TYPES


def read_calls(trajectory: Trajectory) -> tuple[int, int]:
    """The episode's calls of a read tool (read_paragraph, ``ToolRole.READ``) that ran, and
    those refused (a well-formed call whose turn got an error observation: an id never shown,
    say)."""
    ran = refused = 0
    for turn in trajectory.turns:
        if turn.call and has_role(turn.call.get("name", ""), ToolRole.READ):
            if turn.error is None:
                ran += 1
            else:
                refused += 1
    return ran, refused


@dataclass
class EventCounts:
    """Totals over a set of trajectories."""

    tool_calls: Counter
    """Well-formed calls by tool name: those that ran and those the environment refused."""
    errors: Counter
    """Invalid turns by ``TurnError``: parse errors and refused calls."""
    stops: Counter
    """Episodes by stop reason."""
    turns: int
    repaired: int = 0
    """Turns whose call parsed only after a repair."""
    refused_calls: Counter = field(default_factory=Counter)
    """Well-formed calls the environment refused (an error observation), by tool name."""

    def ran(self, tool: str) -> int:
        """Calls of ``tool`` that ran: the well-formed ones less those refused."""
        return self.tool_calls[tool] - self.refused_calls[tool]

    @property
    def parse_errors(self) -> int:
        return sum(v for k, v in self.errors.items() if is_parse_error(k))

    @property
    def invalid_calls(self) -> int:
        return self.errors[RefusalKind.INVALID_CALL]


def count_events(trajectories: Sequence[Trajectory]) -> EventCounts:
    counts = EventCounts(Counter(), Counter(), Counter(), 0)
    for t in trajectories:
        counts.tool_calls.update(t.tool_calls)
        counts.errors.update(t.errors)
        counts.stops[str(t.stop_reason)] += 1
        counts.turns += t.turns_used
        counts.repaired += sum(1 for turn in t.turns if turn.repaired)
        for turn in t.turns:
            if turn.call and turn.error is not None:
                counts.refused_calls[turn.call.get("name", "")] += 1
    return counts


@dataclass
class EpisodeScores:
    """Scores that need more than the trajectory (the corpus, a judge), by episode id."""

    supporting_recall: dict[str, float] = field(default_factory=dict)
    """Fraction of supporting sentences seen; only episodes with sentence-level facts."""
    supporting_all_found: dict[str, float] = field(default_factory=dict)
    """1.0 when every supporting sentence was seen; the same episodes."""
    supporting_sentence_ids: dict[str, frozenset[int]] = field(default_factory=dict)
    """The supporting sentence ids of the same episodes' questions (citations are scored
    against them, ``grasp.eval.citations``)."""
    verdicts: dict[str, JudgeResult] | None = None
    """The judge's verdicts; None when no judge is configured."""
    question_types: dict[str, str] = field(default_factory=dict)
    """Each episode's question type (``Question.type``; trajectories do not record it): what
    splits EM into comparison and other questions. Empty: types unknown."""

    @classmethod
    def typed(cls, trajectories: Sequence[Trajectory], types: Mapping[str, str]) -> EpisodeScores:
        """Scores holding only the question types of ``trajectories``, looked up by question id
        in ``types`` (``question_types``); an episode whose question is not there has none."""
        return cls(
            question_types={
                t.episode_id: types[t.question_id] for t in trajectories if t.question_id in types
            }
        )

    @classmethod
    def merge(cls, parts: Sequence[EpisodeScores]) -> EpisodeScores:
        """One object for the episodes of several datasets (episode ids are distinct)."""
        merged = cls()
        for part in parts:
            merged.supporting_recall.update(part.supporting_recall)
            merged.supporting_all_found.update(part.supporting_all_found)
            merged.supporting_sentence_ids.update(part.supporting_sentence_ids)
            merged.question_types.update(part.question_types)
        judged = [part.verdicts for part in parts]
        if judged and all(v is not None for v in judged):
            merged.verdicts = {k: v for part in judged if part for k, v in part.items()}
        return merged


def metric_values(
    trajectories: Sequence[Trajectory], scores: EpisodeScores | None = None
) -> dict[str, list[float]]:
    """Per-episode values of each metric of ``MEAN_METRICS`` that the episodes have.

    ``jd`` is present when a judge ran (unparseable and failed verdicts are left out);
    the supporting-sentence metrics hold the episodes with sentence-level facts only;
    ``em_comparison`` and ``em_other`` the episodes whose question type is known, by kind.
    """
    scores = scores or EpisodeScores()
    values: dict[str, list[float]] = {name: [] for name in MEAN_METRICS}
    for t in trajectories:
        gold = set(t.gold_paragraph_ids)
        found = t.retrieved_paragraph_ids
        read = set(t.read_paragraph_ids)
        values["em"].append(t.reward.em)
        values["f1"].append(t.reward.f1)
        values["containment"].append(answer_contains(t.answer, t.gold_answers))
        question_type = scores.question_types.get(t.episode_id)
        if question_type is not None:
            kind = "em_comparison" if is_comparison(question_type) else "em_other"
            values[kind].append(t.reward.em)
        ran, refused = read_calls(t)
        values["reads_run_per_episode"].append(float(ran))
        values["reads_refused_per_episode"].append(float(refused))
        values["recall"].append(paragraph_recall(found, gold))
        values["recall_all_gold"].append(all_gold_found(found, gold))
        values["read_recall"].append(paragraph_recall(read, gold))
        values["read_recall_all_gold"].append(all_gold_found(read, gold))
        values["turns_per_episode"].append(float(t.turns_used))
        if t.episode_id in scores.supporting_recall:
            values["supporting_sentence_recall"].append(scores.supporting_recall[t.episode_id])
            values["supporting_sentence_all_found"].append(
                scores.supporting_all_found[t.episode_id]
            )
        if scores.verdicts is not None:
            verdict = scores.verdicts[t.episode_id].verdict
            if verdict in VERDICT_SCORES:
                values["jd"].append(VERDICT_SCORES[verdict])
    return values


def _interval(values: Sequence[float]) -> Interval:
    interval = bootstrap_ci(list(values))
    return Interval(interval.mean, interval.low, interval.high, interval.n)


def _judge_counts(trajectories: Sequence[Trajectory], scores: EpisodeScores) -> dict[str, int]:
    assert scores.verdicts is not None
    counts = Counter(str(scores.verdicts[t.episode_id].verdict) for t in trajectories)
    return {str(v): counts[str(v)] for v in Verdict}


def summarize(trajectories: Sequence[Trajectory], scores: EpisodeScores | None = None) -> Summary:
    """Aggregate metrics of ``trajectories``.

    ``jd`` is a number only when ``scores.verdicts`` holds a judge's verdicts, else
    "not computed"; the supporting-sentence recalls are "not available" when no episode has
    sentence-level facts, ``em_comparison`` and ``em_other`` when no episode's question is of
    that kind (their episode counts are None when no question type is known at all). ``ci``
    holds the interval of every numeric mean.
    """
    n = len(trajectories)
    if n == 0:
        raise ValueError("no trajectories to summarize")
    scores = scores or EpisodeScores()
    values = metric_values(trajectories, scores)
    means: dict[str, Any] = {name: sum(v) / len(v) for name, v in values.items() if v}
    if scores.verdicts is None:
        means["jd"] = NOT_COMPUTED
    elif not values["jd"]:
        means["jd"] = NO_VERDICTS
    for name in ("supporting_sentence_recall", "supporting_sentence_all_found", *TYPED_METRICS):
        means.setdefault(name, NOT_AVAILABLE)
    typed = any(t.episode_id in scores.question_types for t in trajectories)
    counts = count_events(trajectories)
    turns = counts.turns
    rewards = [t.reward.as_dict() for t in trajectories]  # results.json keys are made here
    reward_keys = [k for k in rewards[0] if k.startswith("reward/")]
    return Summary(
        **{name: means[name] for name in MEAN_METRICS if name != "turns_per_episode"},
        ci={name: _interval(v) for name, v in values.items() if v},
        judge=_judge_counts(trajectories, scores) if scores.verdicts is not None else None,
        supporting_sentence_episodes=len(values["supporting_sentence_recall"]),
        comparison_episodes=len(values["em_comparison"]) if typed else None,
        other_episodes=len(values["em_other"]) if typed else None,
        reward={k: sum(r[k] for r in rewards) / n for k in reward_keys},
        reward_ci={k: _interval([r[k] for r in rewards]) for k in reward_keys},
        tool_calls_per_episode={k: v / n for k, v in sorted(counts.tool_calls.items())},
        parse_error_rate=counts.parse_errors / max(turns, 1),
        invalid_call_rate=counts.invalid_calls / max(turns, 1),
        repaired_call_rate=counts.repaired / max(turns, 1),
        errors=dict(sorted(counts.errors.items())),
        stop_reasons={k: v / n for k, v in sorted(counts.stops.items())},
        turns_per_episode=turns / n,
        **token_means(trajectories),
        episodes=n,
        policy_extra=extra_summary(trajectories),
    )


class TokenMeans(TypedDict):
    """``Summary``'s token means and the episodes they are over (``token_means``)."""

    generated_tokens_per_episode: Mean
    completion_tokens_per_episode: Mean
    prompt_tokens_per_episode: Mean
    token_episodes: int


def token_means(trajectories: Sequence[Trajectory]) -> TokenMeans:
    """Generated, completion and prompt tokens per episode, over the episodes that counted
    them; "not recorded" when none did.

    An episode counted its tokens when it has a prompt (every token trace does): a policy
    without token ids writes 0 for all three, which is no measurement of 0 tokens.
    ``token_episodes`` says how many episodes the means are over.
    """
    counted = [t for t in trajectories if t.prompt_tokens > 0]

    def mean(key: str) -> Mean:
        return sum(getattr(t, key) for t in counted) / len(counted) if counted else NOT_RECORDED

    return {
        "generated_tokens_per_episode": mean("generated_tokens"),
        "completion_tokens_per_episode": mean("completion_tokens"),
        "prompt_tokens_per_episode": mean("prompt_tokens"),
        "token_episodes": len(counted),
    }


def extra_summary(trajectories: Sequence[Trajectory]) -> PolicyExtra:
    """What policies reported in the trajectories' ``extra`` (baselines do; agents do not).

    ``routes``: share of episodes per Adaptive-RAG route; ``backend_*``: mean backend calls
    and tokens per episode that reported them; ``context_recall``: mean recall of the gold
    paragraphs among those the backend answered from; ``trigger_rate``: share of the episodes
    that graded hits (CRAG, Self-RAG) whose rewrite trigger fired (``trigger_episodes`` of
    them). Empty when nothing was reported.
    """
    summary: PolicyExtra = {}
    routes = Counter(str(t.extra["route"]) for t in trajectories if "route" in t.extra)
    if routes:
        summary["routes"] = {k: v / len(trajectories) for k, v in sorted(routes.items())}
    for key in ("backend_calls", "backend_prompt_tokens", "backend_generated_tokens"):
        reported = [t.extra[key] for t in trajectories if key in t.extra]
        if reported:
            summary[f"{key}_per_episode"] = sum(reported) / len(reported)
    triggered = [
        bool(t.extra["rewrite_triggered"]) for t in trajectories if "rewrite_triggered" in t.extra
    ]
    if triggered:
        summary["trigger_rate"] = sum(triggered) / len(triggered)
        summary["trigger_episodes"] = len(triggered)
    context = [
        paragraph_recall(set(t.extra["context_paragraph_ids"]), set(t.gold_paragraph_ids))
        for t in trajectories
        if "context_paragraph_ids" in t.extra
    ]
    if context:
        summary["context_recall"] = sum(context) / len(context)
        summary["context_recall_episodes"] = len(context)
    return summary


def macro_summary(per_dataset: Mapping[str, dict[str, list[float]]]) -> MacroResults:
    """The mean over datasets of each dataset's mean, with a stratified bootstrap interval.

    ``per_dataset`` maps a dataset to its ``metric_values``. A metric is averaged over the
    datasets that have it (``datasets`` lists them); JD is "not computed" unless every
    dataset was judged.
    """
    means: dict[str, Interval | str] = {}
    included: dict[str, list[str]] = {}
    for name in MEAN_METRICS:
        having = [d for d, values in per_dataset.items() if values.get(name)]
        if not having:
            means[name] = NOT_AVAILABLE
            continue
        interval = macro_bootstrap_ci([per_dataset[d][name] for d in having])
        means[name] = Interval(interval.mean, interval.low, interval.high, interval.n)
        included[name] = having
    return MacroResults(means, included)


@dataclass
class OverallSummary:
    """``overall_summary``: the pooled episodes' summary and the macro mean over datasets."""

    pooled: Summary
    macro: MacroResults


def overall_summary(
    parts: Mapping[str, tuple[Sequence[Trajectory], EpisodeScores]],
) -> OverallSummary:
    """Pooled (every episode of every dataset) and macro (mean of dataset means) results."""
    trajectories = [t for part, _ in parts.values() for t in part]
    counts = Counter(t.episode_id for t in trajectories)
    repeated = sorted(episode for episode, count in counts.items() if count > 1)
    if repeated:
        raise ValueError(f"episode ids repeat across datasets, cannot pool: {repeated[:3]}")
    pooled = summarize(trajectories, EpisodeScores.merge([s for _, s in parts.values()]))
    macro = macro_summary({d: metric_values(t, s) for d, (t, s) in parts.items()})
    if pooled.jd == NOT_COMPUTED:
        macro.means["jd"] = NOT_COMPUTED
    return OverallSummary(pooled, macro)
