"""Ablation study: train every variant of an experiment in one Hydra sweep, then compare them.

    python scripts/ablate.py                                    # experiment=cpu_smoke, 6 variants
    python scripts/ablate.py experiment=grasp_qwen2.5_3b         # the paper's ablations (GPU)
    python scripts/ablate.py variants=[no_read,no_rr] grpo.max_steps=8
    python scripts/ablate.py experiment=grasp_qwen2.5_3b \\
        launcher=[accelerate,launch,--config_file,configs/accelerate/zero2.yaml,--num_processes,2]
    python scripts/ablate.py compare=only sweep_dir=runs/ablate/cpu_smoke
    python scripts/ablate.py experiment=cpu_grasp grpo.max_steps=5 dev_n=100   # + 3 dev sets

The sweep is configs/ablate.yaml's hydra.sweeper.params: one Hydra job per variant, the full
model (none) first, then no read_paragraph, no semantic search, no keyword search, no R_R and
no R_S. Each job runs scripts/train.py in a process of its own (which frees the previous
variant's memory, vLLM's included) with the job's overrides and
run_dir=<sweep_dir>/<variant>: the same seed, questions and step budget, differing only in
what the ablation sets. A reward ablation (no R_R, no R_S) starts from the full run's
finished warm start, which pays no reward (share_warm_start). A finished variant is skipped; an interrupted one resumes through the
trainer's own resume; the training output also goes to <sweep_dir>/<variant>/train.log.
With dev_n=N, each trained variant is then evaluated by scripts/evaluate.py in its own
environment on N questions of each dev set (<sweep_dir>/<variant>/eval_dev/, resumable), and
the comparison pairs every variant with the full run on those questions.

After each job, <sweep_dir>/comparison.json and comparison.md are rewritten: every variant's
evaluation after training, with its delta against the full run of the same sweep. A variant
that failed is recorded (failed.json), shown as failed, and makes the sweep exit non-zero.
The sweep's logic lives in grasp/experiments/ablation_sweep.py, the table in grasp/experiments/ablation.py.
"""

from __future__ import annotations

import os

from grasp.startup import one_line_errors, process_environment

# Before any other import: bm25s (through grasp.corpus) would start JAX on the GPU, which then
# preallocates 75% of it (grasp/startup.py).
os.environ.update(process_environment())

from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from grasp.config import AblateConfig, CompareMode, register_configs, to_dataclass
from grasp.experiments.ablation import Ablation
from grasp.experiments.ablation_sweep import compare_sweep, evaluate_variant, train_variant
from grasp.types import parse_enum

register_configs()


@hydra.main(version_base=None, config_path="../configs", config_name="ablate")
@one_line_errors
def main(cfg: DictConfig) -> None:
    config = to_dataclass(cfg, AblateConfig)
    if config.compare is CompareMode.ONLY:
        compare_sweep(config)
        print(Path(config.sweep_dir, "comparison.md").read_text())
        return
    hydra_config = HydraConfig.get()
    variant = parse_enum(Ablation, hydra_config.runtime.choices["ablation"], "ablation")
    try:
        train_variant(config, variant, list(hydra_config.overrides.task))
        evaluate_variant(config, variant)
    finally:
        # Rewritten after every variant: a long sweep shows its progress, a failed one its state.
        compare_sweep(config)


if __name__ == "__main__":
    main()
