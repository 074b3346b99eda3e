"""The index-build benchmark: time and memory per stage of the streaming build as the corpus
grows, and what each dense storage costs in disk and recall.

``run_benchmark(config)`` measures every size, each in a fresh Python process
(``measure_in_fresh_process``), and returns the JSON report; ``table(report)`` is its printed
table. ``scripts/bench_build.py`` is the entry point, and its docstring says what is measured.
"""

from __future__ import annotations

import json
import logging
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, TypedDict

import numpy as np
import psutil
from omegaconf import OmegaConf

from grasp.bench.config import BenchBuildConfig
from grasp.bench.measure import recall_at_k
from grasp.bench.report import Machine, machine, metric_columns
from grasp.corpus import DenseEncoder, IndexConfig, KeywordIndex, SentenceCorpus, build_index
from grasp.corpus.build import BM25_DIR, DENSE_FILE, EMBEDDINGS_FILE
from grasp.corpus.dense import configure_search, load_dense_index
from grasp.corpus.synthetic import (
    CORPUS_METHOD,
    RealPool,
    as_questions,
    corpus_paragraphs,
    load_real_pool,
)
from grasp.data.config import DatasetConfig, dataset_path
from grasp.paths import REPO_ROOT
from grasp.structured import to_dataclass
from grasp.types import Granularity

log = logging.getLogger("bench_build")

_BM25_PROBE = """
import json, resource, sys, time
from pathlib import Path
import bm25s, psutil, Stemmer
from grasp.corpus import BM25Config, KeywordIndex, SentenceCorpus
from grasp.types import Granularity
corpus = SentenceCorpus.load(Path(sys.argv[1]))
settings = json.loads(sys.argv[3])
prepend_title = settings.pop("prepend_title")
config = BM25Config(**settings)
batches = corpus.unit_texts(Granularity.SENTENCE, prepend_title, batch_size=50_000)
before = psutil.Process().memory_info().rss
try:  # restart the kernel's peak-RSS mark (VmHWM), so that loading the corpus is not counted
    Path("/proc/self/clear_refs").write_text("5")
except OSError:
    pass
start = time.perf_counter()
if sys.argv[2] == "streamed":
    index = KeywordIndex.build(batches, config)
else:
    texts = [text for batch in batches for text in batch]
    stemmer = Stemmer.Stemmer(config.stemmer) if config.stemmer else None
    tokens = bm25s.tokenize(texts, stopwords=config.stopwords or None, stemmer=stemmer,
                            show_progress=False)
    index = bm25s.BM25(k1=config.k1, b=config.b, method=config.method)
    index.index(tokens, show_progress=False)
seconds = time.perf_counter() - start
status = Path("/proc/self/status")
hwm = [line for line in status.read_text().splitlines() if line.startswith("VmHWM:")]
peak = int(hwm[0].split()[1]) * 1024 if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"peak_growth_bytes": peak - before, "seconds": seconds}))
"""
"""Run in a fresh process: peak RSS of building the BM25 index of a saved corpus, streamed
(``KeywordIndex.build``) or in memory (``bm25s.tokenize`` + ``BM25.index`` over all texts), over
the RSS once the corpus is loaded (the kernel's peak mark is reset then, where Linux allows)."""

EXACT = "Flat"
"""The storage every other one is compared with."""
_MEASURE_SIZE = """
import sys
from grasp.bench.index_build import measure_size_main
measure_size_main(*sys.argv[1:])
"""
"""Run in a fresh process: ``bench_size`` at one size (see ``measure_in_fresh_process``)."""
QUERY_VECTORS = "queries.npy"
UNIT = Granularity.SENTENCE


class RssSampler:
    """The process RSS, sampled in a thread; the peak is kept per stage.

    ``enter(name)`` closes the current stage and opens the next (None: none); pass it as
    ``build_index(..., on_stage=sampler.enter)``. Use as a context manager.
    """

    def __init__(self, interval_s: float) -> None:
        self._process = psutil.Process()
        self._interval_s = interval_s
        self._lock = threading.Lock()
        self._stage: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.start_rss: dict[str, int] = {}
        """RSS in bytes as each stage started."""
        self.peak_rss: dict[str, int] = {}
        """Largest RSS in bytes seen during each stage."""

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.enter(None)
        self._stop.set()
        self._thread.join()

    def enter(self, stage: str | None) -> None:
        rss = self._process.memory_info().rss
        with self._lock:
            self._record(rss)
            self._stage = stage
            if stage is not None:
                self.start_rss[stage] = self.peak_rss[stage] = rss

    def growth(self, stage: str) -> int:
        """Peak RSS during ``stage`` minus the RSS as it started, in bytes."""
        return self.peak_rss[stage] - self.start_rss[stage]

    def _record(self, rss: int) -> None:
        if self._stage is not None:
            self.peak_rss[self._stage] = max(self.peak_rss[self._stage], rss)

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            rss = self._process.memory_info().rss
            with self._lock:
                self._record(rss)


def with_storage(index: IndexConfig, factory: str) -> IndexConfig:
    return replace(index, dense=replace(index.dense, factory=factory))


# ---------------------------------------------------------------------- measurements


def record_build(manifest_timings: dict[str, float], sampler: RssSampler, size: int) -> dict:
    """Seconds and RSS (peak, growth) of every stage of the first, complete build."""
    metrics: dict[str, float] = {}
    for stage, seconds in manifest_timings.items():
        metrics[f"time/{stage}_s"] = seconds
        if stage in sampler.peak_rss:
            metrics[f"rss/{stage}/peak_bytes"] = sampler.peak_rss[stage]
            metrics[f"rss/{stage}/growth_bytes"] = sampler.growth(stage)
    metrics["rss/build_peak_bytes"] = max(sampler.peak_rss.values())
    metrics["throughput/encode_sentences_per_s"] = size / manifest_timings[f"{UNIT}/encode"]
    metrics["throughput/build_sentences_per_s"] = size / manifest_timings["total"]
    return metrics


def disk_metrics(directory: Path, size: int) -> dict[str, float]:
    """Bytes per sentence of the corpus, the vectors and the BM25 index on disk."""
    unit_dir = directory / UNIT.value
    parts = {
        "corpus": sum(p.stat().st_size for p in (directory / "corpus").iterdir()),
        "embeddings": (unit_dir / EMBEDDINGS_FILE).stat().st_size,
        "bm25": sum(p.stat().st_size for p in (unit_dir / BM25_DIR).iterdir()),
    }
    return {f"disk/{name}_bytes_per_sentence": value / size for name, value in parts.items()}


def search_storage(
    directory: Path, index: IndexConfig, query_vectors: np.ndarray, k: int
) -> tuple[np.ndarray, float]:
    """Top-k ids [num_queries, k] of the built FAISS index, and ms per query of one batch."""
    dense = configure_search(load_dense_index(directory / UNIT.value / DENSE_FILE), index.dense)
    dense.search(query_vectors[:4], k)
    start = time.perf_counter()
    _, ids = dense.search(query_vectors, k)
    return ids, (time.perf_counter() - start) * 1000 / len(query_vectors)


def bm25_metrics(directory: Path, config: BenchBuildConfig, size: int) -> dict[str, float]:
    """Entries and vocabulary of the built BM25 index; both ways of building it from the saved
    corpus if ``compare_bm25s``."""
    keyword = KeywordIndex.load(directory / UNIT.value / BM25_DIR, config.index.bm25)
    metrics = {
        "bm25/entries_per_sentence": keyword.retriever.scores["data"].size / size,
        "bm25/vocabulary": len(keyword.retriever.vocab_dict),
    }
    del keyword
    if config.compare_bm25s:
        metrics.update(bm25_probes(directory / "corpus", config))
    return metrics


def bm25_probes(corpus_dir: Path, config: BenchBuildConfig) -> dict[str, float]:
    """Peak RSS growth and seconds of building the BM25 index of a saved corpus, streamed and
    in memory, each in a fresh process (``_BM25_PROBE``)."""
    metrics = {}
    settings = {**asdict(config.index.bm25), "prepend_title": config.index.prepend_title}
    for way in ("streamed", "in_memory"):
        command = [sys.executable, "-c", _BM25_PROBE, str(corpus_dir), way, json.dumps(settings)]
        probe = subprocess.run(command, capture_output=True, text=True, cwd=REPO_ROOT)
        if probe.returncode != 0:
            raise RuntimeError(f"BM25 probe failed ({probe.returncode}): {probe.stderr[-2000:]}")
        result = json.loads(probe.stdout.strip().splitlines()[-1])
        metrics[f"bm25_fresh_process/{way}/peak_growth_bytes"] = result["peak_growth_bytes"]
        metrics[f"bm25_fresh_process/{way}/build_s"] = result["seconds"]
    return metrics


def bench_bm25_only(
    size: int, pool: RealPool, config: BenchBuildConfig, work_dir: Path
) -> dict[str, float]:
    """At a size not encoded here: the pooled corpus, then both BM25 builds of it."""
    start = time.perf_counter()
    paragraphs = corpus_paragraphs(pool, size, config.seed)
    corpus = SentenceCorpus.from_questions(as_questions(paragraphs))
    metrics = {
        "corpus/sentences": corpus.num_sentences,
        "corpus/pool_s": time.perf_counter() - start,
        "corpus/memory_bytes_per_sentence": corpus.nbytes() / corpus.num_sentences,
    }
    corpus.save(work_dir / f"corpus-{size}")
    del corpus
    log.info("[%d] BM25 only, streamed and in memory", size)
    metrics.update(bm25_probes(work_dir / f"corpus-{size}", config))
    shutil.rmtree(work_dir / f"corpus-{size}")
    return metrics


def bench_size(
    size: int, pool: RealPool, config: BenchBuildConfig, query_vectors: np.ndarray, work_dir: Path
) -> dict[str, float]:
    """Build at one size with every storage; time, memory, disk and recall."""
    start = time.perf_counter()
    count = sum(len(p.sentences) for p in corpus_paragraphs(pool, size, config.seed))
    metrics: dict[str, float] = {
        "corpus/sentences": count,
        "corpus/real_fraction": min(size, pool.num_sentences) / size,
        "corpus/generate_s": time.perf_counter() - start,
    }
    metrics["rss/start_bytes"] = psutil.Process().memory_info().rss
    directory = work_dir / f"index-{size}"
    exact_ids = None
    for storage in config.storages:
        index = with_storage(config.index, storage)
        log.info("[%d] build_index with dense.factory=%s", size, storage)
        questions = as_questions(corpus_paragraphs(pool, size, config.seed))
        with RssSampler(config.sample_interval_s) as sampler:
            manifest = build_index(
                questions, index, directory, source={"benchmark": "build"}, on_stage=sampler.enter
            )
        if exact_ids is None:
            metrics["corpus/paragraphs"] = manifest.corpus["num_paragraphs"]
            metrics.update(record_build(manifest.timings, sampler, size))
            metrics.update(disk_metrics(directory, size))
        ids, ms = search_storage(directory, index, query_vectors, config.k)
        exact_ids = ids if exact_ids is None else exact_ids
        dense_bytes = (directory / UNIT.value / DENSE_FILE).stat().st_size
        stage = f"{UNIT}/dense_index"
        metrics.update(
            {
                f"storage/{storage}/recall@{config.k}": recall_at_k(ids, exact_ids),
                f"storage/{storage}/disk_bytes_per_sentence": dense_bytes / size,
                f"storage/{storage}/build_s": manifest.timings[stage],
                f"storage/{storage}/rss_growth_bytes": sampler.growth(stage),
                f"storage/{storage}/search_ms_per_query": ms,
            }
        )
    log.info("[%d] bm25 figures", size)
    metrics.update(bm25_metrics(directory, config, size))
    metrics["process/peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    metrics["process/elapsed_s"] = time.perf_counter() - start
    shutil.rmtree(directory)
    log.info("[%d] done in %.0f s", size, metrics["process/elapsed_s"])
    return metrics


def extrapolate(
    results: dict[int, dict[str, float]], sizes: Sequence[int], target: int
) -> dict[str, float]:
    """Every ``_s`` and ``_bytes`` figure at ``target``: the least-squares line through all the
    sizes that report it (two at least). One noisy size then pulls the line less than a line
    through the two largest sizes, which a short, contended run could tilt below zero."""
    estimates = {}
    for name in results[sizes[-1]] if sizes else ():
        points = [(size, results[size][name]) for size in sizes if name in results[size]]
        if not name.endswith(("_s", "_bytes")) or len(points) < 2:
            continue
        xs, ys = np.array(points, dtype=float).T
        slope = np.sum((xs - xs.mean()) * (ys - ys.mean())) / np.sum((xs - xs.mean()) ** 2)
        estimates[name] = float(ys.mean() + slope * (target - xs.mean()))
    return estimates


# ---------------------------------------------------------------------- report


def table(report: BuildReport) -> str:
    """Each metric as a row; each size, then the extrapolation, as a column; then BM25 only."""
    sizes = report["sizes"]
    columns = [report["results"][str(size)] for size in sizes]
    headers = [f"{size:,}" for size in sizes]
    if report["extrapolated"]:
        columns.append(report["extrapolated"])
        headers.append(f"~{report['extrapolate_to']:,}")
    lines = metric_columns(columns, headers, cell_width=16)
    lines.append("\n(~ column: the least-squares line through the sizes, continued)")
    if report["bm25_only"]:
        bm25_sizes = list(report["bm25_only"])
        lines += metric_columns(
            [report["bm25_only"][size] for size in bm25_sizes],
            [f"{int(size):,}" for size in bm25_sizes],
            cell_width=16,
        )
        lines.append("\n(BM25 only: nothing encoded at these sizes)")
    lines.append(f"total {report['runtime_s']:.0f} s")
    return "\n".join(lines)


def measure_in_fresh_process(config: BenchBuildConfig, size: int, work_dir: Path) -> dict:
    """``bench_size`` run in a new Python process (``_MEASURE_SIZE``), so that one size's
    memory figures carry nothing left over by another."""
    config_path, out_path = work_dir / f"config-{size}.json", work_dir / f"result-{size}.json"
    config_path.write_text(json.dumps(asdict(config)))
    command = [sys.executable, "-c", _MEASURE_SIZE, str(size)]
    command += [str(config_path), str(work_dir), str(out_path)]
    finished = subprocess.run(command, cwd=REPO_ROOT)
    if finished.returncode != 0:
        raise RuntimeError(f"the measurement at {size} sentences failed ({finished.returncode})")
    return json.loads(out_path.read_text())


def measure_size_main(size: str, config_path: str, work_dir: str, out_path: str) -> None:
    """Entry point of the fresh process: measure one size, write its metrics as JSON."""
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s][%(name)s] %(message)s")
    fields = OmegaConf.create(json.loads(Path(config_path).read_text()))
    config = to_dataclass(fields, BenchBuildConfig)
    paths = [dataset_path(DatasetConfig(name=name), config.split) for name in config.datasets]
    pool = load_real_pool(paths, config.seed)
    query_vectors = np.load(Path(work_dir) / QUERY_VECTORS)
    metrics = bench_size(int(size), pool, config, query_vectors, Path(work_dir))
    Path(out_path).write_text(json.dumps(metrics))


class BuildQueries(TypedDict):
    source: str
    count: int


class BuildReport(TypedDict):
    """The benchmark's JSON report: per size, the build's metrics (``bench_size``), their
    extrapolation, and the BM25-only builds."""

    sizes: list[int]
    results: dict[str, dict[str, Any]]
    extrapolate_to: int
    extrapolated: dict[str, float]
    bm25_only: dict[str, dict[str, Any]]
    corpus_method: str
    real_sentences: int
    queries: BuildQueries
    environment: Machine
    config: dict[str, Any]
    runtime_s: float


def run_benchmark(config: BenchBuildConfig) -> BuildReport:
    """Measure every size, each in a fresh process; returns the JSON report."""
    sizes = list(config.sizes)
    if not sizes or sizes != sorted(sizes) or sizes[0] < 1:
        raise ValueError(f"sizes must be positive and ascending, got {sizes}")
    if not config.storages or config.storages[0] != EXACT:
        raise ValueError(
            f"storages must start with {EXACT!r} (the reference), got {config.storages}"
        )
    if config.index.granularities != [UNIT.value]:
        raise ValueError(f"index.granularities must be [{UNIT}], got {config.index.granularities}")
    started, load_before = time.perf_counter(), os.getloadavg()
    paths = [dataset_path(DatasetConfig(name=name), config.split) for name in config.datasets]
    pool = load_real_pool(paths, config.seed)
    queries = pool.questions[: config.queries]
    log.info("%d real sentences; %d queries", pool.num_sentences, len(queries))
    with tempfile.TemporaryDirectory(dir=config.work_dir, prefix="bench-build-") as tmp:
        query_vectors = DenseEncoder(config.index.encoder).encode_queries(queries)
        np.save(Path(tmp) / QUERY_VECTORS, query_vectors)
        results = {size: measure_in_fresh_process(config, size, Path(tmp)) for size in sizes}
        bm25_only = {
            str(size): bench_bm25_only(size, pool, config, Path(tmp)) for size in config.bm25_sizes
        }
    return {
        "sizes": sizes,
        "results": {str(size): metrics for size, metrics in results.items()},
        "extrapolate_to": config.extrapolate_to,
        "extrapolated": extrapolate(results, sizes, config.extrapolate_to),
        "bm25_only": bm25_only,
        "corpus_method": CORPUS_METHOD,
        "real_sentences": pool.num_sentences,
        "queries": {
            "source": "real dev questions, de-duplicated, shuffled (seed)",
            "count": len(queries),
        },
        "environment": machine(load_before),
        "config": asdict(config),
        "runtime_s": time.perf_counter() - started,
    }
