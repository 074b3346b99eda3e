"""The retrieval benchmark: build speed, query latency, recall and memory by corpus size.

``run_benchmark(config)`` measures every size and returns the JSON report; ``table(report)``
is its printed table. ``scripts/bench_retrieval.py`` is the entry point, and its docstring says
what is measured, on which corpus and vectors, and how to read the timings.
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
import logging
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypedDict

import bm25s
import faiss
import numpy as np
import psutil
import Stemmer
import torch
from rank_bm25 import BM25Okapi

from grasp.bench.config import BenchRetrievalConfig
from grasp.bench.measure import latency_metrics, recall_at_k, time_batch, time_each
from grasp.bench.report import Machine, format_value, machine, metric_columns
from grasp.corpus import CorpusIndex, DenseIndexConfig, KeywordIndex, SentenceCorpus, build_index
from grasp.corpus.bm25 import top_positive
from grasp.corpus.build import EMBEDDINGS_FILE
from grasp.corpus.dense import build_dense_index, configure_search, flat_vectors, save_dense_index
from grasp.corpus.synthetic import (
    CORPUS_METHOD,
    VECTOR_METHODS,
    RealPool,
    VectorMethod,
    as_questions,
    corpus_paragraphs,
    corpus_vectors,
    load_real_pool,
)
from grasp.data.config import DatasetConfig, dataset_path
from grasp.paths import REPO_ROOT
from grasp.threads import available_cores
from grasp.types import Granularity, Retriever

log = logging.getLogger("bench_retrieval")

TARGET_BUILD_SENTENCES = 19_000
"""Sentences of the index whose build time has a target (the per-question corpus scale)."""
_RSS_PROBE = """
import json, sys
from pathlib import Path
import faiss, psutil, pyarrow
from grasp.corpus import SentenceCorpus
warm_up = SentenceCorpus.load(Path(sys.argv[1]))
before = psutil.Process().memory_info().rss
corpus, index = SentenceCorpus.load(Path(sys.argv[2])), faiss.read_index(sys.argv[3])
pyarrow.default_memory_pool().release_unused()
print(json.dumps({"rss_growth_bytes": psutil.Process().memory_info().rss - before}))
"""
"""Run in a fresh process: RSS growth from loading an exact index and its corpus, once Arrow has
returned its freed decoding buffers; a tiny corpus is loaded first so that the Parquet reader's
start-up is not counted."""


@dataclass
class RealIndexRun:
    """What the real index at the first size hands to the measurements at every size."""

    metrics: dict[str, float]
    """Encoding, build_index and end-to-end dense search figures of the first size."""
    query_vectors: np.ndarray
    """[num queries, dim] float32 real query embeddings."""
    base_vectors: np.ndarray
    """[first size, dim] float32 real document embeddings, tiled for larger sizes."""


# ---------------------------------------------------------------------- measurements


def bench_real_index(
    config: BenchRetrievalConfig, pool: RealPool, queries: list[str], work_dir: Path
) -> RealIndexRun:
    """Build the real index at the first size with build_index and search it end to end."""
    size = config.sizes[0]
    questions = list(as_questions(corpus_paragraphs(pool, size, config.seed)))
    directory = work_dir / "real-index"
    log.info("[%d] build_index: encode with %s, Flat, bm25s", size, config.index.encoder.model)
    manifest = build_index(questions, config.index, directory, source={"benchmark": "retrieval"})
    timings = manifest.timings
    metrics = {
        "batch/queries": min(config.queries, len(queries)),
        "build/encode_sentences_per_s": size / timings["sentence/encode"],
        "build/build_index_total_s": timings["total"],
        "build/build_index_sentences_per_s": size / timings["total"],
    }
    index = CorpusIndex.load(directory, config.index)
    batch = queries[: config.queries]
    index.search(batch[:8], Retriever.DENSE, k=5)  # loads the encoder and warms it up
    single = time_each(
        lambda q: index.search([q], Retriever.DENSE, k=5), queries[: config.single_queries]
    )
    metrics.update(latency_metrics("dense_e2e", single))
    seconds = time_batch(lambda: index.search(batch, Retriever.DENSE, k=5), config.batch_repeats)
    metrics["dense_e2e/batch_qps"] = len(batch) / seconds
    seconds = time_batch(lambda: index.encoder.encode_queries(batch), config.batch_repeats)
    metrics["query_encode/batch_qps"] = len(batch) / seconds
    query_vectors = index.encoder.encode_queries(queries)
    base = np.load(directory / Granularity.SENTENCE.value / EMBEDDINGS_FILE)
    log.info("[%d] dense end to end: %.0f queries/s batched", size, metrics["dense_e2e/batch_qps"])
    return RealIndexRun(metrics, query_vectors, base)


def bench_bm25(
    corpus: SentenceCorpus, queries: list[str], config: BenchRetrievalConfig, metrics: dict
) -> KeywordIndex:
    """Build bm25s over the corpus texts and time its searches."""
    texts = corpus.unit_texts(Granularity.SENTENCE, config.index.prepend_title)
    start = time.perf_counter()
    keyword = KeywordIndex.build(texts, config.index.bm25)
    metrics["build/bm25s_sentences_per_s"] = corpus.num_sentences / (time.perf_counter() - start)
    batch = queries[: config.queries]
    keyword.search(batch[:4], config.k)
    single = time_each(lambda q: keyword.search([q], config.k), queries[: config.single_queries])
    metrics.update(latency_metrics("bm25s", single))
    seconds = time_batch(lambda: keyword.search(batch, config.k), config.batch_repeats)
    metrics["bm25s/batch_qps"] = len(batch) / seconds
    bench_bm25_topk(keyword, queries[: config.single_queries], config.k, metrics)
    return keyword


def bench_bm25_topk(keyword: KeywordIndex, queries: list[str], k: int, metrics: dict) -> None:
    """The parts of one BM25 query on their own: scoring, and the top-k selection two ways.

    ``argpartition_full`` is bm25s's selection (``np.argpartition`` over every unit's score);
    ``positive_select`` is ``top_positive``, what ``KeywordIndex.search`` runs. BM25 score
    arrays are mostly one repeated 0, on which numpy's AVX-512 partition is ~20x slower than
    on random values: a search that went back to the full-array selection shows here first.
    """
    k = min(k, keyword.num_units)
    arrays = [keyword.query_scores(tokens) for tokens in keyword.tokenize_queries(queries)]
    scoring = time_each(keyword.query_scores, keyword.tokenize_queries(queries))
    full = time_each(lambda scores: np.argpartition(scores, -k), arrays)
    positive = time_each(lambda scores: top_positive(scores, k), arrays)
    metrics["bm25s_topk/scoring_mean_ms"] = 1000 * float(np.mean(scoring))
    metrics["bm25s_topk/argpartition_full_mean_ms"] = 1000 * float(np.mean(full))
    metrics["bm25s_topk/positive_select_mean_ms"] = 1000 * float(np.mean(positive))
    metrics["bm25s_topk/nonzero_fraction"] = float(np.mean([(a > 0).mean() for a in arrays]))


def bench_rank_bm25(
    corpus: SentenceCorpus,
    keyword: KeywordIndex,
    queries: list[str],
    config: BenchRetrievalConfig,
    metrics: dict,
) -> None:
    """rank-bm25 (BM25Okapi) on the same tokens as bm25s: per-query speed and top-k agreement."""
    settings = config.index.bm25
    stemmer = Stemmer.Stemmer(settings.stemmer) if settings.stemmer else None
    tokenize = functools.partial(
        bm25s.tokenize, stopwords=settings.stopwords or None, stemmer=stemmer,
        return_ids=False, show_progress=False,
    )  # fmt: skip
    batches = corpus.unit_texts(Granularity.SENTENCE, config.index.prepend_title)
    texts = [text for batch in batches for text in batch]
    start = time.perf_counter()
    okapi = BM25Okapi(tokenize(texts))
    metrics["build/rank_bm25_sentences_per_s"] = len(texts) / (time.perf_counter() - start)
    del texts
    k = config.k
    sample = queries[: config.rank_bm25_queries]
    ranked: list[np.ndarray] = []

    def rank_search(query: str) -> None:
        scores = okapi.get_scores(tokenize([query])[0])
        top = np.argsort(-scores, kind="stable")[:k]
        ranked.append(top[scores[top] > 0])

    rank_seconds = time_each(rank_search, sample)
    bm25s_seconds = time_each(lambda q: keyword.search([q], k), sample)
    agreement = []
    for query, theirs in zip(sample, ranked, strict=True):
        ours = keyword.search([query], k)[0][0]
        ours = ours[ours >= 0]
        agreement.append(len(set(ours.tolist()) & set(theirs.tolist())) / max(len(ours), 1))
    metrics.update(latency_metrics("rank_bm25", rank_seconds))
    speedup = float(np.mean(rank_seconds) / np.mean(bm25s_seconds))
    metrics["bm25/rank_bm25_vs_bm25s_speedup"] = speedup
    metrics[f"bm25/top{k}_agreement"] = float(np.mean(agreement))


def _bench_searcher(
    name: str, index: faiss.Index, query_vectors: np.ndarray, config: BenchRetrievalConfig, metrics
) -> None:
    single = time_each(
        lambda v: index.search(v[None], config.k), query_vectors[: config.single_queries]
    )
    metrics.update(latency_metrics(name, single))
    batch = query_vectors[: config.queries]
    seconds = time_batch(lambda: index.search(batch, config.k), config.batch_repeats)
    metrics[f"{name}/batch_qps"] = len(batch) / seconds


def build_hnsw(vectors: np.ndarray, config: BenchRetrievalConfig) -> faiss.Index:
    hnsw = DenseIndexConfig(factory=config.hnsw_factory, hnsw_ef_search=config.hnsw_ef_search)
    return configure_search(build_dense_index(vectors, hnsw), hnsw)


def bench_faiss(
    run: RealIndexRun, size: int, config: BenchRetrievalConfig, metrics: dict
) -> faiss.Index:
    """Build exact Flat and HNSW over ``size`` vectors, time both, and HNSW recall vs Flat."""
    method = VectorMethod(config.vector_method)
    vectors = corpus_vectors(run.base_vectors, size, method, config.perturbation_sigma, config.seed)
    start = time.perf_counter()
    flat = build_dense_index(vectors, DenseIndexConfig(factory="Flat"))
    metrics["build/faiss_flat_s"] = time.perf_counter() - start
    del vectors  # the Flat index holds its own copy; HNSW reads it from there
    log.info("[%d] %s build", size, config.hnsw_factory)
    start = time.perf_counter()
    hnsw = build_hnsw(flat_vectors(flat), config)
    metrics["build/faiss_hnsw_s"] = time.perf_counter() - start
    _bench_searcher("faiss_flat", flat, run.query_vectors, config, metrics)
    _bench_searcher("faiss_hnsw", hnsw, run.query_vectors, config, metrics)
    batch = run.query_vectors[: config.queries]
    metrics[f"faiss_hnsw/recall@{config.k}"] = recall_at_k(
        hnsw.search(batch, config.k)[1], flat.search(batch, config.k)[1]
    )
    return flat


def synthetic_recall(
    run: RealIndexRun, config: BenchRetrievalConfig, method: VectorMethod
) -> float:
    """HNSW recall at the first size on vectors synthesized as at the largest size.

    As many synthetic rows per real one as the largest size has: the first size's vectors are
    made from a 1/copies sample of its real embeddings.
    """
    size, copies = config.sizes[0], config.sizes[-1] // config.sizes[0]
    base = run.base_vectors[: max(1, size // copies)]
    vectors = corpus_vectors(base, size, method, config.perturbation_sigma, config.seed)
    flat, hnsw = (
        build_dense_index(vectors, DenseIndexConfig(factory="Flat")),
        build_hnsw(vectors, config),
    )
    batch = run.query_vectors[: config.queries]
    return recall_at_k(hnsw.search(batch, config.k)[1], flat.search(batch, config.k)[1])


def bench_memory(
    corpus: SentenceCorpus, flat: faiss.Index, keyword: KeywordIndex, work_dir: Path, metrics: dict
) -> None:
    """Bytes per sentence of the exact index with its corpus, counted and as RSS; bm25s size."""
    size = corpus.num_sentences
    vector_bytes = flat.ntotal * flat.d * np.dtype(np.float32).itemsize
    metrics["memory/flat_vector_bytes"] = vector_bytes
    metrics["memory/corpus_bytes"] = corpus.nbytes()
    metrics["memory/bytes_per_sentence"] = (vector_bytes + corpus.nbytes()) / size
    directory = work_dir / f"memory-{size}"
    corpus.save(directory / "corpus")
    tiny = SentenceCorpus.from_questions(as_questions([corpus.paragraph(0)]))
    tiny.save(directory / "warm-up")
    save_dense_index(flat, directory / "dense.faiss")
    paths = [str(directory / name) for name in ("warm-up", "corpus", "dense.faiss")]
    command = [sys.executable, "-c", _RSS_PROBE, *paths]
    probe = subprocess.run(command, capture_output=True, text=True, cwd=REPO_ROOT)
    if probe.returncode != 0:
        raise RuntimeError(f"memory probe failed ({probe.returncode}): {probe.stderr[-2000:]}")
    growth = json.loads(probe.stdout.strip().splitlines()[-1])["rss_growth_bytes"]
    metrics["memory/rss_bytes_per_sentence"] = growth / size
    files = keyword.save(directory / "bm25")
    metrics["memory/bm25s_disk_bytes"] = sum(path.stat().st_size for path in files)
    arrays = [v for v in keyword.retriever.scores.values() if isinstance(v, np.ndarray)]
    metrics["memory/bm25s_array_bytes"] = sum(a.nbytes for a in arrays)
    shutil.rmtree(directory)


def bench_size(
    size: int, pool: RealPool, run: RealIndexRun, config: BenchRetrievalConfig, work_dir: Path
) -> dict[str, float]:
    """Every measurement at one corpus size."""
    queries = pool.questions
    started = time.perf_counter()
    corpus = SentenceCorpus.from_questions(as_questions(corpus_paragraphs(pool, size, config.seed)))
    metrics: dict[str, float] = {
        "corpus/sentences": corpus.num_sentences,
        "corpus/paragraphs": corpus.num_paragraphs,
        "corpus/real_fraction": min(size, pool.num_sentences) / size,
        "corpus/build_s": time.perf_counter() - started,
    }
    log.info("[%d] corpus ready (%.1f s); bm25s", size, metrics["corpus/build_s"])
    keyword = bench_bm25(corpus, queries, config, metrics)
    if size <= config.rank_bm25_max_size:
        log.info("[%d] rank-bm25 on %d queries", size, config.rank_bm25_queries)
        bench_rank_bm25(corpus, keyword, queries, config, metrics)
    log.info("[%d] FAISS Flat vectors", size)
    flat = bench_faiss(run, size, config, metrics)
    if size == config.sizes[0]:
        metrics.update(run.metrics)
        if len(config.sizes) > 1:
            for method in VectorMethod:
                recall = synthetic_recall(run, config, method)
                metrics[f"faiss_hnsw/recall@{config.k}_synthetic_{method}"] = recall
    log.info("[%d] memory", size)
    bench_memory(corpus, flat, keyword, work_dir, metrics)
    metrics["process/rss_bytes"] = psutil.Process().memory_info().rss
    metrics["process/peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    metrics["process/elapsed_s"] = time.perf_counter() - started
    log.info("[%d] done in %.1f s", size, metrics["process/elapsed_s"])
    return metrics


def add_dense_estimates(results: dict[int, dict[str, float]], sizes: Sequence[int]) -> None:
    """End-to-end dense search beyond the first size: measured there, with the Flat search swapped.

    estimate(size) = e2e(first) - flat(first) + flat(size), per query and per batched query.
    """
    first = results[sizes[0]]
    for size in sizes[1:]:
        here = results[size]
        extra_ms = here["faiss_flat/single_mean_ms"] - first["faiss_flat/single_mean_ms"]
        here["dense_e2e_est/single_mean_ms"] = first["dense_e2e/single_mean_ms"] + extra_ms
        per_query = 1 / first["dense_e2e/batch_qps"] - 1 / first["faiss_flat/batch_qps"]
        here["dense_e2e_est/batch_qps"] = 1 / (per_query + 1 / here["faiss_flat/batch_qps"])


def speedup_size(results: dict[int, dict[str, float]], sizes: Sequence[int]) -> int | None:
    """The largest size where both bm25s and rank-bm25 ran, or None."""
    both = [size for size in sizes if "bm25/rank_bm25_vs_bm25s_speedup" in results[size]]
    return max(both) if both else None


@dataclass
class Target:
    """One target of the retrieval layer and how the benchmark checks it."""

    value: float | None
    """The measured (or estimated, see ``how``) figure; None when it was not measured."""
    target: str
    passed: bool
    how: str
    """Where the value comes from."""


def targets(results: dict[int, dict[str, float]], sizes: Sequence[int]) -> dict[str, Target]:
    """The retrieval layer's targets, each with its measured value and pass/fail."""
    first, last = results[sizes[0]], results[sizes[-1]]
    build_s = TARGET_BUILD_SENTENCES / first["build/build_index_sentences_per_s"]
    qps = first["dense_e2e/batch_qps"]
    both = speedup_size(results, sizes)
    speedup = results[both]["bm25/rank_bm25_vs_bm25s_speedup"] if both else None
    memory, rss = last["memory/bytes_per_sentence"], last["memory/rss_bytes_per_sentence"]
    return {
        "build_19k_sentence_index_s": Target(
            build_s, "< 60", build_s < 60,
            f"{TARGET_BUILD_SENTENCES} / build_index sentences/s at {sizes[0]} (corpus, MiniLM "
            "bf16 encoding incl. model load, FAISS Flat, bm25s, files and checksums)",
        ),
        "batched_semantic_search_qps": Target(
            qps, ">= 400", qps >= 400,
            f"CorpusIndex.search of {first['batch/queries']:.0f} queries in one call, "
            f"dense, incl. query encoding, at {sizes[0]}",
        ),
        "bm25s_speedup_vs_rank_bm25": Target(
            speedup, ">= 30", speedup is not None and speedup >= 30,
            f"mean per-query latency ratio at {both}, the largest size where both ran",
        ),
        "exact_index_bytes_per_sentence": Target(
            memory, "< 2048", memory < 2048,
            f"Flat float32 vectors + SentenceCorpus.nbytes(), at {sizes[-1]}; RSS growth of a "
            f"fresh process loading both: {rss:.0f} bytes/sentence (allocator and reader "
            "overheads included)",
        ),
    }  # fmt: skip


# ---------------------------------------------------------------------- report


class RetrievalQueries(TypedDict):
    source: str
    batch: int
    single: int


class RetrievalReport(TypedDict):
    """The benchmark's JSON report: per size, the searches' metrics (``bench_size``), and
    the targets they are held to."""

    sizes: list[int]
    results: dict[str, dict[str, float]]
    targets: dict[str, dict[str, Any]]
    bm25s_speedup_vs_rank_bm25: float | None
    bm25s_speedup_size: int | None
    corpus_method: str
    vector_method: str
    perturbation_sigma: float
    real_sentences: int
    real_paragraphs: int
    queries: RetrievalQueries
    environment: Machine
    config: dict[str, Any]
    runtime_s: float


def table(report: RetrievalReport) -> str:
    """Each metric as a row, each size as a column, then the targets."""
    sizes = report["sizes"]
    results = [report["results"][str(size)] for size in sizes]
    lines = metric_columns(results, [f"{size:,}" for size in sizes], cell_width=14)
    lines.append("\ntargets:")
    for name, target in report["targets"].items():
        value = "n/a" if target["value"] is None else format_value(target["value"])
        verdict = "PASS" if target["passed"] else "FAIL"
        lines.append(f"  {verdict}  {name}: {value} (target {target['target']}; {target['how']})")
    speedup, size = report["bm25s_speedup_vs_rank_bm25"], report["bm25s_speedup_size"]
    lines.append(
        f"\nbm25s vs rank-bm25: {speedup or 0:.1f}x at {size}; total {report['runtime_s']:.0f} s"
    )
    return "\n".join(lines)


def run_benchmark(config: BenchRetrievalConfig) -> RetrievalReport:
    """Run every measurement at every size; returns the JSON report."""
    sizes = list(config.sizes)
    if not sizes or sizes != sorted(sizes) or sizes[0] < 1:
        raise ValueError(f"sizes must be positive and ascending, got {sizes}")
    VectorMethod(config.vector_method)  # fails early, naming the bad value
    started, load_before = time.perf_counter(), os.getloadavg()
    cores = available_cores()
    torch.set_num_threads(max(cores, torch.get_num_threads()))
    if load_before[0] > 0.5 * cores:
        log.warning(
            "load average %.1f on %d cores: timings will be distorted", load_before[0], cores
        )
    paths = [dataset_path(DatasetConfig(name=name), config.split) for name in config.datasets]
    pool = load_real_pool(paths, config.seed)
    queries = pool.questions[: max(config.queries, config.single_queries, config.rank_bm25_queries)]
    log.info("%d real sentences, %d questions", pool.num_sentences, len(pool.questions))
    with tempfile.TemporaryDirectory(dir=config.work_dir, prefix="bench-retrieval-") as tmp:
        run = bench_real_index(config, pool, queries, Path(tmp))
        results = {size: bench_size(size, pool, run, config, Path(tmp)) for size in sizes}
    add_dense_estimates(results, sizes)
    targets_ = targets(results, sizes)
    return {
        "sizes": sizes,
        "results": {str(size): metrics for size, metrics in results.items()},
        "targets": {name: asdict(target) for name, target in targets_.items()},
        "bm25s_speedup_vs_rank_bm25": targets_["bm25s_speedup_vs_rank_bm25"].value,
        "bm25s_speedup_size": speedup_size(results, sizes),
        "corpus_method": CORPUS_METHOD,
        "vector_method": VECTOR_METHODS[VectorMethod(config.vector_method)],
        "perturbation_sigma": config.perturbation_sigma,
        "real_sentences": pool.num_sentences,
        "real_paragraphs": len(pool.paragraphs),
        "queries": {
            "source": "real dev questions, de-duplicated, shuffled (seed)",
            "batch": len(queries[: config.queries]),
            "single": len(queries[: config.single_queries]),
        },
        "environment": machine(load_before, {"rank-bm25": importlib.metadata.version("rank-bm25")}),
        "config": asdict(config),
        "runtime_s": time.perf_counter() - started,
    }
