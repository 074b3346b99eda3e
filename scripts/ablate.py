"""Ablation study: train every variant of an experiment in one Hydra sweep, then compare them.

    python scripts/ablate.py                                    # experiment=cpu_smoke, 6 variants
    python scripts/ablate.py experiment=grasp_qwen2.5_3b         # the paper's ablations (GPU)
    python scripts/ablate.py variants=[no_read,no_rr] grpo.max_steps=8
    python scripts/ablate.py experiment=grasp_qwen2.5_3b \\
        launcher=[accelerate,launch,--config_file,configs/accelerate/zero2.yaml,--num_processes,2]
    python scripts/ablate.py compare=only sweep_dir=runs/ablate/cpu_smoke

The sweep is configs/ablate.yaml's hydra.sweeper.params: one Hydra job per variant, the full
model (none) first, then no read_paragraph, no semantic search, no keyword search, no R_R and
no R_S. Each job runs scripts/train.py in a process of its own (which frees the previous
variant's memory, vLLM's included) with the job's overrides and
run_dir=<sweep_dir>/<variant>: the same seed, questions and step budget, differing only in
what the ablation sets. A finished variant is skipped; an interrupted one resumes through the
trainer's own resume; the training output also goes to <sweep_dir>/<variant>/train.log.

After each job, <sweep_dir>/comparison.json and comparison.md are rewritten: every variant's
evaluation after training, with its delta against the full run of the same sweep. A variant
that failed is recorded (failed.json), shown as failed, and makes the sweep exit non-zero.
"""

from __future__ import annotations

import logging
import shlex
import sys
from dataclasses import fields
from pathlib import Path

import hydra
from hydra import compose
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from grasp.config import AblateConfig, CompareMode, register_configs, to_dataclass
from grasp.eval.ablation import Ablation, is_finished, write_comparison
from grasp.eval.sweep import job_overrides, run_job
from grasp.paths import REPO_ROOT
from grasp.train.config import TrainConfig
from grasp.types import parse_enum

log = logging.getLogger("ablate")
register_configs()

TRAIN_SCRIPT = REPO_ROOT / "scripts" / "train.py"
SWEEP_FIELDS = frozenset(f.name for f in fields(AblateConfig)) - {
    f.name for f in fields(TrainConfig)
}
"""AblateConfig's own fields: they configure the sweep and are not passed to scripts/train.py."""


def train_overrides(task_overrides: list[str], run_dir: str) -> list[str]:
    """scripts/train.py's overrides for one variant: the job's own (experiment, ablation and
    any training field), less the sweep's fields, plus the variant's run folder."""
    refused = {"run_dir": "each variant runs in <sweep_dir>/<variant>; choose sweep_dir= instead"}
    return [*job_overrides(task_overrides, SWEEP_FIELDS, refused), f"run_dir={run_dir}"]


def variant_config(overrides: list[str]) -> dict:
    """The resolved configuration that scripts/train.py writes (config.json) for ``overrides``:
    composed from the same configs with the same overrides."""
    cfg = compose("train", overrides=overrides)
    to_dataclass(cfg, TrainConfig)  # fails here, naming the field, rather than in the child
    return OmegaConf.to_container(cfg, resolve=True)


def train_variant(config: AblateConfig, variant: Ablation, task_overrides: list[str]) -> None:
    """Train one variant in its own process, unless its run folder holds it finished."""
    run_dir = Path(config.sweep_dir) / str(variant)
    overrides = train_overrides(task_overrides, str(run_dir))
    if is_finished(run_dir, variant_config(overrides)):
        log.info("%s: finished in %s, skipped", variant, run_dir)
        return
    command = [*(config.launcher or [sys.executable]), str(TRAIN_SCRIPT), *overrides]
    log.info("%s (%s): %s", variant, variant.label, shlex.join(command))
    run_job(f"variant {variant}", "scripts/train.py", command, run_dir, run_dir / "train.log")


def compare_sweep(config: AblateConfig) -> None:
    files = write_comparison(Path(config.sweep_dir), config.variants)
    rows = files.comparison.rows
    done = sum(row["status"] == "finished" for row in rows)
    log.info("comparison of %d/%d finished variants: %s", done, len(rows), files.markdown_path)


@hydra.main(version_base=None, config_path="../configs", config_name="ablate")
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
    finally:
        # Rewritten after every variant: a long sweep shows its progress, a failed one its state.
        compare_sweep(config)


if __name__ == "__main__":
    main()
