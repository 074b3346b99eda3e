"""Benchmark retrieval: build speed, query latency, recall and memory from 20k to 1M sentences.

    python scripts/bench_retrieval.py out=runs/bench_retrieval.json sizes=[20000,200000,1000000]
    python scripts/bench_retrieval.py sizes=[5000,50000] single_queries=10   # a quick look

At each size it measures, prints as one table and writes to one JSON file (``out=``):

- build: bm25s indexing (``KeywordIndex.build``) and FAISS Flat and HNSW32 builds; at the first
  size also a real ``build_index`` run, whose MiniLM bf16 encoding gives sentences/s;
- latency, one query at a time (mean, p50, p95) and one batched call (queries/s): dense search
  through ``CorpusIndex.search`` including query encoding (first size; larger sizes estimated
  as that minus exact FAISS search at the first size plus exact FAISS search at theirs), FAISS
  Flat and HNSW alone, bm25s, and rank-bm25 where it is feasible (up to 200k by default);
- BM25 top-k on its own (``bm25s_topk/``): scoring one query, bm25s's argpartition over every
  unit's score, and the selection among positive scores that ``KeywordIndex.search`` runs;
- quality: HNSW recall@k against exact Flat search; bm25s vs rank-bm25 top-k agreement;
- memory: bytes per sentence of the exact 384-d index with its metadata, counted (FAISS vectors
  plus ``SentenceCorpus.nbytes()``) and as the RSS growth of a fresh process loading both
  (``_RSS_PROBE``); bm25s index size;
- targets, each with pass/fail (see ``targets``).

Corpus (``CORPUS_METHOD``): the sentences of the bundled dev sets, pooled, de-duplicated and
shuffled by paragraph (~58.6k). Larger sizes add spliced paragraphs: copies of the real
paragraphs, under the same titles, whose every sentence is replaced by its own first 30-70% of
words followed by the tail of another random real sentence (cut at 30-70%).
Vectors (``VECTOR_METHODS``): the first size is encoded for real (MiniLM on 2 cores would need
~40 min for 1M sentences); larger FAISS indexes hold those real embeddings, then synthetic rows
built from them, plus small Gaussian noise, renormalized. ``vector_method=mix`` (default) makes
each row a random convex mix of two real embeddings, as the spliced sentences mix two real ones;
``tile`` copies one real embedding. Tiling makes clusters of near-duplicates on which HNSW recall
drops (0.93 instead of 0.999 on 6k real MiniLM vectors at 50 copies each; mixing: 0.999), so
the first size reports HNSW recall on real vectors and on both syntheses made from a 1/copies
sample of them (``faiss_hnsw/recall@k_synthetic_*``). Queries are real dev questions.
The headline bm25s/rank-bm25 speed ratio is taken at the largest size where both ran.

Timings mean something only on an otherwise idle machine: with 2 cores, one busy neighbour makes
torch and FAISS threads wait on each other (a single MiniLM query goes from ~5 ms to ~500 ms).
The JSON records the load average, and a warning is logged when it is high at the start.
The measurements live in ``grasp/bench/retrieval.py``.
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

from grasp.bench.report import publish
from grasp.bench.retrieval import run_benchmark, table
from grasp.config import BenchRetrievalConfig, register_configs, to_dataclass

log = logging.getLogger("bench_retrieval")
register_configs()


@hydra.main(version_base=None, config_path="../configs", config_name="bench_retrieval")
@one_line_errors
def main(cfg: DictConfig) -> None:
    config = to_dataclass(cfg, BenchRetrievalConfig)
    report = run_benchmark(config)
    publish(report, config.out, "bench_retrieval.json", table(report), log)


if __name__ == "__main__":
    main()
