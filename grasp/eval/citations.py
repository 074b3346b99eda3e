"""Citation precision and recall: the sentences an answer cited against the supporting facts.

With ``env.citations`` on, an answer may name the sentence ids it rests on; the trajectory
records the valid ones and counts the invalid ones (``Trajectory.citations``; what is
invalid is ``grasp.env.tools.Answer``'s to say). With C the sentence ids an episode's answer
cited and S its question's supporting sentences (``grasp.eval.supporting``)::

    precision = |C & S| / |C|      (share of the cited sentences that are supporting facts)
    recall    = |C & S| / |S|      (share of the supporting facts cited)

Both are averaged over the episodes that cited at least one valid sentence and whose question
has sentence-level facts (``scored_episodes``); the share of answers that cited is over every
episode whose answer could cite (``answers``: those that recorded citations). Invalid
citations are not in C: they are reported on their own, per answer. Without any recorded
citation (the option off, or an evaluation written before it existed) there is no summary
at all, rather than zeros; without a scored episode, no precision or recall.

    section = citation_summary(trajectories, supporting)   # None: no citations recorded
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any, TypedDict

from grasp.rollout.trajectory import Trajectory


@dataclass(frozen=True)
class CitationScores:
    """Citation precision and recall of one answer."""

    precision: float
    recall: float


def citation_scores(cited: AbstractSet[int], supporting: AbstractSet[int]) -> CitationScores:
    """Precision and recall of the cited sentence ids against the supporting ones.

    Raises:
        ValueError: nothing was cited or nothing supports (neither score is defined).
    """
    if not cited or not supporting:
        raise ValueError("citation scores need cited and supporting sentences")
    right = len(cited & supporting)
    return CitationScores(precision=right / len(cited), recall=right / len(supporting))


class _CitationCounts(TypedDict):
    answers: int
    cited_share: float
    invalid: int
    invalid_per_answer: float
    scored_episodes: int


class CitationSummary(_CitationCounts, total=False):
    """The ladder's ``citations`` (``citation_summary``); the means only when an episode
    was scored."""

    precision: float
    recall: float


def citation_summary(
    trajectories: Sequence[Trajectory], supporting: Mapping[str, AbstractSet[int]]
) -> CitationSummary | None:
    """The ladder's ``citations``: answers, cited share, invalid citations, and the mean
    precision and recall over the scored episodes (module docstring); ``supporting`` maps an
    episode id to its question's supporting sentence ids (episodes without facts absent).
    None when no trajectory recorded citations."""
    answers = {t.episode_id: t.citations for t in trajectories if t.citations is not None}
    if not answers:
        return None
    citing = {episode: set(c.sentence_ids) for episode, c in answers.items() if c.sentence_ids}
    scores = [
        citation_scores(cited, supporting[episode])
        for episode, cited in citing.items()
        if supporting.get(episode)
    ]
    invalid = sum(c.invalid for c in answers.values())
    summary: CitationSummary = {
        "answers": len(answers),
        "cited_share": len(citing) / len(answers),
        "invalid": invalid,
        "invalid_per_answer": invalid / len(answers),
        "scored_episodes": len(scores),
    }
    if scores:
        summary["precision"] = sum(s.precision for s in scores) / len(scores)
        summary["recall"] = sum(s.recall for s in scores) / len(scores)
    return summary


def pool_citations(parts: Sequence[CitationSummary]) -> CitationSummary | None:
    """One ``citations`` for the episodes of several summaries: each share weighted by its
    count (answers, scored episodes), so the result is the pooled mean; None for none."""
    if not parts:
        return None
    answers = sum(p["answers"] for p in parts)
    invalid = sum(p["invalid"] for p in parts)
    scored = [p for p in parts if p["scored_episodes"]]
    pooled: CitationSummary = {
        "answers": answers,
        "cited_share": sum(p["cited_share"] * p["answers"] for p in parts) / answers,
        "invalid": invalid,
        "invalid_per_answer": invalid / answers,
        "scored_episodes": sum(p["scored_episodes"] for p in parts),
    }
    if scored:
        total = pooled["scored_episodes"]
        for key in ("precision", "recall"):
            pooled[key] = sum(p[key] * p["scored_episodes"] for p in scored) / total
    return pooled


def citation_lines(summary: Mapping[str, Any]) -> list[str]:
    """The markdown lines of a ``citations`` summary (no precision or recall line when no
    episode was scored)."""
    lines = [
        f"- answers that cited: {summary['cited_share']:.3f} ({summary['answers']} answers; "
        f"{summary['invalid_per_answer']:.2f} invalid citations per answer)",
    ]
    if "precision" in summary:
        lines.append(
            f"- citation precision: {summary['precision']:.3f}, recall: "
            f"{summary['recall']:.3f} ({summary['scored_episodes']} citing episodes with "
            "sentence-level facts)"
        )
    return lines
