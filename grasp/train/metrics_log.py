"""The readers of a run directory's ``metrics.jsonl`` and ``dev_curve.jsonl`` (their names
and places: grasp/train/run_folder.py).

Kept apart from the trainer callbacks (which import transformers) so that reading a run,
for plots and reports, costs no model-library import.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from grasp.train.run_folder import RunFolder

log = logging.getLogger(__name__)


def read_metrics(run_dir: Path) -> list[dict[str, Any]]:
    """The records of ``metrics.jsonl``; after a resume, the last record of each step wins."""
    path = RunFolder(run_dir).metrics_file
    if not path.exists():
        return []
    by_key: dict[tuple[int, bool], dict[str, Any]] = {}
    for number, line in enumerate(path.read_bytes().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            key = (int(record["step"]), "train_runtime" in record)
        except (ValueError, KeyError, TypeError, RecursionError):
            # A line torn by a killed write: its step is logged again after the resume.
            log.warning("%s: line %d is not a metrics record (a torn write); skipped", path, number)
            continue
        by_key[key] = record
    return [by_key[k] for k in sorted(by_key)]


def read_dev_curve(run_dir: Path) -> list[dict[str, Any]]:
    """The lines of ``dev_curve.jsonl`` in step order ([] when the run has no dev curve).

    Each line is ``{"step": N, "pooled": {...}, "<dataset>": {...}}``; the file is rewritten
    whole from the step folders, so an unreadable line is an error, not a torn write."""
    path = RunFolder(run_dir).dev_curve_file
    if not path.exists():
        return []
    lines = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            int(record["step"])
        except (ValueError, KeyError, TypeError) as error:
            raise ValueError(f"{path}: line {number} is not a dev curve line ({error})") from error
        lines.append(record)
    return sorted(lines, key=lambda r: int(r["step"]))


def drop_records_after(path: Path, step: int) -> int:
    """Rewrite ``path`` without the records of steps after ``step`` (and without a torn line);
    the number of lines dropped. The file is replaced whole, so a kill leaves either file."""
    if not path.exists():
        return 0
    kept, dropped = [], 0
    for line in path.read_bytes().splitlines():
        if not line.strip():
            continue
        try:
            later = int(json.loads(line)["step"]) > step
        except (ValueError, KeyError, TypeError, RecursionError):
            later = True  # a torn write
        if later:
            dropped += 1
        else:
            kept.append(line)
    if dropped:
        partial = path.with_suffix(".jsonl.partial")
        partial.write_bytes(b"".join(line + b"\n" for line in kept))
        partial.replace(path)
        log.info("%s: resuming at step %d, dropped %d later records", path, step, dropped)
    return dropped
