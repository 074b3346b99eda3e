"""The ablation sweep behind scripts/ablate.py: each variant's scripts/train.py overrides, its
training in a process of its own (skipped when finished), its evaluation on the dev sets
(``dev_n`` > 0; scripts/evaluate.py in a process of its own, resumed when interrupted), and
the comparison table (grasp/experiments/ablation.py) rewritten after each variant.
"""

from __future__ import annotations

import json
import logging
import shlex
import shutil
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any, TypedDict

from hydra import compose
from omegaconf import OmegaConf

from grasp.eval.config_diff import config_differences
from grasp.eval.context import token_counter
from grasp.eval.results import RESULTS_FILE as EVALUATION_RESULTS_FILE
from grasp.experiments.ablation import DEV_EVAL_DIR, Ablation, is_finished, write_comparison
from grasp.experiments.config import AblateConfig
from grasp.experiments.sweep import job_overrides, read_failure, run_job
from grasp.models import MODEL_CONFIG_FILE
from grasp.paths import REPO_ROOT
from grasp.structured import to_dataclass
from grasp.train.config import TrainConfig
from grasp.train.run_folder import WARM_START_DIR, RunFolder
from grasp.train.warm_start import DONE_MARKER, MODEL_DIR

log = logging.getLogger("ablate")

TRAIN_SCRIPT = REPO_ROOT / "scripts" / "train.py"
EVALUATE_SCRIPT = REPO_ROOT / "scripts" / "evaluate.py"
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


SHARED_FROM_FILE = "shared_from.json"
"""In a variant's warm_start/ when it is the full run's (``share_warm_start``)."""


def warm_start_unchanged(differences: list[str]) -> bool:
    """True when configurations that differ in ``differences`` (dotted keys) warm-start alike:
    only the run folder and the reward differ. The warm start plays scripted plans and keeps
    its episodes by recall (``warm_start.min_recall``), so no reward weight reaches it."""
    return all(k == "run_dir" or k.startswith("rollout.reward.") for k in differences)


def share_warm_start(sweep_dir: Path, variant: Ablation, resolved: dict[str, Any]) -> bool:
    """Give ``variant`` the full run's finished warm start when nothing it warm-starts with
    differs (the reward ablations), so that it is not fine-tuned again: the folder is copied
    to <variant>/warm_start/ (a copy: the variant may write its own files there), with
    shared_from.json saying whose it is. Only a warm start with its merged model is shared
    (not a folder kept without its weights, as under results/); a variant that has a
    warm_start/ of its own keeps it. True if shared."""
    if variant is Ablation.NONE or not resolved.get("warm_start", {}).get("enabled"):
        return False
    full = RunFolder(sweep_dir / str(Ablation.NONE))
    source, target = full.warm_start_dir, RunFolder(sweep_dir / str(variant)).warm_start_dir
    if target.exists() or not (source / DONE_MARKER).is_file():
        return False
    if not (source / MODEL_DIR / MODEL_CONFIG_FILE).is_file():
        log.info("%s: not sharing %s, which holds no model: warm-starting anew", variant, source)
        return False
    differences = config_differences(resolved, full.read_config() or {})
    if not warm_start_unchanged(differences):
        log.info(
            "%s: not sharing %s, whose run differs in %s: warm-starting anew",
            variant,
            source,
            [k for k in differences if not warm_start_unchanged([k])],
        )
        return False
    partial = target.with_name(f"{WARM_START_DIR}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    shutil.copytree(source, partial)
    shared = {"run_dir": str(full.path), "config_differences": differences}
    (partial / SHARED_FROM_FILE).write_text(json.dumps(shared, indent=2) + "\n")
    partial.rename(target)  # whole or absent: the marker never appears before the model
    log.info("%s: warm start shared from %s (differences: %s)", variant, source, differences)
    return True


def train_variant(config: AblateConfig, variant: Ablation, task_overrides: list[str]) -> None:
    """Train one variant in its own process, unless its run folder holds it finished; with
    ``share_warm_start``, a variant that warm-starts as the full run does starts from the
    full run's warm start."""
    run_dir = Path(config.sweep_dir) / str(variant)
    overrides = train_overrides(task_overrides, str(run_dir))
    resolved = variant_config(overrides)
    if is_finished(run_dir, resolved):
        log.info("%s: finished in %s, skipped", variant, run_dir)
        return
    if config.share_warm_start:
        share_warm_start(Path(config.sweep_dir), variant, resolved)
    command = [*(config.launcher or [sys.executable]), str(TRAIN_SCRIPT), *overrides]
    log.info("%s (%s): %s", variant, variant.label, shlex.join(command))
    run_job(f"variant {variant}", "scripts/train.py", command, run_dir, run_dir / "train.log")


def dev_eval_command(config: AblateConfig, run_dir: Path) -> list[str]:
    """scripts/evaluate.py's command for a trained variant: its final policy in its own
    environment (from its config.json), on ``dev_n`` questions of each of ``dev_datasets``."""
    datasets = ",".join(str(d) for d in config.dev_datasets)
    return [
        sys.executable,
        str(EVALUATE_SCRIPT),
        f"run_dir={run_dir}",
        f"n={config.dev_n}",
        f"datasets=[{datasets}]",
        f"out={run_dir / DEV_EVAL_DIR}",
        f"threads={config.threads}",
    ]


DEV_KEY_FILE = "evaluated.json"
"""In eval_dev/: what it evaluates: n, the datasets and the model's training step."""


class DevEvalKey(TypedDict):
    """What a dev evaluation evaluates (``DEV_KEY_FILE``)."""

    n: int
    datasets: list[str]
    steps: int | None
    """The trained model's step (``RunFolder.recorded_steps``)."""


def dev_eval_key(config: AblateConfig, run_dir: Path) -> DevEvalKey:
    """What a dev evaluation of ``run_dir`` must have been run with to count as this one:
    the questions per dataset, the datasets and the trained model's step."""
    steps = RunFolder(run_dir).recorded_steps()
    return {"n": config.dev_n, "datasets": [str(d) for d in config.dev_datasets], "steps": steps}


def recorded_dev_key(out: Path) -> DevEvalKey | None:
    """The key an existing eval_dev/ was started with, as written; None when it holds nothing
    yet."""
    marker = out / DEV_KEY_FILE
    if not marker.is_file():
        return None
    recorded = json.loads(marker.read_text())
    return recorded if isinstance(recorded, dict) else None


def dev_eval_done(config: AblateConfig, run_dir: Path) -> bool:
    """True when ``<run_dir>/eval_dev`` holds a finished evaluation, without a later failure,
    of these datasets and n and of the model the run now holds."""
    out = run_dir / DEV_EVAL_DIR
    if not (out / EVALUATION_RESULTS_FILE).exists() or read_failure(out) is not None:
        return False
    return recorded_dev_key(out) == dev_eval_key(config, run_dir)


def set_aside_stale_dev_eval(config: AblateConfig, run_dir: Path) -> Path | None:
    """Move an eval_dev/ of other questions or of an earlier model (the variant was trained
    further) to eval_dev-<n>q-step<N>/, so that it is evaluated anew and the old one kept."""
    out = run_dir / DEV_EVAL_DIR
    recorded = recorded_dev_key(out)
    if recorded is None or recorded == dev_eval_key(config, run_dir):
        return None
    target = out.with_name(f"{out.name}-{recorded['n']}q-step{recorded['steps']}")
    suffix = 1
    while target.exists():
        suffix += 1
        target = out.with_name(f"{out.name}-{recorded['n']}q-step{recorded['steps']}-{suffix}")
    log.info(
        "%s was evaluated as %s, now %s: moved to %s",
        out,
        recorded,
        dev_eval_key(config, run_dir),
        target,
    )
    out.rename(target)
    return target


def evaluate_variant(config: AblateConfig, variant: Ablation) -> None:
    """Evaluate a trained variant on the dev sets (``dev_n`` > 0), unless that is done. An
    interrupted evaluation resumes (scripts/evaluate.py); one of other questions or of an
    earlier model is set aside first; a failed one writes ``eval_dev/failed.json`` and
    raises, leaving the training run as it is."""
    run_dir = Path(config.sweep_dir) / str(variant)
    if config.dev_n == 0 or dev_eval_done(config, run_dir):
        return
    set_aside_stale_dev_eval(config, run_dir)
    out = run_dir / DEV_EVAL_DIR
    out.mkdir(parents=True, exist_ok=True)
    (out / DEV_KEY_FILE).write_text(json.dumps(dev_eval_key(config, run_dir)) + "\n")
    command = dev_eval_command(config, run_dir)
    log.info("%s: dev evaluation: %s", variant, shlex.join(command))
    run_job(
        f"dev evaluation of {variant}", "scripts/evaluate.py", command, out, out / "evaluate.log"
    )


def compare_sweep(config: AblateConfig) -> None:
    """Rewrite the sweep's comparison.json and comparison.md from its run folders."""
    sweep_dir = Path(config.sweep_dir)
    evaluated = any((sweep_dir / str(v) / DEV_EVAL_DIR).is_dir() for v in config.variants)
    # The dev table's context column counts as the baseline table's: the policy's tokenizer.
    count = token_counter(config.model) if evaluated else None
    files = write_comparison(sweep_dir, config.variants, count)
    rows = files.comparison.rows
    done = sum(row["status"] == "finished" for row in rows)
    log.info("comparison of %d/%d finished variants: %s", done, len(rows), files.markdown_path)
