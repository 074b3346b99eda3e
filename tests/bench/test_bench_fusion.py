"""grasp/bench/fusion.py (scripts/eval_fusion.py): one cell measured on the tiny index, and the
rule for the default."""

from __future__ import annotations

import pytest

from grasp.bench import fusion
from grasp.corpus import CorpusIndex
from grasp.eval.single_step import single_step_recall
from grasp.types import Granularity, Retriever


def test_a_cell_holds_every_setting_with_paired_differences(tiny_index_dir, tiny_questions):
    index = CorpusIndex.load(tiny_index_dir)  # its own: measuring changes index.config.fusion
    questions = list(tiny_questions)
    cell = fusion.measure_cell(index, questions, Granularity.PARAGRAPH, k=2)
    assert list(cell) == ["dense", "bm25", *(v.name for v in fusion.VARIANTS)]
    for retriever in (Retriever.DENSE, Retriever.BM25):
        expected = single_step_recall(index, questions, retriever, Granularity.PARAGRAPH, k=2)
        assert cell[str(retriever)]["recall"]["mean"] == pytest.approx(expected.recall)
    assert cell["dense"]["minus_dense"] == {"mean": 0.0, "low": 0.0, "high": 0.0}
    assert cell[fusion.PREVIOUS]["minus_previous"] == {"mean": 0.0, "low": 0.0, "high": 0.0}
    for name, entry in cell.items():
        assert 0.0 <= entry["recall"]["low"] <= entry["recall"]["mean"] <= 1.0, name


def _entry(mean: float, minus_dense_high: float) -> dict:
    ci = {"mean": mean, "low": mean, "high": mean}
    return {"recall": ci, "minus_dense": {"mean": 0.0, "low": -1.0, "high": minus_dense_high}}


def test_the_default_is_the_best_macro_mean_never_worse_than_dense():
    def cell(best_high: float) -> dict:
        entries = {v.name: _entry(0.50, 0.1) for v in fusion.VARIANTS}
        entries["score d20"] = _entry(0.70, best_high)  # the best mean...
        entries["rrf d10"] = _entry(0.60, 0.1)
        return entries

    cells = {"a": {"sentence": cell(0.1)}, "b": {"paragraph": cell(-0.01)}}  # ...worse in b
    choice = fusion.choose(cells)
    assert choice["worse_than_dense_in"]["score d20"] == ["b/paragraph"]
    assert choice["macro_recall"]["score d20"] == pytest.approx(0.70)
    assert choice["chosen"] == "rrf d10"


def test_the_tables_name_every_setting(tiny_index_dir, tiny_questions):
    index = CorpusIndex.load(tiny_index_dir)
    cells = {
        "tiny": {
            "sentence": fusion.measure_cell(index, list(tiny_questions), Granularity.SENTENCE, 2)
        }
    }
    text = fusion.markdown({"cells": cells, "k": 2, "choice": fusion.choose(cells)})
    assert text.startswith("Single-step recall@2")
    assert "### sentence" in text and "### paragraph" not in text
    for name in ("dense", "bm25", *(v.name for v in fusion.VARIANTS)):
        assert f"\n| {name} | " in text
    assert f"Chosen by the rule: **{fusion.choose(cells)['chosen']}**." in text
