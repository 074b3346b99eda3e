"""Reading JSON and JSON Lines data files so that every way they can be bad names file and line.

``json.load`` fails on a bad file in ways that name neither: ``UnicodeDecodeError`` for bytes
that are not UTF-8, ``RecursionError`` for a value nested thousands deep, a ``ValueError``
for an integer of more than 4,300 digits. Here each becomes a ``DataFormatError`` naming the
file and the line (and the column where it is known).

    for ctx, record in json_lines(path): ...     # one (RecordContext, value) per non-blank line
    records = json_document(path)                 # the one JSON value of the file
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from grasp.data.errors import DataFormatError, RecordContext

__all__ = ["json_document", "json_lines"]


def _not_utf8(byte: int, column: int) -> str:
    return f"not UTF-8 text (byte 0x{byte:02x} at byte {column} of the line)"


def _too_deep() -> str:
    return f"a value nested too deeply to read (more than about {sys.getrecursionlimit()} levels)"


def json_lines(path: Path) -> Iterator[tuple[RecordContext, Any]]:
    """(context naming file and line, decoded value) for each non-blank line of ``path``."""
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            ctx = RecordContext(str(path), line=number)
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise ctx.error(_not_utf8(raw[error.start], error.start + 1)) from None
            if not line.strip():
                continue  # blank lines carry no record (e.g. a trailing newline)
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise ctx.error(f"invalid JSON ({error.msg} at column {error.colno})") from None
            except RecursionError:
                raise ctx.error(_too_deep()) from None
            except ValueError as error:  # an integer too long for int(): Python's own limit
                raise ctx.error(f"invalid JSON ({error})") from None
            yield ctx, record


def json_document(path: Path) -> Any:
    """The single JSON value of ``path``; DataFormatError naming the line of any problem."""
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        column = error.start - data.rfind(b"\n", 0, error.start)
        raise DataFormatError(path, _not_utf8(data[error.start], column), line=line) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise DataFormatError(
            path, f"invalid JSON at line {error.lineno}, column {error.colno}: {error.msg}"
        ) from None
    except RecursionError:
        line = _line_of(text, _first_problem(text))
        raise DataFormatError(path, _too_deep(), line=line) from None
    except ValueError as error:
        line = _line_of(text, _first_problem(text))
        raise DataFormatError(path, f"invalid JSON ({error})", line=line) from None


def _line_of(text: str, position: int | None) -> int | None:
    return None if position is None else text.count("\n", 0, position) + 1


def _first_problem(text: str) -> int | None:
    """Where ``text`` first nests deeper than the recursion limit allows, or first has an
    integer of more than ``sys.get_int_max_str_digits()`` digits, outside strings."""
    max_depth = sys.getrecursionlimit() // 2  # json's decoder recurses more than once a level
    max_digits = sys.get_int_max_str_digits() or len(text) + 1
    depth, digits, in_string, escaped = 0, 0, False, False
    for position, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
            continue
        if char.isdigit():
            digits += 1
            if digits > max_digits:
                return position
            continue
        digits = 0
        if char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > max_depth:
                return position
        elif char in "]}":
            depth -= 1
    return None
