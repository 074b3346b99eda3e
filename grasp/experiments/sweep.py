"""Sweeps: one script run per job, each in a process and a folder of its own, then one table.

``scripts/ablate.py`` trains one run per ablation variant (``scripts/train.py``) and
``scripts/baselines.py`` evaluates one baseline per job (``scripts/evaluate.py``). Both take
from here: the job's command line (the sweep's own fields left out), running it with its
output also in a log file, the marker of a failed job (``failed.json``), telling whether a
finished job ran exactly the wanted configuration, and writing the comparison as JSON and
markdown::

    overrides = job_overrides(task_overrides, SWEEP_FIELDS, {"run_dir": "choose sweep_dir="})
    run_job("variant no_rr", "scripts/train.py", command, run_dir, run_dir / "train.log")
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import traceback
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser

from grasp.eval.jsonl import read_json
from grasp.types import StrEnum

FAILED_FILE = "failed.json"
"""Written in a job's folder when its last attempt failed; removed when it is retried."""


class RunStatus(StrEnum):
    """Where one job of a sweep stands."""

    FINISHED = "finished"
    """Its results file is written."""
    UNFINISHED = "unfinished"
    """Started but no results yet: running or interrupted (the next sweep resumes it)."""
    FAILED = "failed"
    """The last attempt failed (failed.json says how)."""
    MISSING = "missing"
    """Never started."""
    NOT_RUN = "not run"
    """Left out by the sweep: the job needs a setting that is not given."""


# --- running a job -------------------------------------------------------------------------


def job_overrides(
    task_overrides: Sequence[str], sweep_fields: Collection[str], refused: Mapping[str, str]
) -> list[str]:
    """The sweep's command-line overrides that its jobs' script takes: those of
    ``sweep_fields`` (the sweep's own settings, and the fields under them) left out.

    A key of ``refused`` (set per job by the sweep) raises ValueError with its message.
    """
    parsed = OverridesParser.create().parse_overrides(list(task_overrides))
    kept = []
    for text, override in zip(task_overrides, parsed, strict=True):
        key = override.key_or_group
        if key in refused:
            raise ValueError(f"{key}= cannot be set: {refused[key]}")
        if key.split(".")[0] not in sweep_fields:
            kept.append(text)
    return kept


def run_logged(command: Sequence[str], log_file: Path) -> int:
    """Run ``command``, its output shown and appended to ``log_file``; its exit status."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with log_file.open("a") as handle:
        process = subprocess.Popen(
            list(command), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
        )
        assert process.stdout is not None
        for line in process.stdout:
            sys.stdout.write(line)
            handle.write(line)
        return process.wait()


def run_job(job: str, script: str, command: Sequence[str], run_dir: Path, log_file: Path) -> None:
    """Run one job in its own process; when it fails, write failed.json in ``run_dir`` and
    raise RuntimeError starting with ``job`` (e.g. "variant no_rr: scripts/train.py exited...").
    """
    clear_failure(run_dir)
    try:
        status = run_logged(command, log_file)
        message = f"{script} exited with status {status}; see {log_file}"
    except OSError as error:  # the launcher itself could not start
        status, message = -1, f"could not start {command[0]!r}: {error}"
    if status != 0:
        record_failure(run_dir, message)
        raise RuntimeError(f"{job}: {message}")


# --- failed jobs ---------------------------------------------------------------------------


def record_failure(run_dir: Path, error: str | BaseException) -> Path:
    """Write ``failed.json`` (the error, and its traceback for an exception) in ``run_dir``."""
    run_dir.mkdir(parents=True, exist_ok=True)
    record: dict[str, Any] = {"error": str(error)}
    if isinstance(error, BaseException):
        record["error"] = f"{type(error).__name__}: {error}"
        record["traceback"] = "".join(traceback.format_exception(error))
    path = run_dir / FAILED_FILE
    path.write_text(json.dumps(record, indent=2))
    return path


def clear_failure(run_dir: Path) -> None:
    """Forget an earlier failure before the job is tried again."""
    (run_dir / FAILED_FILE).unlink(missing_ok=True)


def read_failure(run_dir: Path) -> str | None:
    """What the last attempt's failure was; None when it did not fail."""
    path = run_dir / FAILED_FILE
    if not path.exists():
        return None
    return str(read_json(path).get("error", "unknown error"))


# --- the comparison files ------------------------------------------------------------------


def escape_cell(text: str) -> str:
    """Text that stays inside one markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """The lines of one markdown table (cells are written as they are: escape them first)."""
    lines = ["| " + " | ".join(header) + " |", "|---" * len(header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


@dataclass
class TableFiles:
    json_path: Path
    markdown_path: Path


def write_table_files(folder: Path, stem: str, data: Any, markdown: str) -> TableFiles:
    """Write ``<folder>/<stem>.json`` (``data``) and ``<folder>/<stem>.md``."""
    folder.mkdir(parents=True, exist_ok=True)
    files = TableFiles(folder / f"{stem}.json", folder / f"{stem}.md")
    files.json_path.write_text(json.dumps(data, indent=2, default=str))
    files.markdown_path.write_text(markdown)
    return files
