"""Benchmark one experiment's GRPO step, part by part and arm by arm, against its raw model costs.

    python scripts/bench_train_step.py                                 # experiment=cpu_grasp
    python scripts/bench_train_step.py experiment=cpu_learn out=runs/step-cpu_learn.json
    # cpu_grasp_v2's step from its committed warm start, as the run took it:
    python scripts/bench_train_step.py experiment=cpu_grasp_v2 \
        warm_start_from=results/cpu_grasp_v2/warm_start 'arms=[{name: v2}]'

Builds the run exactly as scripts/train.py does (same index, environment, rollout engine,
reward and TRL GRPOTrainer) once per arm (``arms``: a name and the training overrides that
make it; by default ``grpo.reuse_cache`` false and true), each in a process of its own so
that its peak resident memory is its own, and runs ``warmup_steps`` + ``timed_steps`` steps
with ``grasp.train.step_profile.StepProfiler`` attached: each step's wall time split into
generation (prefill, decode forwards, log-probabilities, the rest; turn by turn),
environment, no-grad log-probabilities (reference and old policy; trunk and head), forward
(trunk and head), backward, optimizer and the rest, with the tokens it processed (prompt,
generated, inserted) and the peak resident memory. Then, in the last arm and on its last
step's trajectories: one raw ``model.generate`` of the same rows and new-token count, and one
forward/backward over the same sequences, the floors the step's generation and update are
measured against. No evaluation runs; ``warm_start_from=`` starts every arm from a finished
warm start (else the untrained model). Prints a table and writes JSON (machine facts
included: time only on idle cores).
The benchmark lives in ``grasp/bench/train_step.py``.
"""

from __future__ import annotations

import os

from grasp.startup import one_line_errors, process_environment

# Before any other import: bm25s (through grasp.corpus) would start JAX on the GPU, which then
# preallocates 75% of it (grasp/startup.py).
os.environ.update(process_environment())

import logging
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

from grasp.bench.report import publish
from grasp.bench.train_step import run_benchmark, table
from grasp.config import BenchTrainStepConfig, register_configs, to_dataclass
from grasp.threads import set_threads
from grasp.train.process import set_process_environment

log = logging.getLogger("bench_train_step")
register_configs()


@hydra.main(version_base=None, config_path="../configs", config_name="bench_train_step")
@one_line_errors
def main(cfg: DictConfig) -> None:
    config = to_dataclass(cfg, BenchTrainStepConfig)
    set_threads(config.threads)
    set_process_environment(config.wandb, Path(config.run_dir))
    report = run_benchmark(config, OmegaConf.to_container(cfg, resolve=True))
    name = f"bench_train_step-{config.experiment}.json"
    publish(report, config.out, name, table(report), log)


if __name__ == "__main__":
    main()
