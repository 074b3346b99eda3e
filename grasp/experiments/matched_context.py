"""The baseline table's recall at matched context: each trained row against a baseline swept
over its depth k, at the depth whose context matches the row's.

A policy that reads more shows itself more text; comparing it with a single-step baseline at
the same top-K favours it. ``scripts/k_sweep.py`` evaluates the baseline at several k
(``<sweep>/k<K>/<baseline>/``); for each trained row of the table, ``matched_entries`` pairs
its evaluation with the depth whose context tokens per episode are the least at or above the
row's own (``grasp.eval.paired.compare_at_matched_context``), question by question, on
``metrics`` (recall and answer in evidence by default). ``matched_section`` is its part of
table.md; table.json has every dataset and the whole context curve.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grasp.eval.context import TokenCounter
from grasp.eval.paired import compare_at_matched_context, signed
from grasp.experiments.sweep import RunStatus, escape_cell, markdown_table

MATCHED_METRICS = ("recall", "answer_in_evidence", "em", "f1")
"""What the section compares by default: retrieval first, then the answers."""


@dataclass
class MatchedContext:
    """What the table's matched-context section compares."""

    sweep: Path
    """The k sweep's folder (scripts/k_sweep.py root=)."""
    baseline: str
    """The swept row the trained rows are compared against."""
    rows: list[str]
    """The table's rows compared (the trained rows)."""
    metrics: list[str] = field(default_factory=lambda: list(MATCHED_METRICS))


def matched_entries(
    rows: Sequence[Mapping[str, Any]],
    datasets: Sequence[str],
    matched: MatchedContext,
    count: TokenCounter,
) -> list[dict[str, Any]]:
    """One entry per compared row: the row minus the baseline at its matched depth (per
    dataset, pooled, and the depths' context curve), or a note when the row is not finished
    or the sweep lacks the datasets."""
    by_name = {r["baseline"]: r for r in rows}
    entries = []
    for name in matched.rows:
        entry: dict[str, Any] = {"row": name, "baseline": matched.baseline, "note": None}
        row = by_name.get(name)
        if row is None or row["status"] != RunStatus.FINISHED:
            entry["note"] = f"not compared: {name} is not a finished row of this table"
            entries.append(entry)
            continue
        try:
            comparison = compare_at_matched_context(
                Path(row["run_dir"]),
                matched.sweep,
                matched.baseline,
                count,
                datasets,
                matched.metrics,
            )
        except (ValueError, FileNotFoundError) as error:
            entry["note"] = f"not compared: {error}"
        else:
            entry.update(comparison.as_json())
        entries.append(entry)
    return entries


def matched_section(entries: Sequence[Mapping[str, Any]], metrics: Sequence[str]) -> list[str]:
    """table.md's section: per compared row, its context, the baseline's matched depth and
    context, and the row minus the baseline per metric, pooled."""
    if not entries:
        return []
    header = ["row", "context", "vs k", "its context", *(f"{m} A − B" for m in metrics)]
    cells = []
    for entry in entries:
        if entry.get("note"):
            cells.append(
                [
                    f"`{entry['row']}`",
                    "—",
                    "—",
                    "—",
                    *(["—"] * (len(metrics) - 1)),
                    escape_cell(entry["note"]),
                ]
            )
            continue
        pooled = entry["pooled"]
        mark = "" if entry["b_at_or_above"] else " (less: A shows more than any k)"
        cells.append(
            [
                f"`{entry['row']}`",
                f"{entry['a_context_tokens']:.0f}",
                f"{entry['b_k']}",
                f"{entry['b_context_tokens']:.0f}{mark}",
                *(signed(pooled[m]) if m in pooled else "—" for m in metrics),
            ]
        )
    baseline = entries[0]["baseline"]
    return [
        "",
        f"## at matched context (pooled): each trained row minus `{baseline}`",
        "",
        f"`{baseline}` evaluated at several top-K (scripts/k_sweep.py); each row is compared "
        "with the depth whose context tokens per episode are the least at or above its own, "
        "question by question (mean difference [95% paired-bootstrap interval]). Answer in "
        "evidence: a gold answer in what the tools showed (yes/no questions left out). The "
        "depths' contexts and each dataset are in table.json.",
        "",
        *markdown_table(header, cells),
    ]
