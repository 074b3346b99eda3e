"""One episode's state: its messages, its turns, and the evidence the reward reads.

The environment moves an episode through its states; each tool adds what it found to the
episode's evidence, one set of paragraph ids per evidence kind (``Episode.evidence_ids``: D_s,
D_k, D_r, and any kind a tool records of its own), and to the ids the policy has been shown. ``TurnRecord``
is what a trajectory keeps of each turn.

Episode states: GENERATING (the policy's turn; ``reset`` starts there) -> PROCESSING_TOOLS
(the environment's turn) -> GENERATING ... -> TERMINATED with a StopReason. There is no
PENDING state: an episode exists from its reset on, and its first turn is the policy's.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

import numpy as np

from grasp.types import (
    CORE_EVIDENCE_KINDS,
    KEYWORD_EVIDENCE,
    READ_EVIDENCE,
    SEMANTIC_EVIDENCE,
    EpisodeEvidence,
    Question,
    RefusalKind,
    StopReason,
    StrEnum,
    TurnError,
)

INVALID_CALL = RefusalKind.INVALID_CALL
"""The error of a well-formed call that its tool refused (an id never shown, say)."""


@dataclass(frozen=True)
class ToolCall:
    """A validated tool call (``grasp.env.parser.parse_turn``'s result): a tool this episode
    offers, with normalized arguments. Defined here, below the parser and the tools, because
    an episode records it and both of them hand it on."""

    name: str
    """The tool's name (a shipped tool's is its ``ToolName``)."""
    arguments: dict[str, Any]
    """Only the arguments given (non-null), coerced to their JSON-schema types."""


class CallRecord(TypedDict):
    """A tool call as a turn records it and a JSON file holds it: ``ToolCall``'s fields."""

    name: str
    arguments: dict[str, Any]


class CitationsJson(TypedDict):
    """``Citations`` as a trajectory's JSON holds it."""

    sentence_ids: list[int]
    invalid: int


class EpisodeStatus(StrEnum):
    GENERATING = "generating"
    PROCESSING_TOOLS = "processing_tools"
    TERMINATED = "terminated"


@dataclass(frozen=True)
class Citations:
    """What an answer cited (``env.citations``): the sentence ids it rests on, and the
    citations that named no sentence the episode was shown (``grasp.env.tools.Answer``)."""

    sentence_ids: tuple[int, ...]
    """Valid cited sentence ids, in the order given, each once; empty: the answer cited none."""
    invalid: int = 0
    """Citations left out: not an integer id, no such sentence, or never shown."""

    def to_json(self) -> CitationsJson:
        return {"sentence_ids": list(self.sentence_ids), "invalid": self.invalid}

    @classmethod
    def from_json(cls, data: CitationsJson) -> Citations:
        return cls(tuple(int(s) for s in data["sentence_ids"]), int(data["invalid"]))


@dataclass
class TurnRecord:
    """One turn of an episode: what the policy wrote and what the environment answered."""

    text: str
    call: CallRecord | None = None
    """{"name": ..., "arguments": {...}} of a valid call."""
    error: TurnError | None = None
    """A ParseErrorKind, or INVALID_CALL for a well-formed call the environment refused."""
    observation: str | None = None
    hits: list[dict[str, Any]] = field(default_factory=list)
    """Provenance of each hit: sentence_id, paragraph_id, score (and handle, when hits are
    labelled by handle)."""
    read: dict[str, int] | None = None
    """A read by handle that ran: its hit, the hit's sentence_id and the paragraph_id read
    (f(s)); None otherwise, and absent from the JSON."""
    repaired: bool = False
    """The call was repaired before it parsed (``env.repair_calls``); absent from the JSON
    when false."""


def episode_evidence(
    *,
    answer: str | None,
    gold_answers: Sequence[str],
    gold_paragraph_ids: Sequence[int] | frozenset[int],
    evidence_ids: Mapping[str, Iterable[int]],
    turns: Sequence[TurnRecord],
    turn_budget: int,
) -> EpisodeEvidence:
    """The reward's inputs: one definition for a live episode and a recorded trajectory.

    A turn is invalid when it recorded an error (``error is not None``): a parse error or a
    refused call. Every turn costs one unit of the budget, so ``turns_used`` is their number.
    A search that ran is a valid turn that showed hits (reads and answers show none).
    """
    return EpisodeEvidence(
        answer=answer,
        gold_answers=tuple(gold_answers),
        gold_paragraph_ids=frozenset(gold_paragraph_ids),
        evidence_ids={kind: frozenset(ids) for kind, ids in evidence_ids.items()},
        turns_used=len(turns),
        turn_budget=turn_budget,
        invalid_turns=sum(1 for turn in turns if turn.error is not None),
        searches=sum(1 for turn in turns if turn.error is None and turn.hits),
    )


@dataclass
class Episode:
    """The state of one episode; the environment and its tools mutate it."""

    episode_id: str
    question: Question
    group_id: int
    """Index of the question in its batch: the G samples of a question share it."""
    sample_index: int
    messages: list[dict[str, Any]]
    turn_budget: int
    gold_paragraph_ids: frozenset[int]
    scope: np.ndarray | None
    status: EpisodeStatus = EpisodeStatus.GENERATING
    stop_reason: StopReason | None = None
    answer: str | None = None
    turns: list[TurnRecord] = field(default_factory=list)
    evidence_ids: dict[str, set[int]] = field(
        default_factory=lambda: {kind: set() for kind in CORE_EVIDENCE_KINDS}
    )
    """Evidence kind -> the paragraphs recorded under it (``add_evidence``): the core kinds
    D_s, D_k, D_r from the start, a tool's own kind from its first record on."""
    shown_sentence_ids: set[int] = field(default_factory=set)
    shown_paragraph_ids: set[int] = field(default_factory=set)
    tool_calls: Counter = field(default_factory=Counter)
    errors: Counter = field(default_factory=Counter)
    """Invalid turns by TurnError."""
    extra: dict[str, Any] = field(default_factory=dict)
    """What the policy reported about the episode (a baseline's route...), for the trajectory."""
    citations: Citations | None = None
    """What the answer cited; None unless the episode answered with ``env.citations`` on."""
    hit_handles: list[tuple[int, int]] = field(default_factory=list)
    """(sentence_id, paragraph_id) of the hit labelled ``[n]`` at position n - 1
    (``env.hit_labels=handles``)."""

    def handle(self, sentence_id: int, paragraph_id: int) -> int:
        """The hit's handle: the one the sentence was first shown with, else the next number."""
        for number, (shown, _) in enumerate(self.hit_handles, start=1):
            if shown == sentence_id:
                return number
        self.hit_handles.append((sentence_id, paragraph_id))
        return len(self.hit_handles)

    def add_evidence(self, kind: str, paragraph_ids: Iterable[int]) -> None:
        """Record ``paragraph_ids`` under evidence ``kind`` (a tool's ``evidence``)."""
        self.evidence_ids.setdefault(kind, set()).update(paragraph_ids)

    @property
    def semantic_paragraph_ids(self) -> set[int]:
        """D_s (read it; record with ``add_evidence``)."""
        return self.evidence_ids[SEMANTIC_EVIDENCE]

    @property
    def keyword_paragraph_ids(self) -> set[int]:
        """D_k."""
        return self.evidence_ids[KEYWORD_EVIDENCE]

    @property
    def read_paragraph_ids(self) -> set[int]:
        """D_r."""
        return self.evidence_ids[READ_EVIDENCE]

    @property
    def turns_used(self) -> int:
        return len(self.turns)

    @property
    def turns_left(self) -> int:
        return self.turn_budget - self.turns_used

    @property
    def done(self) -> bool:
        return self.status is EpisodeStatus.TERMINATED

    def terminate(self, reason: StopReason) -> None:
        self.status = EpisodeStatus.TERMINATED
        self.stop_reason = reason

    def record_call(self, call: ToolCall) -> None:
        """Record a valid call on the current turn and count it."""
        name = str(call.name)  # a shipped tool's name is a ToolName; the record holds plain text
        self.turns[-1].call = {"name": name, "arguments": dict(call.arguments)}
        self.tool_calls[name] += 1

    def record_error(self, kind: TurnError) -> None:
        """Mark the current turn invalid with ``kind`` (a ParseErrorKind, INVALID_CALL)."""
        self.turns[-1].error = kind
        self.errors[kind] += 1

    def evidence(self) -> EpisodeEvidence:
        """What the reward and retrieval metrics need from this episode."""
        return episode_evidence(
            answer=self.answer,
            gold_answers=self.question.answers,
            gold_paragraph_ids=self.gold_paragraph_ids,
            evidence_ids=self.evidence_ids,
            turns=self.turns,
            turn_budget=self.turn_budget,
        )
