"""The rewrite trigger rate against k: one baseline sweep per k, read back into one table.

The more hits a search returns, the more chances one of them is irrelevant: a trigger that
fires on **any** irrelevant hit (CRAG's rule) should fire more often as k grows, and one that
fires only when **all** hits are filtered out (Self-RAG's) less often. scripts/k_sweep.py runs
scripts/baselines.py once per k (``env.top_k=K sweep_dir=<root>/k<K>``); this module reads
each of those folders' table.json and lays the corrective rows side by side: per baseline and
k, the trigger rate, EM, F1, trajectory recall and context tokens per episode.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from grasp.experiments.baseline_table import TRIGGER
from grasp.experiments.sweep import markdown_table

SWEEP_METRICS = ("em", "f1", "recall", "context_tokens")
"""The table.json cells shown beside the trigger rate (mean and 95% interval)."""


def k_folder(root: Path, k: int) -> Path:
    """The baseline sweep of one k."""
    return root / f"k{k}"


@dataclass(frozen=True)
class KSweepRow:
    """One baseline at one k, on one dataset (or pooled)."""

    baseline: str
    k: int
    part: str
    status: str
    trigger_rate: float | None
    trigger_episodes: int | None
    cells: dict[str, dict[str, Any]]
    """SWEEP_METRICS name -> {"value", "ci"} as table.json holds it (absent when not there)."""


def read_k_sweep(root: Path, ks: Sequence[int], baselines: Sequence[str]) -> list[KSweepRow]:
    """Every (baseline, k, part) the sweeps' tables hold, in the order of ``baselines`` and
    ``ks``; a k whose table is missing raises FileNotFoundError naming it."""
    rows: list[KSweepRow] = []
    tables = {}
    for k in ks:
        path = k_folder(root, k) / "table.json"
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no table for k={k}; run scripts/k_sweep.py first")
        tables[k] = json.loads(path.read_text())
    for name in baselines:
        for k in ks:
            table = tables[k]
            row = next((r for r in table["rows"] if r["baseline"] == name), None)
            if row is None:
                raise ValueError(f"{k_folder(root, k)}: table.json has no {name} row")
            parts: Mapping[str, Any] = {**row.get("datasets", {}), "pooled": row.get("pooled")}
            pooled = ["pooled"] if len(table["datasets"]) > 1 else []  # one dataset: itself
            for part in [*table["datasets"], *pooled]:
                cells = parts.get(part) or {}
                trigger = cells.get(TRIGGER) or {}
                rows.append(
                    KSweepRow(
                        baseline=name,
                        k=k,
                        part=part,
                        status=row["status"],
                        trigger_rate=trigger.get("rate"),
                        trigger_episodes=trigger.get("episodes"),
                        cells={m: cells[m] for m in SWEEP_METRICS if m in cells},
                    )
                )
    return rows


def _cell(cell: Mapping[str, Any] | None, digits: int = 3) -> str:
    if not cell or not isinstance(cell.get("value"), (int, float)):
        return "—"
    low, high = cell.get("ci") or (None, None)
    if low is None:
        return f"{cell['value']:.{digits}f}"
    return f"{cell['value']:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def render_k_sweep(rows: Sequence[KSweepRow], root: Path) -> str:
    """k_sweep.md: one table per dataset (and pooled), a row per baseline and k."""
    lines = [
        f"# Rewrite trigger rate against k: {root}",
        "",
        "Each k is one `scripts/baselines.py` sweep (`env.top_k=K`, folder `k<K>/`, with its own "
        "table.md and provenance). Trigger rate: share of the episodes that graded hits whose "
        "rewrite trigger fired (episodes); the other cells are mean [95% bootstrap interval].",
    ]
    for part in dict.fromkeys(r.part for r in rows):
        body = [
            [
                f"`{r.baseline}`",
                str(r.k),
                r.status,
                "—" if r.trigger_rate is None else f"{r.trigger_rate:.3f} ({r.trigger_episodes})",
                *(_cell(r.cells.get(m), 0 if m == "context_tokens" else 3) for m in SWEEP_METRICS),
            ]
            for r in rows
            if r.part == part
        ]
        header = ["baseline", "k", "status", "trigger rate", "EM", "F1", "recall", "context tokens"]
        lines += ["", f"## {part}", "", *markdown_table(header, body)]
    return "\n".join(lines) + "\n"


def write_k_sweep(rows: Sequence[KSweepRow], root: Path) -> None:
    """k_sweep.json and k_sweep.md in ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "k_sweep.json").write_text(json.dumps([asdict(r) for r in rows], indent=2) + "\n")
    (root / "k_sweep.md").write_text(render_k_sweep(rows, root))
