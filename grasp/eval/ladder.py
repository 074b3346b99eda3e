"""The evaluation ladder: retrieval quality per search call, evidence, failures and cost.

Beside EM/F1/JD and trajectory recall, an evaluation reports how it got there:

- **Retrieval per search call**, against the question's gold paragraphs, averaged over the
  calls of each search tool (``semantic_search``, ``keyword_search``, Search-R1's ``search``).
  A call's ranking is its hit list as the trajectory recorded it (``TurnRecord.hits``, best
  first); a hit is relevant when its paragraph is gold. At sentence granularity several
  hits may name one paragraph: a gold paragraph counts once, at its first (best) hit.
  With the top ``k`` hits (all of them when ``k`` is None), ``g`` the gold paragraphs::

      recall@k    = |gold paragraphs among the top k hits| / |g|
      precision@k = |top-k hits whose paragraph is gold| / |top-k hits|     (0 for no hit)
      MRR@k       = 1 / rank of the first gold hit (1-based), 0 when none
      nDCG@k      = sum_i gain_i / log2(i + 1) over the top k, divided by the same sum
                    for min(k, |g|) gold hits at the top; gain_i = 1 when hit i names a gold
                    paragraph no earlier hit named, else 0

  Refused calls (a turn with an error) ran no search and are not calls; questions without
  gold paragraphs have no retrieval scores.
- **Evidence**: answer-in-evidence (a gold answer, normalized as EM normalizes it, occurs in
  a paragraph the episode saw in a hit or read: the upper bound for any reader) and the
  grounded-answer rate (the policy's answer occurs in a paragraph it read; over the episodes
  that answered). "Occurs" is a whole-token match of the normalized strings.
- **Citations** (``env.citations`` on only): the share of answers that cited, invalid
  citations per answer, and citation precision and recall against the supporting facts
  (``grasp.eval.citations``); absent when no episode recorded citations.
- **Failures**: the failure code of every episode (``grasp.eval.failures``), as shares.

``ladder_section`` is what an evaluation's results.json holds under ``ladder``;
``ladder_markdown`` renders it, with the cost the results already report::

    ladder = ladder_section(trajectories, corpus.paragraph_text, supporting=sentence_ids)
    results = DatasetResults(..., ladder=ladder)
    markdown += ladder_markdown("hotpotqa", results)
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any, TypedDict

from grasp.env.tools import ToolRole, has_role
from grasp.eval.citations import (
    CitationSummary,
    citation_lines,
    citation_summary,
    pool_citations,
)
from grasp.eval.failures import FailureCode, failure_shares
from grasp.eval.results import JsonRecord
from grasp.metrics import normalize_answer
from grasp.rollout.trajectory import Trajectory

ParagraphText = Callable[[int], str]
"""Paragraph id -> its text (``SentenceCorpus.paragraph_text``)."""
RANK_METRICS = ("recall", "precision", "mrr", "ndcg")


@dataclass(frozen=True)
class RankScores:
    """Retrieval quality of one search call."""

    recall: float
    precision: float
    mrr: float
    ndcg: float


@dataclass(frozen=True)
class SearchCall:
    """One search that ran: its tool and the paragraph of each hit, best first."""

    tool: str
    hit_paragraph_ids: tuple[int, ...]


def rank_scores(
    hit_paragraph_ids: Sequence[int], gold: AbstractSet[int], k: int | None = None
) -> RankScores:
    """Recall@k, precision@k, MRR@k and nDCG@k of one ranked hit list (module docstring).

    Raises:
        ValueError: ``gold`` is empty (no retrieval score is defined) or ``k`` < 1.
    """
    if not gold:
        raise ValueError("no gold paragraphs: retrieval scores are undefined")
    if k is not None and k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    top = list(hit_paragraph_ids if k is None else hit_paragraph_ids[:k])
    relevant = [pid in gold for pid in top]
    found: set[int] = set()
    dcg = 0.0
    for position, pid in enumerate(top, start=1):
        if pid in gold and pid not in found:
            found.add(pid)
            dcg += 1.0 / math.log2(position + 1)
    ideal_hits = min(len(gold), len(top) if k is None else k)
    ideal = sum(1.0 / math.log2(position + 1) for position in range(1, ideal_hits + 1))
    first = next((position for position, r in enumerate(relevant, start=1) if r), None)
    return RankScores(
        recall=len(found) / len(gold),
        precision=sum(relevant) / len(top) if top else 0.0,
        mrr=1.0 / first if first else 0.0,
        ndcg=dcg / ideal if ideal else 0.0,
    )


def search_calls(trajectory: Trajectory) -> list[SearchCall]:
    """The searches (the calls of a ``ToolRole.SEARCH`` tool, whose calls are ranked
    retrievals) that ran in the episode, in turn order (refused calls excluded)."""
    calls = []
    for turn in trajectory.turns:
        call = turn.call
        if turn.error is not None or not call or not has_role(call["name"], ToolRole.SEARCH):
            continue
        hits = tuple(int(hit["paragraph_id"]) for hit in turn.hits)
        calls.append(SearchCall(call["name"], hits))
    return calls


def retrieval_by_tool(
    trajectories: Sequence[Trajectory], k: int | None = None
) -> dict[str, dict[str, float]]:
    """Per search tool: the mean of each rank metric over its calls, ``calls`` and
    ``hits_per_call``; tools never called are absent."""
    scores: dict[str, list[RankScores]] = defaultdict(list)
    hits: dict[str, int] = defaultdict(int)
    for trajectory in trajectories:
        gold = set(trajectory.gold_paragraph_ids)
        if not gold:
            continue
        for call in search_calls(trajectory):
            scores[call.tool].append(rank_scores(call.hit_paragraph_ids, gold, k))
            hits[call.tool] += len(call.hit_paragraph_ids)
    summary = {}
    for tool in sorted(scores):
        calls = scores[tool]
        means = {m: sum(getattr(s, m) for s in calls) / len(calls) for m in RANK_METRICS}
        summary[tool] = {**means, "calls": len(calls), "hits_per_call": hits[tool] / len(calls)}
    return summary


def contains_answer(text: str, answer: str) -> bool:
    """``answer`` occurs in ``text`` as whole tokens, both normalized as EM normalizes; an
    answer that normalizes to nothing occurs nowhere."""
    needle = normalize_answer(answer)
    return bool(needle) and f" {needle} " in f" {normalize_answer(text)} "


def answer_in_evidence(trajectory: Trajectory, paragraph_text: ParagraphText) -> bool:
    """A gold answer (any alias) occurs in a paragraph the episode saw in a hit or read."""
    texts = [paragraph_text(pid) for pid in sorted(trajectory.retrieved_paragraph_ids)]
    return any(contains_answer(t, a) for t in texts for a in trajectory.gold_answers)


def grounded_answer(trajectory: Trajectory, paragraph_text: ParagraphText) -> bool | None:
    """The policy's answer occurs in a paragraph it read; None when it did not answer."""
    if trajectory.answer is None or not normalize_answer(trajectory.answer):
        return None
    answer = trajectory.answer
    return any(contains_answer(paragraph_text(p), answer) for p in trajectory.read_paragraph_ids)


class Evidence(TypedDict):
    """The ladder's ``evidence`` (``evidence_summary``)."""

    answer_in_evidence: float
    episodes: int
    grounded_answer: float
    answered_episodes: int


class _LadderRetrieval(TypedDict):
    k: int | str | None
    """The hits each call is scored on ("every hit of the call": all of them)."""
    retrieval: dict[str, dict[str, float]]
    """Per search tool (``retrieval_by_tool``)."""
    failures: dict[str, float]
    """The share of episodes of each failure code."""
    episodes: int


class LadderSection(_LadderRetrieval, total=False):
    """results.json's ``ladder`` (``ladder_section``, or ``pool_sections``)."""

    evidence: Evidence
    citations: CitationSummary


def evidence_summary(trajectories: Sequence[Trajectory], paragraph_text: ParagraphText) -> Evidence:
    """Answer-in-evidence over every episode, grounded-answer rate over the answered ones."""
    in_evidence = [answer_in_evidence(t, paragraph_text) for t in trajectories]
    grounded = [g for t in trajectories if (g := grounded_answer(t, paragraph_text)) is not None]
    return {
        "answer_in_evidence": sum(in_evidence) / len(in_evidence) if in_evidence else 0.0,
        "episodes": len(in_evidence),
        "grounded_answer": sum(grounded) / len(grounded) if grounded else 0.0,
        "answered_episodes": len(grounded),
    }


def ladder_section(
    trajectories: Sequence[Trajectory],
    paragraph_text: ParagraphText | None,
    k: int | None = None,
    supporting: Mapping[str, AbstractSet[int]] | None = None,
) -> LadderSection:
    """results.json's ``ladder``: retrieval by tool, evidence (when paragraph texts are at
    hand), failure shares, and citations (when the episodes recorded any; ``supporting``
    maps an episode id to its supporting sentence ids, for their precision and recall)."""
    section: LadderSection = {
        "k": k if k is not None else "every hit of the call",
        "retrieval": retrieval_by_tool(trajectories, k),
        "failures": failure_shares(trajectories),
        "episodes": len(trajectories),
    }
    if paragraph_text is not None:
        section["evidence"] = evidence_summary(trajectories, paragraph_text)
    citations = citation_summary(trajectories, supporting or {})
    if citations is not None:
        section["citations"] = citations
    return section


def pool_sections(sections: Sequence[LadderSection]) -> LadderSection:
    """One ``ladder`` for the episodes of several sections: each mean weighted by its count
    (calls, episodes, answered episodes), so the result is the pooled mean."""
    episodes = sum(s["episodes"] for s in sections)
    retrieval: dict[str, dict[str, float]] = {}
    for tool in sorted({t for s in sections for t in s["retrieval"]}):
        parts = [s["retrieval"][tool] for s in sections if tool in s["retrieval"]]
        calls = sum(p["calls"] for p in parts)
        pooled = {m: _weighted(parts, m, "calls") for m in (*RANK_METRICS, "hits_per_call")}
        retrieval[tool] = {**pooled, "calls": calls}
    failures = {
        code: sum(s["failures"][code] * s["episodes"] for s in sections) / max(episodes, 1)
        for code in (str(c) for c in FailureCode)
    }
    pooled_section: LadderSection = {
        "k": sections[0]["k"] if sections else None,
        "retrieval": retrieval,
        "failures": failures,
        "episodes": episodes,
    }
    evidence = [s["evidence"] for s in sections if "evidence" in s]
    if evidence and len(evidence) == len(sections):
        pooled_section["evidence"] = {
            "answer_in_evidence": _weighted(evidence, "answer_in_evidence", "episodes"),
            "episodes": sum(e["episodes"] for e in evidence),
            "grounded_answer": _weighted(evidence, "grounded_answer", "answered_episodes"),
            "answered_episodes": sum(e["answered_episodes"] for e in evidence),
        }
    citations = pool_citations([s["citations"] for s in sections if "citations" in s])
    if citations is not None:
        pooled_section["citations"] = citations
    return pooled_section


def _weighted(parts: Sequence[Mapping[str, Any]], key: str, weight: str) -> float:
    total = sum(p[weight] for p in parts)
    return sum(p[key] * p[weight] for p in parts) / total if total else 0.0


COST_KEYS = (
    ("generated_tokens_per_episode", "generated tokens / episode"),
    ("prompt_tokens_per_episode", "prompt tokens / episode"),
    ("turns_per_episode", "turns / episode"),
    ("wall_time_per_question_s", "wall s / question"),
)
"""(results key, label) of the costs an evaluation's results already report."""


def ladder_markdown(name: str, results: JsonRecord | Mapping[str, Any]) -> str:
    """The ladder of one results entry (a ``DatasetResults`` or ``PooledResults``, or its JSON
    object: its ``ladder`` and its cost keys), named ``name``, as markdown: retrieval by tool,
    evidence and citations, failure taxonomy, cost."""
    if isinstance(results, JsonRecord):
        results = results.to_json()
    ladder = results["ladder"]
    lines = ["", f"## Evaluation ladder: {name}", ""]
    lines += [f"Retrieval per search call (k: {ladder['k']}):", ""]
    rows = [
        [tool, str(v["calls"]), f"{v['hits_per_call']:.1f}", *(f"{v[m]:.3f}" for m in RANK_METRICS)]
        for tool, v in ladder["retrieval"].items()
    ]
    header = ["tool", "calls", "hits/call", "recall@k", "precision@k", "MRR@k", "nDCG@k"]
    lines += _table(header, rows) if rows else ["(no search call)"]
    evidence = ladder.get("evidence")
    if evidence is not None:
        lines += [
            "",
            f"- answer in evidence: {evidence['answer_in_evidence']:.3f} "
            f"({evidence['episodes']} episodes)",
            f"- grounded answer: {evidence['grounded_answer']:.3f} "
            f"({evidence['answered_episodes']} answered episodes)",
        ]
    citations = ladder.get("citations")
    if citations is not None:
        if evidence is None:  # the citation lines continue the evidence list, or start one
            lines.append("")
        lines += citation_lines(citations)
    lines += ["", f"Failure taxonomy ({ladder['episodes']} episodes, share of each code):", ""]
    codes = [str(c) for c in FailureCode]
    lines += _table(codes, [[f"{ladder['failures'][c]:.3f}" for c in codes]])
    lines += ["", "Cost:", ""]
    cost = [[label, _value(results.get(key))] for key, label in COST_KEYS]
    calls = results.get("tool_calls_per_episode") or {}
    cost += [[f"{tool} calls / episode", _value(v)] for tool, v in calls.items()]
    backend = (results.get("policy_extra") or {}).get("backend_calls_per_episode")
    if backend is not None:
        cost.append(["backend calls / episode", _value(backend)])
    lines += _table(["cost", "value"], cost)
    return "\n".join(lines) + "\n"


def _value(value: Any) -> str:
    if value is None:
        return "—"
    return f"{value:.2f}" if isinstance(value, int | float) else str(value)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]
