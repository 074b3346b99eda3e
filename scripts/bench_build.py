"""Benchmark the streaming index build: time and memory per stage as the corpus grows, and what
each dense storage costs in disk and recall.

    python scripts/bench_build.py out=runs/bench_build.json        # 100k, 300k and 1M sentences
    python scripts/bench_build.py sizes=[20000,50000] out=runs/bench_build-50k.json  # a quick look

At each size, ``build_index`` itself indexes a corpus of that many sentences: the pooled
corpus, MiniLM bf16 encoding in resumable shards, the FAISS index of the first storage of
``storages`` (``Flat``: exact search, the reference) and the streamed bm25s index. Then every
other storage is built by ``build_index`` in the same folder: it re-uses the vectors and the
BM25 index and builds only the FAISS index. Reported per size, printed as one table and
written to one JSON file (``out=``):

- seconds per build stage (``corpus``: pooling the questions, which here includes generating
  the spliced sentences, ``corpus/generate_s`` alone; ``corpus/save``; ``sentence/encode``;
  ``sentence/dense_index``; ``sentence/bm25_index``; ``checksums``); sentences/s;
- memory: the process RSS sampled every ``sample_interval_s`` in a thread; per stage its peak
  and its growth over the RSS at the stage's start; the kernel's peak RSS of the process;
- disk bytes per sentence of each part of the index, and of ``dense.faiss`` per storage;
- per storage: recall@k against exact Flat search over ``queries`` real questions, FAISS
  build seconds and RSS growth, batched search milliseconds per query;
- BM25: matrix entries and vocabulary; with ``compare_bm25s``, the peak RSS growth and seconds
  of building it from the saved corpus in a fresh process, streamed (``KeywordIndex.build``) and
  the in-memory way (``bm25s.tokenize`` + ``BM25.index`` over all texts at once). The same,
  without encoding anything, at each of ``bm25_sizes`` (``bm25_only``: up to the full 3.6M).

``extrapolated`` continues every time and byte figure along its least-squares line over the
sizes to ``extrapolate_to`` sentences (3.6M: the pooled HotpotQA train set).

Corpus (``CORPUS_METHOD``): the ~58.6k real sentences of the bundled dev sets, then spliced
copies of them. Each size is measured in a fresh Python process, so that its RSS carries
nothing left over by another; ``rss/start_bytes`` is that process's RSS before its first build
(the interpreter, torch, the real sentence pool), and the query vectors are encoded once, here.
Timings mean something only on an otherwise idle machine (the JSON records the load average).
The measurements live in ``grasp/bench/index_build.py``.
"""

from __future__ import annotations

import os

from grasp.startup import one_line_errors, process_environment

# Before any other import: bm25s (through grasp.corpus) would start JAX on the GPU, which then
# preallocates 75% of it (grasp/startup.py).
os.environ.update(process_environment())

import logging

import hydra
from omegaconf import DictConfig

from grasp.bench.index_build import run_benchmark, table
from grasp.bench.report import publish
from grasp.config import BenchBuildConfig, register_configs, to_dataclass

log = logging.getLogger("bench_build")
register_configs()


@hydra.main(version_base=None, config_path="../configs", config_name="bench_build")
@one_line_errors
def main(cfg: DictConfig) -> None:
    config = to_dataclass(cfg, BenchBuildConfig)
    report = run_benchmark(config)
    publish(report, config.out, "bench_build.json", table(report), log)


if __name__ == "__main__":
    main()
