"""Append-only JSON Lines files, which an interrupted run may leave with a torn last line.

An evaluation appends its trajectories and its judge's verdicts as it goes, so that a killed
run loses at most the record it was writing. ``read_appended`` reads such a file back: a torn
last line is cut off the file (its record is produced again by the resumed run), a bad line
before the last is corruption and is named, never skipped.

    trajectories = read_appended(path, Trajectory.from_json, "a trajectory", "delete it ...")
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from grasp.compressed import XZ_SUFFIX, read_bytes

log = logging.getLogger(__name__)

T = TypeVar("T")


def read_appended(path: Path, parse: Callable[[Any], T], what: str, remedy: str) -> list[T]:
    """``parse`` of every line of ``path``, a file an earlier run appended to.

    Args:
        parse: One decoded line -> its record; raises ValueError, KeyError or TypeError on a
            line that is not one.
        what: What a line holds, for the error ("a trajectory").
        remedy: What the user can do about a corrupted file ("delete it to ...").

    ``path`` may be a finished file's stored ``.xz`` form (``grasp.compressed``): it is read,
    never cut, so any line that is not a record is corruption.

    Raises:
        ValueError: a line before the last (any line of an ``.xz`` file) is not a record (the
            file is left as it is).
    """
    stored = path.suffix == XZ_SUFFIX
    lines = read_bytes(path).split(b"\n")
    records, kept = [], 0
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            kept += len(line) + 1
            continue
        try:
            records.append(parse(json.loads(line)))
        except (ValueError, KeyError, TypeError, RecursionError) as error:  # JSON, UTF-8 too
            if stored or any(rest.strip() for rest in lines[number:]):
                raise ValueError(
                    f"{path}: line {number} is not {what} ({error}); the file is corrupted: "
                    f"{remedy}"
                ) from None
            log.warning("%s: dropping a torn last line (an interrupted write)", path)
            with path.open("r+b") as handle:
                handle.truncate(kept)
            return records
        kept += len(line) + 1
    if lines[-1].strip() and not stored:  # a whole last line whose newline was not written yet
        with path.open("ab") as handle:
            handle.write(b"\n")
    return records


def end_last_line(path: Path) -> None:
    """Give a torn last line its newline, so that the next append starts a line of its own."""
    if path.exists() and path.stat().st_size:
        with path.open("rb") as handle:
            handle.seek(-1, 2)
            ended = handle.read(1) == b"\n"
        if not ended:
            with path.open("ab") as handle:
                handle.write(b"\n")


def read_json(path: Path) -> dict[str, Any]:
    """A JSON object from ``path``; ValueError naming the file when it is not one."""
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: not valid JSON ({error})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object, found {type(data).__name__}")
    return data
