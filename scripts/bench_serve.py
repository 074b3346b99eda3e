"""Load-test the retrieval service on loopback against in-process search, and check every answer.

    python scripts/bench_serve.py out=runs/bench_serve.json
    python scripts/bench_serve.py 'concurrency=[1,8,32]' requests=256 queries_per_request=4
    python scripts/bench_serve.py service_url=http://gpu-node:8000 index=e5_gpu

Starts ``scripts/serve_retrieval.py`` over the pooled HotpotQA dev index (built first only when
missing) in a subprocess on a free loopback port, unless ``service_url=`` names a running
one. Then, per retriever and per concurrency level C, C client threads send ``requests``
requests of ``queries_per_request`` dev questions each, first to one in-process
``CorpusIndex`` (shared by the threads behind a lock, as one process searches it) and then to
the service through ``RemoteIndex`` (which merges concurrent requests into one encoder pass).
Reports throughput (queries/s) and p50/p95/p99 request latency of both, and compares every
remote answer with the in-process answer to the same request: ``mismatches`` counts answers
that differ beyond score noise (``grasp.serve.agreement``; must be 0), ``same_units`` those
with the same hits in the same order, ``exact`` those equal bitwise (a request merged with
others into one encoder batch may differ in the scores' last bits). Prints a table and
writes JSON. The benchmark lives in ``grasp/bench/serve.py``.
"""

from __future__ import annotations

import os

from grasp.startup import one_line_errors, process_environment

# Before any other import: bm25s (through grasp.corpus) would start JAX on the GPU, which then
# preallocates 75% of it (grasp/startup.py).
os.environ.update(process_environment())

import dataclasses
import logging

import hydra
from omegaconf import DictConfig

from grasp.bench.report import publish
from grasp.bench.serve import format_table, prepare_index, run_benchmark, summary
from grasp.config import BenchServeConfig, register_configs, to_dataclass

log = logging.getLogger("bench_serve")
register_configs()


@hydra.main(version_base=None, config_path="../configs", config_name="bench_serve")
@one_line_errors
def main(cfg: DictConfig) -> None:
    config = to_dataclass(cfg, BenchServeConfig)
    directory, queries = prepare_index(config)
    report = run_benchmark(config, directory, queries)
    report["config"] = dataclasses.asdict(config)
    publish(
        report, config.out, "bench_serve.json", format_table(report) + "\n" + summary(report), log
    )


if __name__ == "__main__":
    main()
