"""What every benchmark script records about its machine, and where it writes its report.

    started, load_before = time.perf_counter(), os.getloadavg()
    ...                                            # measure
    report["environment"] = machine(load_before)
    write_report(report, config.out, "bench_build.json")

Timings mean something only with their context: the cores the process may use, the load
average before and after (a busy neighbour on 2 cores distorts everything), the thread pools
and the library versions.
"""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path
from typing import Any

from grasp.corpus.manifest import library_versions
from grasp.paths import REPO_ROOT
from grasp.threads import available_cores


def machine(
    load_before: tuple[float, float, float], versions: dict[str, str] | None = None
) -> dict[str, Any]:
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


def write_report(report: dict[str, Any], out: str | None, default_name: str) -> Path:
    """Write ``report`` as JSON to ``out`` (default ``runs/<default_name>``); return the path."""
    path = Path(out) if out else REPO_ROOT / "runs" / default_name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2, default=str))
    return path
