"""What a policy does, read from its trajectories: its searches and hops, its reads, where its
answers come from, and how questions with a double quote fare.

A recall or EM figure says how well a policy did, not how. ``behaviour(trajectories)`` counts,
over an evaluation's episodes (``scripts/behaviour.py`` prints and writes it for folders):

- **searches and hops**: searches that ran per episode; a *hop* is a search whose query is not
  a near-copy of the question (under ``NEAR_COPY`` of its words are the question's: a copy with
  a typo, a truncation or another case is no hop); whether a hop surfaced a gold paragraph no
  earlier search had (what R_G pays); every hop's query, with its question, for reading;
- **reads**: reads that ran per episode, and the share of them that read hit [1];
- **answers**: their source, the first of: a title the tools showed (a hit's or a read
  paragraph's), the text the tools showed, the question, none of these; answer in evidence
  (``grasp.eval.context.answer_in_evidence``);
- **quotes**: for questions with a ``"`` and for the others, the share of episodes that
  answered and the parse errors per turn.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from grasp.eval.context import answer_in_evidence
from grasp.metrics import answer_contains, normalize_answer
from grasp.rollout.trajectory import Trajectory
from grasp.types import ParseErrorKind

NEAR_COPY = 0.8
"""A query with at least this share of its words in the question copies the question."""
SEARCHES = ("semantic_search", "keyword_search")
READS = ("read_paragraph",)
_TITLE = re.compile(r"^\[\d+\] (.*?) \| ", re.MULTILINE)
_READ_TITLE = re.compile(r"^read_paragraph \[\d+\] (.*):$", re.MULTILINE)


def _words(text: str) -> list[str]:
    return normalize_answer(text).split()


def copies_question(query: str, question: str) -> bool:
    """Whether ``query`` is a near-copy of ``question`` (``NEAR_COPY`` of its words in it).

    >>> copies_question("who wrote Lulu", "Who wrote 'Lulu'?")
    True
    >>> copies_question("Alban Berg opera", "Who wrote 'Lulu'?")
    False
    """
    words, asked = _words(query), set(_words(question))
    if not words:
        return True
    return sum(w in asked for w in words) / len(words) >= NEAR_COPY


@dataclass
class Hop:
    """One search whose query is not the question's."""

    question_id: str
    question: str
    query: str
    tool: str
    new_gold: bool
    """It surfaced a gold paragraph that no earlier search of the episode had."""


@dataclass
class Behaviour:
    """``behaviour``'s counts over one set of episodes."""

    episodes: int
    searches_per_episode: float
    hop_episodes: int
    """Episodes with at least one hop."""
    hops: int
    hops_with_new_gold: int
    reads_per_episode: float
    reads_of_hit_1: int
    reads: int
    answered: int
    answer_sources: dict[str, int]
    """first of: shown_title, shown_text, question, elsewhere (answered episodes)."""
    answer_in_evidence: float
    """Mean over the questions where it is defined (not yes/no)."""
    answer_in_evidence_questions: int
    quotes: dict[str, dict[str, float]]
    """``with_quote`` / ``without``: episodes, answered share, parse errors per turn."""
    hop_queries: list[Hop] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _answer_source(t: Trajectory) -> str:
    answer = t.answer or ""
    shown = "\n".join(turn.observation for turn in t.turns if turn.observation)
    titles = {normalize_answer(x) for x in _TITLE.findall(shown) + _READ_TITLE.findall(shown)}
    titles |= {normalize_answer(re.sub(r"\s*\(.*?\)$", "", x)) for x in titles}
    if normalize_answer(answer) in titles:
        return "shown_title"
    if answer_contains(shown, [answer]):
        return "shown_text"
    if answer_contains(t.question, [answer]):
        return "question"
    return "elsewhere"


def _hops(t: Trajectory) -> list[Hop]:
    gold, seen, hops = set(t.gold_paragraph_ids), set(), []
    for turn in t.turns:
        call = turn.call or {}
        if turn.error is not None or call.get("name") not in SEARCHES:
            continue
        found = {hit["paragraph_id"] for hit in turn.hits}
        query = str(call.get("arguments", {}).get("query", ""))
        if not copies_question(query, t.question):
            new_gold = bool((found - seen) & gold)
            hops.append(Hop(t.question_id, t.question, query, call["name"], new_gold))
        seen |= found
    return hops


def _quotes(trajectories: Sequence[Trajectory]) -> dict[str, dict[str, float]]:
    parts: dict[str, dict[str, float]] = {}
    for name, keep in (("with_quote", True), ("without", False)):
        part = [t for t in trajectories if ('"' in t.question) is keep]
        turns = sum(len(t.turns) for t in part)
        parse_errors = sum(
            1 for t in part for turn in t.turns if isinstance(turn.error, ParseErrorKind)
        )
        parts[name] = {
            "episodes": len(part),
            "answered": sum(t.answer is not None for t in part) / len(part) if part else 0.0,
            "parse_errors_per_turn": parse_errors / turns if turns else 0.0,
        }
    return parts


def behaviour(trajectories: Sequence[Trajectory]) -> Behaviour:
    """What the episodes did (module docstring)."""
    if not trajectories:
        raise ValueError("no episodes to read")
    n = len(trajectories)
    hops = [hop for t in trajectories for hop in _hops(t)]
    reads = [
        turn.read
        for t in trajectories
        for turn in t.turns
        if turn.error is None and (turn.call or {}).get("name") in READS
    ]
    ran = [read for read in reads if read is not None]
    answered = [t for t in trajectories if t.answer is not None]
    evidence = [v for v in (answer_in_evidence(t) for t in trajectories) if v == v]
    searches = sum(
        1
        for t in trajectories
        for turn in t.turns
        if turn.error is None and (turn.call or {}).get("name") in SEARCHES
    )
    return Behaviour(
        episodes=n,
        searches_per_episode=searches / n,
        hop_episodes=len({hop.question_id for hop in hops}),
        hops=len(hops),
        hops_with_new_gold=sum(hop.new_gold for hop in hops),
        reads_per_episode=len(ran) / n,
        reads_of_hit_1=sum(read.get("hit") == 1 for read in ran),
        reads=len(ran),
        answered=len(answered),
        answer_sources=dict(Counter(_answer_source(t) for t in answered)),
        answer_in_evidence=sum(evidence) / len(evidence) if evidence else float("nan"),
        answer_in_evidence_questions=len(evidence),
        quotes=_quotes(trajectories),
        hop_queries=hops,
    )


def markdown(name: str, found: Behaviour, examples: int = 10) -> str:
    """One evaluation's behaviour as a few lines and its first hop queries."""
    n = found.episodes
    sources = ", ".join(f"{k} {v}" for k, v in sorted(found.answer_sources.items()))
    quoted, other = found.quotes["with_quote"], found.quotes["without"]
    lines = [
        f"## {name}",
        "",
        f"- episodes: {n}; searches per episode {found.searches_per_episode:.2f}; episodes "
        f"that hop {found.hop_episodes} ({found.hop_episodes / n:.1%}); hops "
        f"{found.hops}, of which found a new gold paragraph {found.hops_with_new_gold}",
        f"- reads that ran per episode {found.reads_per_episode:.2f}; of hit [1] "
        f"{found.reads_of_hit_1} of {found.reads}",
        f"- answered {found.answered}; answer source: {sources}",
        f"- answer in evidence {found.answer_in_evidence:.3f} "
        f"({found.answer_in_evidence_questions} questions, yes/no left out)",
        f"- questions with a quote: {quoted['episodes']:.0f} episodes, answered "
        f"{quoted['answered']:.3f}, parse errors per turn {quoted['parse_errors_per_turn']:.3f}; "
        f"the others: answered {other['answered']:.3f}, parse errors per turn "
        f"{other['parse_errors_per_turn']:.3f}",
    ]
    if found.hop_queries:
        lines += ["", "| question | hop query | new gold |", "|---|---|---|"]
        for hop in found.hop_queries[:examples]:
            question = hop.question.replace("|", "\\|")
            query = hop.query.replace("|", "\\|")
            lines.append(
                f"| {question} | {hop.tool}: {query} | {'yes' if hop.new_gold else 'no'} |"
            )
    return "\n".join(lines) + "\n"
