"""Hybrid-fusion variants measured: single-step recall@k per dev set and granularity, with CIs.

``run_fusion(config, command)`` measures every ``VARIANTS`` entry against dense and BM25 alone
on each dataset and granularity and chooses the default (``choose``, by the rule below);
``markdown(report)`` is its tables. ``scripts/eval_fusion.py`` is the entry point.

The rule for the default, fixed before measuring: the variant with the highest mean recall
over all dataset x granularity cells, among those whose paired interval against dense
alone lies entirely below zero in no cell (hybrid must not be worse than dense anywhere).
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from grasp.bench.report import write_report
from grasp.corpus import CorpusIndex, build_index
from grasp.corpus.fusion import FusionConfig
from grasp.data import load_questions, sample_questions
from grasp.data.config import DatasetConfig, dataset_path
from grasp.eval.config import EvalRetrievalConfig
from grasp.eval.provenance import CodeVersion, code_version
from grasp.metrics import bootstrap_ci, paragraph_recall
from grasp.paths import REPO_ROOT
from grasp.types import Granularity, Question, Retriever

log = logging.getLogger("eval_fusion")


@dataclass(frozen=True)
class Variant:
    """One hybrid setting under test."""

    name: str
    fusion: FusionConfig


VARIANTS = (
    Variant("rrf d5", FusionConfig(method="rrf", depth=5)),
    Variant("rrf d10", FusionConfig(method="rrf", depth=10)),
    Variant("rrf d20", FusionConfig(method="rrf", depth=20)),
    Variant("rrf d50", FusionConfig(method="rrf", depth=50)),
    Variant("rrf d100", FusionConfig(method="rrf", depth=100)),
    Variant("rrf d10 w2:1", FusionConfig(method="rrf", depth=10, dense_weight=2.0)),
    Variant("rrf d50 w2:1", FusionConfig(method="rrf", depth=50, dense_weight=2.0)),
    Variant("rrf d50 w1:2", FusionConfig(method="rrf", depth=50, bm25_weight=2.0)),
    Variant("score d5", FusionConfig(method="score", depth=5)),
    Variant("score d20", FusionConfig(method="score", depth=20)),
    Variant("score d50", FusionConfig(method="score", depth=50)),
    Variant("score d20 w2:1", FusionConfig(method="score", depth=20, dense_weight=2.0)),
    Variant("score d50 w2:1", FusionConfig(method="score", depth=50, dense_weight=2.0)),
)
"""Depth of the fused lists, RRF weights dense:BM25, and normalised-score combination; each
names its method, so that the grid does not move with ``FusionConfig``'s defaults."""
PREVIOUS = "rrf d50"
"""The setting before this measurement (RRF over lists of depth max(k, 50))."""


def recalls(
    index: CorpusIndex,
    questions: list[Question],
    retriever: Retriever,
    granularity: Granularity,
    k: int,
) -> list[float]:
    """Per-question recall@k of gold paragraphs, questions searched with their own text."""
    hits = index.search([q.question for q in questions], retriever, k=k, granularity=granularity)
    return [
        paragraph_recall({h.paragraph_id for h in found}, index.corpus.gold_paragraph_ids(q))
        for q, found in zip(questions, hits, strict=True)
    ]


class Recall(TypedDict):
    """A mean with its 95% bootstrap interval."""

    mean: float
    low: float
    high: float


class SettingRecall(TypedDict):
    """One retriever or variant in one cell: its recall, and its paired differences."""

    recall: Recall
    minus_dense: Recall
    minus_previous: Recall


Cell = dict[str, SettingRecall]
"""One dataset and granularity: every retriever and variant, by name."""


class Choice(TypedDict):
    """The rule's pick (module docstring), and what it read."""

    macro_recall: dict[str, float]
    """Each variant's mean recall over the cells."""
    worse_than_dense_in: dict[str, list[str]]
    """The cells (dataset/granularity) where a variant's paired interval lies below dense."""
    chosen: str


class _FusionCells(TypedDict):
    command: str
    code: CodeVersion
    k: int
    seed: int
    split: str
    questions: dict[str, int]
    variants: dict[str, dict[str, Any]]
    previous: str
    cells: dict[str, dict[str, Cell]]


class FusionReport(_FusionCells, total=False):
    """The JSON report (``fusion.json``): every cell, then the choice they lead to."""

    choice: Choice


def interval(values: list[float]) -> Recall:
    ci = bootstrap_ci(values)
    return {"mean": ci.mean, "low": ci.low, "high": ci.high}


def measure_cell(
    index: CorpusIndex, questions: list[Question], granularity: Granularity, k: int
) -> Cell:
    """Every retriever and variant at one dataset and granularity."""
    per_question = {
        str(r): recalls(index, questions, r, granularity, k)
        for r in (Retriever.DENSE, Retriever.BM25)
    }
    for variant in VARIANTS:
        index.config.fusion = variant.fusion
        per_question[variant.name] = recalls(index, questions, Retriever.HYBRID, granularity, k)
        log.info("  %s %s: %.3f", granularity, variant.name, _mean(per_question[variant.name]))
    dense, previous = per_question[str(Retriever.DENSE)], per_question[PREVIOUS]
    cell: Cell = {}
    for name, values in per_question.items():
        cell[name] = {
            "recall": interval(values),
            "minus_dense": interval([a - b for a, b in zip(values, dense, strict=True)]),
            "minus_previous": interval([a - b for a, b in zip(values, previous, strict=True)]),
        }
    return cell


def choose(cells: dict[str, dict[str, Cell]]) -> Choice:
    """The default by the rule of the module docstring, with each variant's macro mean."""
    flat = [cell for per_granularity in cells.values() for cell in per_granularity.values()]
    macro = {v.name: _mean([cell[v.name]["recall"]["mean"] for cell in flat]) for v in VARIANTS}
    worse = {
        v.name: [
            f"{dataset}/{granularity}"
            for dataset, per_granularity in cells.items()
            for granularity, cell in per_granularity.items()
            if cell[v.name]["minus_dense"]["high"] < 0
        ]
        for v in VARIANTS
    }
    eligible = [name for name in macro if not worse[name]]
    chosen = max(eligible or macro, key=lambda name: macro[name])
    return {"macro_recall": macro, "worse_than_dense_in": worse, "chosen": chosen}


def markdown(report: FusionReport) -> str:
    """One table of recall (95% CI) per granularity, then the paired differences."""
    cells, k = report["cells"], report["k"]
    names = [str(Retriever.DENSE), str(Retriever.BM25), *(v.name for v in VARIANTS)]
    lines = [f"Single-step recall@{k}, all sampled dev questions; 95% bootstrap intervals.", ""]
    for granularity in (str(g) for g in Granularity):
        datasets = [d for d in cells if granularity in cells[d]]
        if not datasets:
            continue
        lines += [f"### {granularity}", "", "| setting | " + " | ".join(datasets) + " |"]
        lines.append("|---" * (1 + len(datasets)) + "|")
        for name in names:
            row = [_cell(cells[d][granularity][name]["recall"]) for d in datasets]
            lines.append(f"| {name} | " + " | ".join(row) + " |")
        lines += ["", f"Paired difference from dense ({granularity}):", ""]
        lines += ["| setting | " + " | ".join(datasets) + " |", "|---" * (1 + len(datasets)) + "|"]
        for variant in VARIANTS:
            row = [
                _cell(cells[d][granularity][variant.name]["minus_dense"], signed=True)
                for d in datasets
            ]
            lines.append(f"| {variant.name} | " + " | ".join(row) + " |")
        lines.append("")
    choice = report["choice"]
    lines += [
        "### macro mean over the cells",
        "",
        "| setting | mean recall | worse than dense in |",
    ]
    lines.append("|---|---|---|")
    for name, mean in sorted(choice["macro_recall"].items(), key=lambda item: -item[1]):
        worse = ", ".join(choice["worse_than_dense_in"][name]) or "-"
        lines.append(f"| {name} | {mean:.4f} | {worse} |")
    lines += ["", f"Chosen by the rule: **{choice['chosen']}**."]
    return "\n".join(lines) + "\n"


def _cell(ci: Recall, signed: bool = False) -> str:
    sign = "+" if signed and ci["mean"] > 0 else ""
    return f"{sign}{ci['mean']:.3f} [{ci['low']:.3f}, {ci['high']:.3f}]"


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def run_fusion(config: EvalRetrievalConfig, command: str) -> FusionReport:
    """Every cell of every dataset (its index built or reused as eval_retrieval does), and the
    chosen default; the JSON report, ``command`` the line that ran it."""
    index_root = Path(config.index_root) if config.index_root else REPO_ROOT / "indexes"
    cells: dict[str, dict[str, Cell]] = {}
    sizes: dict[str, int] = {}
    for name in config.datasets:
        path = dataset_path(DatasetConfig(name=name), config.split)
        questions = load_questions(name, "normalized", path=path, split=config.split)
        directory = index_root / f"{name}-{config.split}"
        source = {"dataset": str(name), "split": config.split, "path": str(path)}
        build_index(questions, config.index, directory, source=source)
        index = CorpusIndex.load(directory, config.index)
        sample = sample_questions(questions, config.n, seed=config.seed)
        sizes[str(name)] = len(sample)
        log.info("%s: %d of %d questions, k=%d", name, len(sample), len(questions), config.k)
        cells[str(name)] = {
            str(g): measure_cell(index, sample, g, config.k) for g in index.granularities
        }
    report: FusionReport = {
        "command": command,
        "code": code_version(),
        "k": config.k,
        "seed": config.seed,
        "split": config.split,
        "questions": sizes,
        "variants": {v.name: dataclasses.asdict(v.fusion) for v in VARIANTS},
        "previous": PREVIOUS,
        "cells": cells,
    }
    report["choice"] = choose(cells)
    return report


def write_fusion_report(report: FusionReport, out: str | None) -> Path:
    """``out`` (default ``runs/eval_fusion.json``) as JSON, and its tables beside it as ``.md``."""
    path = write_report(report, out, "eval_fusion.json")
    path.with_suffix(".md").write_text(markdown(report))
    return path
