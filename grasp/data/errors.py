"""Errors of the data-loading layer, and the checked field access that raises them.

``DataFormatError`` reports a malformed file or record; ``HubUnavailableError`` an unreachable
Hugging Face hub. ``RecordContext`` is what the converters use to read a record's fields, so
that every bad field becomes a ``DataFormatError`` naming the file, line or record, and field.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["DataFormatError", "HubUnavailableError", "RecordContext", "UniqueIds", "no_questions"]


class DataFormatError(ValueError):
    """A data file or record does not have the expected layout.

    The message names the file, the line (JSON Lines) or record (JSON list) and the field, so
    that the bad input can be found without a debugger.
    """

    def __init__(
        self,
        source: str | Path,
        problem: str,
        *,
        line: int | None = None,
        record: int | None = None,
        field: str | None = None,
    ) -> None:
        self.source = str(source)
        self.problem = problem
        self.line = line
        """1-based line number in a JSON Lines file, when known."""
        self.record = record
        """0-based position of the record in a JSON list, when known."""
        self.field = field
        """The missing or invalid field, e.g. ``paragraphs[3].sentences``."""
        where = [self.source]
        if line is not None:
            where.append(f"line {line}")
        if record is not None:
            where.append(f"record {record}")
        what = f"field '{field}': {problem}" if field else problem
        super().__init__(f"{', '.join(where)}: {what}")


def no_questions(source: str | Path, why: str) -> DataFormatError:
    """The error of a data file that holds no question (``why``: "the file is empty").

    Said where the file is read: otherwise the first to notice is whatever needs questions,
    and it names something else ("env.top_k=5 exceeds the sentences in the corpus (0)")."""
    return DataFormatError(source, f"holds no questions ({why})")


class HubUnavailableError(RuntimeError):
    """The Hugging Face hub could not be reached (offline, blocked, or the repo is missing)."""


_KIND_NAMES = {str: "a string", int: "an integer", bool: "true or false", list: "a list",
               dict: "an object"}  # fmt: skip


@dataclass(frozen=True)
class RecordContext:
    """Where a record came from, and checked access to its fields.

    Every accessor raises :class:`DataFormatError` naming this place and the field, so the
    converters never fail with a bare ``KeyError`` or silently accept a wrong type.
    """

    source: str
    line: int | None = None
    record: int | None = None

    def place(self) -> str:
        """Where the record is within its source: ``line 3``, ``record 2`` or the source."""
        if self.line is not None:
            return f"line {self.line}"
        if self.record is not None:
            return f"record {self.record}"
        return self.source

    def error(self, problem: str, field: str | None = None) -> DataFormatError:
        """A :class:`DataFormatError` for this record (returned, for the caller to raise)."""
        return DataFormatError(
            self.source, problem, line=self.line, record=self.record, field=field
        )

    def check(self, value: Any, kind: type, field: str) -> Any:
        """``value`` itself when it is of ``kind`` (bools are not integers here)."""
        wrong_bool = kind is int and isinstance(value, bool)
        if not isinstance(value, kind) or wrong_bool:
            name = _KIND_NAMES.get(kind, kind.__name__)
            raise self.error(f"expected {name}, got {type(value).__name__}", field)
        return value

    def require(self, mapping: Mapping[str, Any], key: str, kind: type, prefix: str = "") -> Any:
        """``mapping[key]``, which must be present and of ``kind``."""
        field = f"{prefix}{key}"
        if key not in mapping or mapping[key] is None:
            raise self.error("missing", field)
        return self.check(mapping[key], kind, field)

    def text(self, mapping: Mapping[str, Any], key: str, prefix: str = "") -> str:
        """``mapping[key]``: present, a string, and more than whitespace (an empty id,
        question or answer cannot be evaluated: an empty gold answer matches an empty one)."""
        return self.nonblank(self.require(mapping, key, str, prefix), f"{prefix}{key}")

    def nonblank(self, value: str, field: str) -> str:
        """``value`` itself unless it is empty or only whitespace."""
        if not value.strip():
            raise self.error(f"is empty ({value!r})", field)
        return value

    def nonempty(self, items: list, field: str, what: str) -> list:
        """``items`` itself unless it is an empty list; ``what`` names one item."""
        if not items:
            raise self.error(f"is empty: a question needs at least one {what}", field)
        return items

    def optional(
        self, mapping: Mapping[str, Any], key: str, kind: type, default: Any, prefix: str = ""
    ) -> Any:
        """``mapping[key]`` when present and not None, else ``default``; checked like require."""
        if mapping.get(key) is None:
            return default
        return self.check(mapping[key], kind, f"{prefix}{key}")

    def strings(self, value: Any, field: str) -> tuple[str, ...]:
        """``value`` as a tuple of strings; it must be a list whose items are all strings."""
        items = self.check(value, list, field)
        for position, item in enumerate(items):
            self.check(item, str, f"{field}[{position}]")
        return tuple(items)

    def indexed_objects(self, value: Any, field: str) -> Iterator[tuple[str, dict]]:
        """(field prefix, object) for each object of a list whose optional ``idx`` must equal
        its position (supporting facts and decompositions refer to paragraphs by idx)."""
        for position, item in enumerate(self.check(value, list, field)):
            prefix = f"{field}[{position}]."
            self.check(item, dict, prefix.rstrip("."))
            idx = self.optional(item, "idx", int, position, prefix)
            if idx != position:
                raise self.error(
                    f"is {idx} but the paragraph is at position {position}", prefix + "idx"
                )
            yield prefix, item

    def pairs(self, value: Any, field: str, shape: str) -> Iterator[tuple[str, Any, Any]]:
        """(field, first, second) for each two-item list of a list; ``shape`` names the items."""
        for position, item in enumerate(self.check(value, list, field)):
            name = f"{field}[{position}]"
            pair = self.check(item, list, name)
            if len(pair) != 2:
                raise self.error(f"expected {shape}, got {len(pair)} items", name)
            yield name, pair[0], pair[1]


class UniqueIds:
    """The question ids of one source so far: a repeated id is an error naming both places.

    A repeated question would be sampled, rolled out and averaged twice; every loader
    (normalized, raw, hub) refuses it.
    """

    def __init__(self) -> None:
        self._first: dict[str, str] = {}

    def add(self, question_id: str, ctx: RecordContext, field: str = "id") -> None:
        """Record ``question_id`` at ``ctx``; DataFormatError when it was seen before."""
        first = self._first.get(question_id)
        if first is not None:
            raise ctx.error(f"duplicate id {question_id!r} (first on {first})", field)
        self._first[question_id] = ctx.place()
