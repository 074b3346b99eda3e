"""The ablation sweep behind scripts/ablate.py: each variant's scripts/train.py overrides, its
training in a process of its own (skipped when finished), and the comparison table
(grasp/eval/ablation.py) rewritten after each variant.
"""

from __future__ import annotations

import logging
import shlex
import sys
from dataclasses import fields
from pathlib import Path

from hydra import compose
from omegaconf import OmegaConf

from grasp.config import AblateConfig, to_dataclass
from grasp.eval.ablation import Ablation, is_finished, write_comparison
from grasp.eval.sweep import job_overrides, run_job
from grasp.paths import REPO_ROOT
from grasp.train.config import TrainConfig

log = logging.getLogger("ablate")

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
    """Rewrite the sweep's comparison.json and comparison.md from its run folders."""
    files = write_comparison(Path(config.sweep_dir), config.variants)
    rows = files.comparison.rows
    done = sum(row["status"] == "finished" for row in rows)
    log.info("comparison of %d/%d finished variants: %s", done, len(rows), files.markdown_path)
