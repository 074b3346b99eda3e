"""Benchmark torch's thread count with and without a busy neighbour process.

    python scripts/bench_threads.py out=runs/bench_threads.json
    python scripts/bench_threads.py 'thread_counts=[1,2,4]' seconds=5

For each thread count (``threads=`` of every entry point, grasp/threads.py) and each
condition (idle; one other process spinning on a core at nice 19, as a second job or a
retrieval service on the same machine would), it times a 1024 x 1024 float32 matmul and
MiniLM sentence encoding (the encoder of every index build and dense query). Prints a table
and writes JSON; the ratios say what oversubscribing the cores costs here.
The benchmark lives in ``grasp/bench/threads.py``.
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
from grasp.bench.threads import run_benchmark, table
from grasp.config import BenchThreadsConfig, register_configs, to_dataclass

log = logging.getLogger("bench_threads")
register_configs()


@hydra.main(version_base=None, config_path="../configs", config_name="bench_threads")
@one_line_errors
def main(cfg: DictConfig) -> None:
    config = to_dataclass(cfg, BenchThreadsConfig)
    report = run_benchmark(config)
    publish(report, config.out, "bench_threads.json", table(report), log)


if __name__ == "__main__":
    main()
