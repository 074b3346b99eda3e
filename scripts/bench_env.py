"""Benchmark the environment: tool calls per second, and its share of a real rollout's time.

    python scripts/bench_env.py out=runs/bench_env.json
    python scripts/bench_env.py 'episode_counts=[64,512,2048]' hf_questions=32

1. Scripted episodes (the heuristic search agent, no model) over the pooled HotpotQA dev
   index, 64 and 512 at once: tool calls per second of the environment alone, with and
   without token bookkeeping (chat template, observation tokenization).
2. A rollout with the transformers SmolLM2-135M policy on the CPU: wall time split into
   generation and environment; the target is an environment share under 10%.
Prints a table and writes JSON.
The benchmark lives in ``grasp/bench/environment.py``.
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

from grasp.bench.environment import run_benchmark, table
from grasp.bench.report import publish
from grasp.config import BenchEnvConfig, register_configs, to_dataclass
from grasp.threads import set_threads

log = logging.getLogger("bench_env")
register_configs()


@hydra.main(version_base=None, config_path="../configs", config_name="bench_env")
@one_line_errors
def main(cfg: DictConfig) -> None:
    config = to_dataclass(cfg, BenchEnvConfig)
    set_threads(config.threads)
    results = run_benchmark(config)
    publish(results, config.out, "bench_env.json", table(results), log)


if __name__ == "__main__":
    main()
