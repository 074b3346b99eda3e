"""What a baseline knows about its episode, read back from the conversation's messages.

A baseline is a policy: it sees only ``request.messages``, like a model would. ``EpisodeView``
recovers from them the question, the turn budget, the baseline's own earlier turns (their
tool call, free reasoning and notes) and the passages each search returned. Nothing is kept
between turns outside the messages, so a baseline can resume any conversation.

Notes are how a baseline carries its decisions from one turn to the next (Adaptive-RAG's
route, CRAG's grades): lines ``[key: value]`` in the reasoning before its tool call. They are
part of the turn's text, so every trajectory shows them.

The hit format parsed here is the one ``grasp.env.tools.format_hits`` writes; a test
round-trips it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from grasp.env.observations import HIT_TITLE, unquote
from grasp.env.parser import parse_turn
from grasp.env.tool_specs import tool_specs
from grasp.env.tools import ToolRole, has_role, tool_names

_HIT = re.compile(rf"^\d+\. \[(?:s(\d+) )?p(\d+) {HIT_TITLE}\] (.*)$", re.MULTILINE)
_BUDGET = re.compile(r"\nYou have (\d+) turns?\.\s*$")
_NOTE = re.compile(r"^\[([a-z_]+): (.*)\]$")


@dataclass(frozen=True)
class Passage:
    """One search hit as the policy saw it: a sentence, or a whole paragraph."""

    paragraph_id: int
    sentence_id: int | None
    """None for a paragraph hit."""
    title: str
    text: str
    """The hit's text as shown (already cut to env.max_observation_chars)."""
    tool: str
    """The search that returned it."""
    rank: int
    """0-based position in its result list."""

    @property
    def key(self) -> tuple[int, int | None]:
        """Identity across searches: the same sentence (or paragraph) found twice is one."""
        return (self.paragraph_id, self.sentence_id)


@dataclass
class TurnView:
    """One earlier turn of the episode: the baseline's call and what came back."""

    tool: str | None
    """The tool called, or None when the turn's text held no valid call."""
    arguments: dict[str, Any]
    thought: str
    """Free reasoning before the call, notes removed."""
    notes: dict[str, str]
    observation: str
    passages: list[Passage] = field(default_factory=list)
    """The hits of a search turn, in rank order (empty for other turns)."""


@dataclass
class EpisodeView:
    """The question, the budget and the turns so far, from one request's messages."""

    question: str
    turn_budget: int
    turns: list[TurnView]

    @property
    def turn(self) -> int:
        """Turns already taken (0 at the first turn)."""
        return len(self.turns)

    @property
    def turns_left(self) -> int:
        """Turns left including the current one (1: only the answer is still possible)."""
        return self.turn_budget - self.turn

    @property
    def notes(self) -> dict[str, str]:
        """Every note written so far; a later note overwrites an earlier one with its key."""
        merged: dict[str, str] = {}
        for turn in self.turns:
            merged.update(turn.notes)
        return merged

    @property
    def thoughts(self) -> list[str]:
        """The free reasoning of each earlier turn that had any, in order."""
        return [turn.thought for turn in self.turns if turn.thought]

    def passages(self, limit: int | None = None) -> list[Passage]:
        """Every hit so far in the order seen, duplicates once; the first ``limit`` of them."""
        return unique(p for turn in self.turns for p in turn.passages)[:limit]

    @classmethod
    def from_messages(cls, messages: Sequence[Mapping[str, Any]], turn_budget: int) -> EpisodeView:
        """Read the episode after its last user message (a demonstration comes before it).

        ``turn_budget`` is used when the user message does not state the budget.
        """
        last_user = max(
            (i for i, m in enumerate(messages) if m["role"] == "user"),
            default=None,
        )
        if last_user is None:
            raise ValueError("the conversation has no user message: no question to answer")
        user = str(messages[last_user]["content"])
        budget = _BUDGET.search(user)
        question = user[: budget.start()] if budget else user
        question = question.removeprefix("Question: ").strip()
        turns: list[TurnView] = []
        for message in messages[last_user + 1 :]:
            if message["role"] == "assistant":
                turns.append(_turn(str(message["content"])))
            elif message["role"] == "tool" and turns:
                turns[-1].observation = str(message["content"])
                if turns[-1].tool is not None:
                    turns[-1].passages = parse_hits(turns[-1].observation, turns[-1].tool)
        return cls(question, int(budget.group(1)) if budget else turn_budget, turns)


def _turn(text: str) -> TurnView:
    # Every registered tool, read at each turn: a baseline reads back whatever it called.
    parsed = parse_turn(text, tool_specs(tool_names()))
    notes: dict[str, str] = {}
    thought = []
    for line in parsed.reasoning.splitlines():
        match = _NOTE.match(line.strip())
        if match:
            notes[match.group(1)] = match.group(2)
        elif line.strip():
            thought.append(line.strip())
    call = parsed.call
    return TurnView(
        tool=call.name if call else None,
        arguments=dict(call.arguments) if call else {},
        thought=" ".join(thought),
        notes=notes,
        observation="",
    )


def parse_hits(observation: str, tool: str) -> list[Passage]:
    """The hits of one search observation (``format_hits``' numbered lines)."""
    if not has_role(tool, ToolRole.SEARCH):
        return []
    return [
        Passage(
            paragraph_id=int(paragraph_id),
            sentence_id=int(sentence_id) if sentence_id else None,
            title=unquote(title),
            text=text,
            tool=tool,
            rank=rank,
        )
        for rank, (sentence_id, paragraph_id, title, text) in enumerate(_HIT.findall(observation))
    ]


def unique(passages: Iterable[Passage]) -> list[Passage]:
    """``passages`` in order with repeats (same key) dropped."""
    seen: set[tuple[int, int | None]] = set()
    kept = []
    for passage in passages:
        if passage.key not in seen:
            seen.add(passage.key)
            kept.append(passage)
    return kept


def note_line(key: str, value: object) -> str:
    """The text of one note, as ``EpisodeView`` reads it back."""
    if not re.fullmatch(r"[a-z_]+", key):
        raise ValueError(f"note key {key!r} must be lowercase letters and underscores")
    return f"[{key}: {value}]"
