"""Evaluate a policy on the dev sets in the GRASP environment: the paper's protocol.

    python scripts/evaluate.py policy=scripted                           # all three, n=500
    python scripts/evaluate.py 'datasets=[hotpotqa,musique]' policy=hf n=50
    python scripts/evaluate.py dataset=musique policy=openai policy.base_url=http://localhost:8000/v1
    python scripts/evaluate.py policy=qwen2.5_3b_vllm judge=openai judge.base_url=http://host:8000/v1
    python scripts/evaluate.py run_dir=runs/cpu_grasp                    # a trained run, its own env
    python scripts/evaluate.py run_dir=runs/cpu_grasp stage=warm_start   # the policy GRPO started from
    python scripts/evaluate.py run_dir=results/cpu_grasp_v2 n=8 'datasets=[hotpotqa]' show=1

Each dataset: a seed-42 sample of n questions (all of them where fewer exist), searched in the
dataset's own pooled sentence index, written to out/<dataset>/ (config.json,
trajectories.jsonl, judge_cache.jsonl, results.json, results.md). Then out/results.json and
out/results.md: every dataset, all questions pooled, and the macro mean over datasets, each
metric with its 95% bootstrap interval, with the code's commit and the models' identities.
``show=K`` prints the first K trajectories of each dataset turn by turn.
An interrupted evaluation resumes where it stopped, without judging any answer twice.
The work is ``grasp.eval.protocol``; results.json's types are ``grasp.eval.results``.
"""

from __future__ import annotations

import os

from grasp.startup import log_gpu_memory, one_line_errors, process_environment

# Before any other import: bm25s (through grasp.corpus) would start JAX on the GPU, which then
# preallocates 75% of it (grasp/startup.py).
os.environ.update(process_environment())

from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from grasp.config import EvaluateConfig, register_configs, to_dataclass
from grasp.eval.protocol import evaluate_datasets
from grasp.experiments.trained import for_trained_run
from grasp.threads import set_threads
from grasp.train.resume import check_training_run

register_configs()


@hydra.main(version_base=None, config_path="../configs", config_name="evaluate")
@one_line_errors
def main(cfg: DictConfig) -> None:
    """Compose the config (a trained run's ``run_dir`` brings its own environment), then
    evaluate every dataset (``grasp.eval.protocol.evaluate_datasets``)."""
    log_gpu_memory()  # after the imports: shows what another framework took in them
    config = to_dataclass(cfg, EvaluateConfig)
    set_threads(config.threads)
    if config.run_dir:
        check_training_run(Path(config.run_dir))  # an evaluation's folder is named as one
        config = for_trained_run(config, HydraConfig.get().overrides.task)
    evaluate_datasets(config)


if __name__ == "__main__":
    main()
