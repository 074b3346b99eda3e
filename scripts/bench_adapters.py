"""Benchmark generation with a run's LoRA adapters merged into the weights against unmerged.

    python scripts/bench_adapters.py out=results/bench/adapters.json
    python scripts/bench_adapters.py batch=8 new_tokens=128

Evaluations apply a trained run's adapters by merging them (grasp/rollout/adapters.py);
training generates with its last adapter unmerged (PEFT). This times greedy generation of
``batch`` prompts x ``new_tokens`` tokens both ways, at each prompt length, in one process, alternating, and checks the
two produce the same tokens. Prints a table and writes JSON.
The benchmark lives in ``grasp/bench/adapters.py``.
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

from grasp.bench.adapters import run_benchmark, table
from grasp.bench.report import publish
from grasp.config import BenchAdaptersConfig, register_configs, to_dataclass

log = logging.getLogger("bench_adapters")
register_configs()


@hydra.main(version_base=None, config_path="../configs", config_name="bench_adapters")
@one_line_errors
def main(cfg: DictConfig) -> None:
    config = to_dataclass(cfg, BenchAdaptersConfig)
    report = run_benchmark(config)
    publish(report, config.out, "bench_adapters.json", table(report), log)


if __name__ == "__main__":
    main()
