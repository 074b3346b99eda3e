"""Tests of grasp/bench/serve.py (scripts/bench_serve.py): request batches, the service command,
a whole minimal run.

The whole run starts the real service (scripts/serve_retrieval.py) in a subprocess over the
tiny index, so it is marked slow; it takes about 30 s on 2 idle cores.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grasp.bench import serve as bench
from grasp.config import BenchServeConfig
from grasp.paths import REPO_ROOT
from grasp.types import Retriever


def test_request_batches_cycle_through_the_queries():
    assert bench.request_batches(["a", "b", "c"], 4, 2) == [
        ["a", "b"],
        ["c", "a"],
        ["b", "c"],
        ["a", "b"],
    ]


def test_the_service_command_carries_the_service_settings_and_overrides():
    config = BenchServeConfig(service_overrides=["index=e5_gpu"])
    config.service.max_wait_ms = 5.0
    command = bench.service_command(config, Path("indexes/x"), 8123)
    assert command[1] == str(REPO_ROOT / "scripts" / "serve_retrieval.py")
    assert "index_dir=indexes/x" in command and "port=8123" in command
    assert "service.max_wait_ms=5.0" in command
    assert command[-1] == "index=e5_gpu"


@pytest.mark.slow
def test_a_minimal_run_checks_every_answer(tiny_index_dir, tiny_questions):
    config = BenchServeConfig(
        concurrency=[1, 3],
        requests=6,
        queries_per_request=2,
        retrievers=["dense", "bm25"],
        k=3,
        startup_timeout_s=1800,  # a bound for a loaded machine, not a measured time
    )
    queries = [q.question for q in tiny_questions]
    report = json.loads(json.dumps(bench.run_benchmark(config, tiny_index_dir, queries)))
    assert report["mismatches"] == 0
    assert report["responses_checked"] == 2 * 2 * 6
    rows = {(r["retriever"], r["concurrency"]): r for r in report["results"]}
    assert set(rows) == {("dense", 1), ("dense", 3), ("bm25", 1), ("bm25", 3)}
    for row in rows.values():
        assert row["queries"] == 12 and row["requests"] == 6
        for mode in ("in_process", "remote"):
            metrics = row[mode]
            assert metrics["qps"] > 0 and metrics["wall_s"] > 0
            assert 0 < metrics["p50_ms"] <= metrics["p95_ms"] <= metrics["p99_ms"]
    # One client at a time: every request is a batch alone, bitwise the in-process answer.
    assert rows[("dense", 1)]["exact"] == 6 and rows[("bm25", 1)]["exact"] == 6
    assert rows[("bm25", 3)]["exact"] == 6  # BM25 scores do not depend on the batch
    assert all(row["exact"] <= row["same_units"] <= 6 for row in rows.values())
    stats = report["service"]["stats"]
    assert stats["search_requests"] == 2 * (1 + 2 * 6)  # a warm-up request, then 2 levels
    assert stats["queries"] == 2 * stats["search_requests"]
    assert 1 <= stats["batches"] <= stats["search_requests"]
    assert report["service"]["index_dir"] == str(tiny_index_dir)
    table = bench.format_table(report)
    assert table.count("\n") == 1 + 4 and str(Retriever.DENSE) in table
