"""Benchmark float32 against bfloat16 on this CPU: is bfloat16 native here, and what it costs.

    python scripts/bench_dtype.py out=runs/bench_dtype.json
    python scripts/bench_dtype.py seconds=1 new_tokens=16

Times, per dtype, a square matmul, MiniLM sentence encoding (every index build and dense
query) and SmolLM2 greedy generation (every rollout), and reports whether the CPU computes
bfloat16 in hardware (AVX512-BF16 or AMX; ``grasp.models.native_bfloat16``). With it,
bfloat16 is the faster CPU default; without it torch emulates bfloat16 and float32 is faster.
Prints a table and writes JSON. The benchmark lives in ``grasp/bench/dtype.py``.
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

from grasp.bench.dtype import run_benchmark, table
from grasp.bench.report import publish
from grasp.config import BenchDtypeConfig, register_configs, to_dataclass

log = logging.getLogger("bench_dtype")
register_configs()


@hydra.main(version_base=None, config_path="../configs", config_name="bench_dtype")
@one_line_errors
def main(cfg: DictConfig) -> None:
    config = to_dataclass(cfg, BenchDtypeConfig)
    report = run_benchmark(config)
    publish(report, config.out, "bench_dtype.json", table(report), log)


if __name__ == "__main__":
    main()
