"""Tests of grasp/bench/retrieval.py (scripts/bench_retrieval.py): corpus and vector synthesis,
and a whole run at 1k + 2k.

The whole run encodes 1,000 real sentences with MiniLM, so it is marked slow; it takes about
15 s on 2 idle cores.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from grasp.bench import retrieval
from grasp.config import BenchRetrievalConfig, DatasetConfig, dataset_path
from grasp.corpus import SentenceCorpus, synthetic
from grasp.types import DatasetName


@pytest.fixture(scope="module")
def pool():
    paths = [dataset_path(DatasetConfig(name=name), "dev") for name in DatasetName]
    return synthetic.load_real_pool(paths, seed=0)


def test_real_pool_is_deduplicated_and_large(pool):
    sentences = [s for paragraph in pool.paragraphs for s in paragraph]
    assert len(sentences) == len(set(sentences)) == pool.num_sentences
    assert 55_000 < pool.num_sentences < 62_000
    assert all(s.strip() for s in sentences)
    assert len(pool.questions) == len(set(pool.questions)) > 1_000


def test_corpus_has_exact_size_real_first_then_spliced_real_words(pool):
    real = pool.num_sentences
    size = real + 3_000
    corpus = SentenceCorpus.from_questions(
        synthetic.as_questions(synthetic.corpus_paragraphs(pool, size, seed=0))
    )
    assert corpus.num_sentences == size
    texts = corpus.sentence_text.to_pylist()
    pooled = [s for paragraph in pool.paragraphs for s in paragraph]
    assert texts[:real] == pooled
    vocabulary = {word for sentence in pooled for word in sentence.split()}
    spliced = texts[real:]
    assert all(set(s.split()) <= vocabulary for s in spliced)
    assert len(set(spliced) - set(pooled)) > 0.95 * len(spliced)
    again = list(synthetic.corpus_paragraphs(pool, size, seed=0))
    assert [s for p in again for s in p.sentences] == texts


@pytest.mark.parametrize("method", ["mix", "tile"])
def test_corpus_vectors_keep_the_real_rows_and_are_unit_norm(method):
    rng = np.random.default_rng(1)
    base = rng.standard_normal((50, 64)).astype(np.float32)
    base /= np.linalg.norm(base, axis=1, keepdims=True)
    vectors = synthetic.corpus_vectors(
        base, 175, synthetic.VectorMethod(method), sigma=0.01, seed=0
    )
    assert vectors.shape == (175, 64) and vectors.dtype == np.float32
    np.testing.assert_array_equal(vectors[:50], base)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    cosine = np.sum(vectors[50:100] * base, axis=1)  # each synthetic row vs the row it came from
    assert np.all(cosine < 0.9999)
    if method == "tile":
        assert np.all(cosine > 0.99)
    else:  # 30-70% of its own row, the rest a random partner's (near-orthogonal in 64-d)
        assert 0.5 < cosine.mean() < 0.95
        assert cosine.mean() > np.sum(vectors[50:100] * np.roll(base, 1, axis=0), axis=1).mean()


@pytest.mark.slow
def test_benchmark_at_1k_and_2k_reports_every_metric(tmp_path):
    config = BenchRetrievalConfig(
        sizes=[1_000, 2_000],
        queries=32,
        single_queries=5,
        batch_repeats=1,
        rank_bm25_queries=5,
        work_dir=str(tmp_path),
    )
    config.index.granularities = ["sentence"]
    report = json.loads(json.dumps(retrieval.run_benchmark(config)))  # JSON-serializable as written
    assert report["sizes"] == [1_000, 2_000]
    assert set(report["results"]) == {"1000", "2000"}
    assert "spliced" in report["corpus_method"] and "w * e[i mod n]" in report["vector_method"]
    first, second = report["results"]["1000"], report["results"]["2000"]
    names = ("faiss_hnsw/recall@10", "faiss_hnsw/recall@10_synthetic_mix", "bm25/top10_agreement")
    for name in (*names, "faiss_hnsw/recall@10_synthetic_tile"):
        assert 0.0 <= first[name] <= 1.0
    assert first["faiss_hnsw/recall@10"] > 0.9  # real embeddings, tiny index
    assert first["corpus/sentences"] == 1_000 and second["corpus/sentences"] == 2_000
    for metrics in (first, second):
        for name in (
            "build/bm25s_sentences_per_s",
            "bm25s/batch_qps",
            "faiss_flat/batch_qps",
            "faiss_hnsw/single_p95_ms",
            "rank_bm25/single_mean_ms",
            "memory/rss_bytes_per_sentence",
            "memory/bm25s_disk_bytes",
            "bm25s_topk/argpartition_full_mean_ms",
            "bm25s_topk/positive_select_mean_ms",
            "bm25s_topk/nonzero_fraction",
        ):
            assert metrics[name] > 0, name
        assert metrics["memory/bytes_per_sentence"] > 384 * 4
    for name in ("build/encode_sentences_per_s", "dense_e2e/batch_qps", "dense_e2e/single_p50_ms"):
        assert first[name] > 0, name
    assert second["dense_e2e_est/batch_qps"] > 0
    assert report["bm25s_speedup_vs_rank_bm25"] > 0
    assert report["bm25s_speedup_size"] == 2_000
    targets = report["targets"]
    assert set(targets) == {
        "build_19k_sentence_index_s",
        "batched_semantic_search_qps",
        "bm25s_speedup_vs_rank_bm25",
        "exact_index_bytes_per_sentence",
    }
    assert all(isinstance(t["passed"], bool) and t["value"] > 0 for t in targets.values())
    assert list(tmp_path.iterdir()) == []  # the temporary index files are gone


def test_the_table_prints_metrics_by_size_then_the_targets():
    report = {
        "sizes": [1000, 20000],
        "results": {"1000": {"a/x": 1234.5, "b/yy_long_name": 0.123}, "20000": {"a/x": 12.34}},
        "targets": {
            "t1": {"value": None, "target": "< 60", "passed": False, "how": "h"},
            "t2": {"value": 5.0, "target": ">= 1", "passed": True, "how": "g"},
        },
        "bm25s_speedup_vs_rank_bm25": 31.2,
        "bm25s_speedup_size": 1000,
        "runtime_s": 12.3,
    }
    # The text scripts/bench_retrieval.py printed before its code moved to grasp/bench/.
    assert retrieval.table(report) == (
        "\nmetric                   1,000        20,000\n"
        "a/x                      1,234          12.3\n"
        "b/yy_long_name           0.123             -\n"
        "\ntargets:\n"
        "  FAIL  t1: n/a (target < 60; h)\n"
        "  PASS  t2: 5 (target >= 1; g)\n"
        "\nbm25s vs rank-bm25: 31.2x at 1000; total 12 s"
    )
