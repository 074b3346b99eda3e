"""Tests of grasp/bench/index_build.py (scripts/bench_build.py): the RSS sampler, the
extrapolation, and a whole run at 300 + 600 sentences.

The whole run encodes 900 real sentences with MiniLM, each size in its own process, so it is
marked slow.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from grasp.bench import index_build as bench
from grasp.config import BenchBuildConfig


def test_sampler_attributes_memory_to_the_stage_that_allocated_it():
    with bench.RssSampler(interval_s=0.01) as sampler:
        sampler.enter("allocate")
        block = np.ones(25_000_000)  # 200 MB, every page written
        sampler.enter("idle")
        del block
    assert sampler.growth("allocate") >= 190_000_000
    assert sampler.growth("idle") < 50_000_000
    assert sampler.peak_rss["allocate"] >= sampler.start_rss["allocate"] + 190_000_000


def test_extrapolation_continues_the_least_squares_line_over_the_sizes():
    results = {
        100: {"a_s": 1.0, "b_bytes": 1_000.0},
        200: {"a_s": 3.0, "b_bytes": 1_200.0, "recall@10": 0.9},
        300: {"a_s": 2.0, "b_bytes": 1_400.0, "recall@10": 0.8, "new_s": 1.0},
    }
    estimates = bench.extrapolate(results, [100, 200, 300], target=1_000)
    # a_s: mean 2 at 200, slope (-100 x -1 + 100 x 0) / 20,000 = 0.005, so 2 + 0.005 x 800 = 6;
    # b_bytes lies on a line: 1,200 + 2 x 800. new_s has one size, recall@10 is no _s or _bytes.
    assert estimates == pytest.approx({"a_s": 6.0, "b_bytes": 2_800.0})
    assert bench.extrapolate({300: results[300]}, [300], target=1_000) == {}


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"sizes": [600, 300]}, "ascending"),
        ({"storages": ["SQfp16", "Flat"]}, "storages must start with 'Flat'"),
    ],
)
def test_bad_settings_are_refused_before_any_work(fields, message):
    with pytest.raises(ValueError, match=message):
        bench.run_benchmark(BenchBuildConfig(**fields))


@pytest.mark.slow
def test_benchmark_at_300_and_600_reports_time_memory_disk_and_recall(tmp_path):
    config = BenchBuildConfig(
        sizes=[300, 600],
        storages=["Flat", "SQfp16", "PQ8x4"],
        queries=20,
        bm25_sizes=[2_000],
        sample_interval_s=0.01,
        work_dir=str(tmp_path),
    )
    config.index.shard_size = 128  # several shards and BM25 batches even at this size
    report = json.loads(json.dumps(bench.run_benchmark(config)))  # JSON-serializable as written
    assert report["sizes"] == [300, 600] and set(report["results"]) == {"300", "600"}
    assert report["queries"]["count"] == 20 and "spliced" in report["corpus_method"]
    for size, metrics in report["results"].items():
        assert metrics["corpus/sentences"] == int(size)
        for stage in ("corpus", "sentence/encode", "sentence/dense_index", "sentence/bm25_index"):
            assert metrics[f"time/{stage}_s"] > 0, stage
            assert metrics[f"rss/{stage}/peak_bytes"] >= metrics[f"rss/{stage}/growth_bytes"] >= 0
        assert metrics["throughput/encode_sentences_per_s"] > 0
        # Each size runs in its own process: its peak is its own, above its starting RSS.
        assert metrics["process/peak_rss_bytes"] >= metrics["rss/build_peak_bytes"]
        assert metrics["rss/build_peak_bytes"] > metrics["rss/start_bytes"] > 0
        assert metrics["storage/Flat/recall@10"] == 1.0  # the reference against itself
        assert metrics["storage/SQfp16/recall@10"] >= 0.95
        assert 0.0 < metrics["storage/PQ8x4/recall@10"] <= 1.0
        flat = metrics["storage/Flat/disk_bytes_per_sentence"]
        assert flat > 384 * 4 > metrics["storage/SQfp16/disk_bytes_per_sentence"] > 384 * 2
        assert 384 * 4 < metrics["disk/embeddings_bytes_per_sentence"] < 384 * 4 + 1
        assert metrics["disk/corpus_bytes_per_sentence"] > 0
        assert metrics["bm25/entries_per_sentence"] > 3 and metrics["bm25/vocabulary"] > 100
        for way in ("streamed", "in_memory"):
            assert metrics[f"bm25_fresh_process/{way}/peak_growth_bytes"] > 0
            assert metrics[f"bm25_fresh_process/{way}/build_s"] > 0
        for storage in config.storages:
            assert metrics[f"storage/{storage}/build_s"] > 0
            assert metrics[f"storage/{storage}/search_ms_per_query"] > 0
    larger = report["results"]["600"]
    assert set(report["extrapolated"]) == {n for n in larger if n.endswith(("_s", "_bytes"))}
    assert report["extrapolate_to"] == 3_600_000
    (bm25_only,) = report["bm25_only"].values()
    assert bm25_only["corpus/sentences"] == 2_000
    assert bm25_only["corpus/memory_bytes_per_sentence"] > 12
    for way in ("streamed", "in_memory"):
        assert bm25_only[f"bm25_fresh_process/{way}/peak_growth_bytes"] > 0
    assert list(tmp_path.iterdir()) == []  # the temporary index folders are gone


def test_the_table_prints_sizes_the_extrapolation_then_bm25_only():
    report = {
        "sizes": [300, 600],
        "results": {"300": {"time/x_s": 1.5, "disk/y_bytes": 2000.0}, "600": {"time/x_s": 2.5}},
        "extrapolated": {"time/x_s": 100.0},
        "extrapolate_to": 3_600_000,
        "bm25_only": {"2000": {"z_s": 0.5}},
        "runtime_s": 3.0,
    }
    # The text scripts/bench_build.py printed before its code moved to grasp/bench/.
    assert bench.table(report) == (
        "\nmetric                     300             600      ~3,600,000\n"
        "disk/y_bytes             2,000               -               -\n"
        "time/x_s                   1.5             2.5           100.0\n"
        "\n(~ column: the least-squares line through the sizes, continued)\n"
        "\nmetric           2,000\n"
        "z_s               0.5\n"
        "\n(BM25 only: nothing encoded at these sizes)\n"
        "total 3 s"
    )
