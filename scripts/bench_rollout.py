"""Benchmark HFPolicy's generation: the former decoder, the new one and a plain model.generate.

    python scripts/bench_rollout.py out=results/bench/rollout-cpu.json
    python scripts/bench_rollout.py dry_run=true
    python scripts/bench_rollout.py model_config=configs/gpu_check/qwen2.5_3b_config.json \
        'batches=[16,64,160]' context=1024 ragged=false new_tokens=512   # gpu_check's rollout_hf

On a random model built in the process (a Llama of SmolLM2's 49k vocabulary by default, or the
model of an HF config.json), generates the same batch three ways side by side: ``before``
(``HFPolicy(decoder="generate")``, generate's own loop with ChosenLogprobs), ``after``
(``HFPolicy(decoder="loop")``, grasp/rollout/hf_decode.py) and ``plain`` (``model.generate`` of
the same batch, no log-probabilities: the floor). Reports seconds, generated tokens/s, the
parts (prefill, decode forwards, log-probabilities, the rest), peak memory and memory after
every forward (allocated and reserved on CUDA, RSS on the CPU), and whether the variants drew
the same ids. Prints a table and writes JSON (machine facts and load averages included: a
loaded machine is flagged ``contended``). The benchmark lives in ``grasp/bench/rollout.py``.
"""

from __future__ import annotations

import os

from grasp.startup import one_line_errors, process_environment

# Before any other import: bm25s (through grasp.corpus) would start JAX on the GPU, which then
# preallocates 75% of it (grasp/startup.py).
os.environ.update(process_environment())

import logging

import hydra
from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig

from grasp.bench.report import publish
from grasp.bench.rollout import BenchRolloutConfig, run_benchmark, table
from grasp.config import to_dataclass

log = logging.getLogger("bench_rollout")
ConfigStore.instance().store(name="bench_rollout_schema", node=BenchRolloutConfig)


@hydra.main(version_base=None, config_path="../configs", config_name="bench_rollout")
@one_line_errors
def main(cfg: DictConfig) -> None:
    config = to_dataclass(cfg, BenchRolloutConfig)
    report = run_benchmark(config)
    publish(report, config.out, "bench_rollout.json", table(report), log)


if __name__ == "__main__":
    main()
