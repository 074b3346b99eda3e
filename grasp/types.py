"""Shared types of grasp: questions, paragraphs, retrieval hits and the closed sets that name them.

Everything else in the package imports from here; this module imports nothing from grasp.
"""

from __future__ import annotations

import enum
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

if sys.version_info >= (3, 11):
    from enum import StrEnum
else:  # Python 3.10: the same behaviour, spelled out

    class StrEnum(str, enum.Enum):
        """An enum whose members are strings and print as their value."""

        def __str__(self) -> str:
            return str(self.value)


E = TypeVar("E", bound=enum.Enum)


def parse_enum(enum_type: type[E], value: object, field_name: str) -> E:
    """``enum_type(value)``, or a ValueError naming the config field and the allowed values.

    Config dataclasses type enum fields as ``str`` (OmegaConf matches enums by member name,
    HOTPOTQA, while users write values, hotpotqa) and convert them with this function.
    An unset ("???") value is passed through for Hydra to report.
    """
    if value == "???":
        return value  # type: ignore[return-value]
    try:
        return enum_type(value)
    except ValueError:
        allowed = ", ".join(str(member.value) for member in enum_type)
        raise ValueError(f"{field_name}={value!r} is not one of: {allowed}") from None


def check_range(
    field_name: str, value: float, low: float | None = None, high: float | None = None
) -> None:
    """Raise a ValueError naming the config field when ``value`` lies outside ``[low, high]``.

    A bound of None is open. Config dataclasses call this from ``__post_init__``, so that a
    value that cannot work fails when the config is built, before any index is built or any
    model loaded.
    """
    if low is not None and value < low:
        raise ValueError(f"{field_name} must be at least {low}, got {value}")
    if high is not None and value > high:
        raise ValueError(f"{field_name} must be at most {high}, got {value}")


def check_choice(field_name: str, value: str, allowed: tuple[str, ...]) -> None:
    """Raise a ValueError naming the config field when ``value`` is not one of ``allowed``.

    For closed sets owned by a library (TRL's loss types...), kept as strings for it.
    """
    if value not in allowed:
        raise ValueError(f"{field_name}={value!r} is not one of: {', '.join(allowed)}")


class DatasetName(StrEnum):
    """The multi-hop QA benchmarks grasp loads."""

    HOTPOTQA = "hotpotqa"
    TWOWIKI = "2wikimultihopqa"
    MUSIQUE = "musique"


class Granularity(StrEnum):
    """What one retrievable unit of an index is."""

    SENTENCE = "sentence"
    PARAGRAPH = "paragraph"


class Retriever(StrEnum):
    """Which scorer produced a hit. HYBRID is reciprocal-rank fusion of the other two."""

    DENSE = "dense"
    BM25 = "bm25"
    HYBRID = "hybrid"


class ToolName(StrEnum):
    """The names of the tools grasp ships, as constants to write a call by.

    Which tools exist is the tool registry's to say (``grasp.env.tools``), never this enum's:
    code that needs every tool iterates the registry, so a tool registered elsewhere counts.
    Which ones an episode offers is configuration (``env.tools``)."""

    SEMANTIC_SEARCH = "semantic_search"
    KEYWORD_SEARCH = "keyword_search"
    READ_PARAGRAPH = "read_paragraph"
    SEARCH = "search"
    """Search-R1-style single paragraph search (the baseline tool set)."""
    ANSWER = "answer"


class StopReason(StrEnum):
    """Why an episode ended."""

    ANSWERED = "answered"
    TURN_BUDGET = "turn_budget"
    TOKEN_BUDGET = "token_budget"
    NO_TOOL_CALL = "no_tool_call"
    """A final message without a tool call (treated as the answer when configured so)."""
    GENERATION_ERROR = "generation_error"
    WALL_CLOCK_BUDGET = "wall_clock_budget"
    """The episode ran past ``rollout.max_episode_seconds`` (off by default)."""


class ParseErrorKind(StrEnum):
    """Why a turn's text did not yield a runnable tool call (``grasp.env.parser.parse_turn``
    returns exactly these)."""

    NO_TOOL_CALL = "no_tool_call"
    MALFORMED_JSON = "malformed_json"
    UNKNOWN_TOOL = "unknown_tool"
    TOOL_NOT_ALLOWED = "tool_not_allowed"
    """A registered tool (``grasp.env.tools``) that this episode does not offer."""
    MISSING_ARGUMENT = "missing_argument"
    UNEXPECTED_ARGUMENT = "unexpected_argument"
    INVALID_ARGUMENT = "invalid_argument"
    MULTIPLE_TOOL_CALLS = "multiple_tool_calls"
    UNCLOSED_TOOL_CALL = "unclosed_tool_call"


class RefusalKind(StrEnum):
    """Why the environment refused a call that parsed: the turn errors that are not the
    parser's."""

    INVALID_CALL = "invalid_call"
    """A well-formed call that its tool refused (an id never shown, say)."""


TurnError = ParseErrorKind | RefusalKind
"""Why a turn was invalid: the closed set of a turn's recorded error (``TurnRecord.error``)
and of the keys of an episode's error counts. Parse-error rates count the ``ParseErrorKind``
members, invalid-call rates ``RefusalKind.INVALID_CALL``."""

_PARSE_ERRORS = frozenset(ParseErrorKind)


def parse_turn_error(value: str) -> TurnError:
    """The turn error a JSON string names; ValueError when it names none."""
    if value in _PARSE_ERRORS:
        return ParseErrorKind(value)
    return RefusalKind(value)


def is_parse_error(kind: str) -> bool:
    """Whether ``kind`` is one of the parser's errors, not a refused call."""
    return kind in _PARSE_ERRORS


@dataclass(frozen=True)
class Paragraph:
    """One context paragraph of a question, as the dataset gives it."""

    title: str
    sentences: tuple[str, ...]
    is_supporting: bool = False

    @property
    def text(self) -> str:
        """The paragraph's sentences joined by one space (empty sentences dropped)."""
        return " ".join(s for s in self.sentences if s)


@dataclass(frozen=True)
class SupportingFact:
    """A gold fact: a sentence of the paragraph at ``paragraph_index`` in ``Question.paragraphs``.

    ``sentence_index`` is None when the dataset marks only the paragraph (``[title, -1]``).
    """

    title: str
    paragraph_index: int
    sentence_index: int | None


@dataclass(frozen=True)
class Question:
    """One multi-hop question in grasp's single schema, whatever the source format."""

    question_id: str
    dataset: DatasetName
    question: str
    answers: tuple[str, ...]
    """The official answer first, then aliases. Score with the maximum over all of them."""
    type: str
    paragraphs: tuple[Paragraph, ...]
    supporting_facts: tuple[SupportingFact, ...]
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def gold_paragraph_indices(self) -> tuple[int, ...]:
        """Positions in ``paragraphs`` of the gold (supporting) paragraphs, in order."""
        return tuple(i for i, p in enumerate(self.paragraphs) if p.is_supporting)


@dataclass(frozen=True)
class Hit:
    """One search result with its provenance.

    At sentence granularity ``sentence_id`` is the hit sentence and ``text`` its text; at
    paragraph granularity ``sentence_id`` is None and ``text`` is the whole paragraph.
    """

    paragraph_id: int
    sentence_id: int | None
    title: str
    text: str
    score: float
    retriever: Retriever
    rank: int
    """0-based position of the hit in its result list."""


SEMANTIC_EVIDENCE = "semantic"
"""D_s: the paragraphs of every semantic-search hit (an evidence kind)."""
KEYWORD_EVIDENCE = "keyword"
"""D_k: the paragraphs of every keyword-search hit."""
READ_EVIDENCE = "read"
"""D_r: the paragraphs read (repeated reads count once)."""
CORE_EVIDENCE_KINDS = (SEMANTIC_EVIDENCE, KEYWORD_EVIDENCE, READ_EVIDENCE)
"""The evidence kinds the reward reads. Every episode has them (empty until a tool records
one) and every trajectory file writes them; a tool may record a kind of its own besides."""


def evidence_kinds_in_order(kinds: Iterable[str]) -> list[str]:
    """The core evidence kinds in their order, then the other ``kinds`` sorted by name: the
    order in which a trajectory file writes them and a reader lists them."""
    others = sorted(set(kinds) - set(CORE_EVIDENCE_KINDS))
    return [*CORE_EVIDENCE_KINDS, *others]


@dataclass(frozen=True)
class EpisodeEvidence:
    """What the reward and the retrieval metrics need to know about one finished episode.

    Paragraph ids are corpus ``paragraph_id`` values (f(s) of the sentences involved).
    """

    answer: str | None
    """The submitted answer, or None when the episode never answered."""
    gold_answers: tuple[str, ...]
    gold_paragraph_ids: frozenset[int]
    """D_g: the question's supporting paragraphs."""
    evidence_ids: Mapping[str, frozenset[int]] = field(hash=False)
    """Evidence kind (``CORE_EVIDENCE_KINDS``, or a tool's own) -> the paragraphs recorded
    under it; a kind absent here recorded none."""
    turns_used: int
    turn_budget: int
    invalid_turns: int = 0
    """Turns whose text was not a runnable tool call (parse errors and refused calls)."""
    searches: int = 0
    """Searches that ran: valid turns that showed hits."""

    def paragraph_ids(self, kind: str) -> frozenset[int]:
        """The paragraphs recorded under evidence ``kind`` (empty when none were)."""
        return self.evidence_ids.get(kind, frozenset())

    @property
    def semantic_paragraph_ids(self) -> frozenset[int]:
        """D_s."""
        return self.paragraph_ids(SEMANTIC_EVIDENCE)

    @property
    def keyword_paragraph_ids(self) -> frozenset[int]:
        """D_k."""
        return self.paragraph_ids(KEYWORD_EVIDENCE)

    @property
    def read_paragraph_ids(self) -> frozenset[int]:
        """D_r."""
        return self.paragraph_ids(READ_EVIDENCE)

    @property
    def retrieved_paragraph_ids(self) -> frozenset[int]:
        """Every paragraph recorded under any kind: hits of any search, reads, a tool's own."""
        return frozenset().union(*self.evidence_ids.values())
