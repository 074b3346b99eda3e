"""The run directory's ``metrics.jsonl``: its name and its reader.

Kept apart from the trainer callbacks (which import transformers) so that reading a run,
for plots and reports, costs no model-library import.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

METRICS_FILE = "metrics.jsonl"


def read_metrics(run_dir: Path) -> list[dict[str, Any]]:
    """The records of ``metrics.jsonl``; after a resume, the last record of each step wins."""
    path = run_dir / METRICS_FILE
    if not path.exists():
        return []
    by_key: dict[tuple[int, bool], dict[str, Any]] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            record = json.loads(line)
            by_key[(record["step"], "train_runtime" in record)] = record
    return [by_key[k] for k in sorted(by_key)]
