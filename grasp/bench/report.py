"""What every benchmark records about its machine, how its tables print, where it is written.

    started, load_before = time.perf_counter(), os.getloadavg()
    ...                                            # measure
    report["environment"] = machine(load_before)
    publish(report, config.out, "bench_build.json", table(report), log)

Timings mean something only with their context: the cores the process may use, the load
average before and after (a busy neighbour on 2 cores distorts everything), the thread pools
and the library versions.
"""

from __future__ import annotations

import json
import logging
import os
import platform
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypedDict

from grasp.corpus.manifest import library_versions
from grasp.paths import REPO_ROOT
from grasp.threads import available_cores


class LoadAverages(TypedDict):
    start: tuple[float, float, float]
    end: tuple[float, float, float]


class Machine(TypedDict):
    """A report's ``environment``: what its timings ran on."""

    cores: int
    load_average_1_5_15_min: LoadAverages
    torch_threads: int
    faiss_threads: int
    machine: str
    python: str
    versions: dict[str, str]


def machine(
    load_before: tuple[float, float, float], versions: dict[str, str] | None = None
) -> Machine:
    """The report's ``environment``: cores, load averages, thread pools, versions.

    ``versions`` adds libraries beyond those an index records (``library_versions``).
    """
    import faiss
    import torch

    return {
        "cores": available_cores(),
        "load_average_1_5_15_min": {"start": load_before, "end": os.getloadavg()},
        "torch_threads": torch.get_num_threads(),
        "faiss_threads": faiss.omp_get_max_threads(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "versions": library_versions() | (versions or {}),
    }


def write_report(report: Mapping[str, Any], out: str | None, default_name: str) -> Path:
    """Write ``report`` as JSON to ``out`` (default ``runs/<default_name>``); return the path."""
    path = Path(out) if out else REPO_ROOT / "runs" / default_name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2, default=str))
    return path


def publish(
    report: Mapping[str, Any], out: str | None, default_name: str, table: str, log: logging.Logger
) -> Path:
    """The end of every benchmark: write the report (``write_report``), print its table, and
    log where it went; returns the path."""
    path = write_report(report, out, default_name)
    print(table)
    log.info("wrote %s", path)
    return path


def format_value(value: float) -> str:
    """A table cell: thousands separators from 1,000, one decimal from 10, else 3 digits."""
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}"


def metric_columns(
    columns: Sequence[Mapping[str, float]], headers: Sequence[str], cell_width: int
) -> list[str]:
    """Lines of a table with one row per metric (sorted; "-" where a column lacks it) and one
    column per mapping, headed ``headers``; the first line is blank."""
    names = sorted({name for column in columns for name in column})
    width = max(len(name) for name in names) + 2
    lines = [f"\n{'metric':<{width}}" + "".join(f"{h:>{cell_width}}" for h in headers)]
    for name in names:
        cells = [format_value(c[name]) if name in c else "-" for c in columns]
        lines.append(f"{name:<{width}}" + "".join(f"{cell:>{cell_width}}" for cell in cells))
    return lines
