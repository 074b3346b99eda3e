"""Tests of grasp/bench/report.py: table cells, metric tables, and the report tail."""

from __future__ import annotations

import json
import logging

import pytest

from grasp.bench.report import format_value, metric_columns, publish


@pytest.mark.parametrize(
    ("value", "cell"),
    [
        (1234567.8, "1,234,568"),
        (1000.0, "1,000"),
        (-2500.0, "-2,500"),
        (999.94, "999.9"),
        (10.0, "10.0"),
        (9.876, "9.88"),
        (0.0012345, "0.00123"),
        (0.0, "0"),
    ],
)
def test_a_cell_has_separators_from_1000_one_decimal_from_10_else_three_digits(value, cell):
    assert format_value(value) == cell


def test_metric_columns_sort_the_rows_and_mark_missing_cells():
    lines = metric_columns([{"b/x": 12.5, "a": 1.0}, {"b/x": 2000.0}], ["1,000", "2,000"], 8)
    # Names padded to the longest plus 2 (5 here, which "metric" overflows); cells of 8.
    assert lines == [
        "\nmetric" + "   1,000" + "   2,000",
        "a    " + "       1" + "       -",
        "b/x  " + "    12.5" + "   2,000",
    ]


def test_publish_writes_the_report_then_prints_its_table_and_logs_the_path(
    tmp_path, capsys, caplog
):
    out = tmp_path / "deeper" / "report.json"
    log = logging.getLogger("bench_test")
    with caplog.at_level(logging.INFO, logger="bench_test"):
        path = publish({"a": 1, "when": tmp_path}, str(out), "unused.json", "| t |", log)
    assert path == out
    assert json.loads(out.read_text()) == {"a": 1, "when": str(tmp_path)}  # default=str
    assert capsys.readouterr().out == "| t |\n"
    assert caplog.messages == [f"wrote {out}"]
