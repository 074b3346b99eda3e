"""The baseline sweep behind scripts/baselines.py: plan every row, evaluate the unfinished ones
in processes of their own, and rewrite the table (grasp/experiments/baseline_table.py) as they end.

Baselines are composed exactly as ``scripts/evaluate.py policy=P baseline=B`` would compose
them; trained rows as ``scripts/evaluate.py run_dir=R stage=S`` (grasp/experiments/trained.py). The
composition needs Hydra's config directory initialized (the script's ``hydra.main``, or
``hydra.initialize_config_dir`` in tests).
"""

from __future__ import annotations

import dataclasses
import logging
import shlex
import sys
from dataclasses import fields
from pathlib import Path

from hydra import compose
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

from grasp.eval.config import EvaluateConfig
from grasp.eval.context import TokenCounter, token_counter
from grasp.eval.protocol import load_dataset
from grasp.experiments.baseline_table import (
    PlannedBaseline,
    QuestionTypes,
    is_finished,
    unfinished_because,
    unmet_requirement,
    write_table,
)
from grasp.experiments.config import BaselinesConfig
from grasp.experiments.matched_context import MatchedContext
from grasp.experiments.sweep import job_overrides, run_job
from grasp.experiments.trained import fixed_by_run, for_trained_run
from grasp.paths import REPO_ROOT
from grasp.structured import to_dataclass
from grasp.train.run_folder import RunFolder

log = logging.getLogger("baselines")

EVALUATE_SCRIPT = REPO_ROOT / "scripts" / "evaluate.py"
SWEEP_FIELDS = frozenset(f.name for f in fields(BaselinesConfig)) - {
    f.name for f in fields(EvaluateConfig)
}
"""BaselinesConfig's own fields: they configure the sweep and are not passed to evaluate.py."""
REFUSED = {
    "out": "each baseline is evaluated into <sweep_dir>/<baseline>; choose sweep_dir= instead",
    "baseline": "each job sets its own baseline; choose the rows with baselines=[...]",
}
OWN_DEFAULTS = ("policy",)
"""Config groups whose default here (baselines.yaml) differs from evaluate.yaml's: passed to
every evaluation explicitly unless the command line chooses them."""


def evaluate_overrides(task_overrides: list[str], choices: dict[str, str]) -> list[str]:
    """scripts/evaluate.py's overrides shared by every baseline: this command's own, less
    the sweep's fields, plus this config's defaults that evaluate.yaml does not have."""
    kept = job_overrides(task_overrides, SWEEP_FIELDS, REFUSED)
    chosen = {o.key_or_group for o in OverridesParser.create().parse_overrides(kept)}
    return [*(f"{g}={choices[g]}" for g in OWN_DEFAULTS if g not in chosen), *kept]


def plan(config: BaselinesConfig, shared: list[str]) -> list[tuple[PlannedBaseline, list[str]]]:
    """Every baseline's evaluation (composed here, so that a bad setting fails before any
    work) and its overrides; a baseline that lacks a setting is planned as not run."""
    planned = []
    for baseline in config.baselines:
        run_dir = Path(config.sweep_dir) / str(baseline)
        overrides = [*shared, f"baseline={baseline}", f"out={run_dir}"]
        cfg = compose("evaluate", overrides=overrides)
        reason = unmet_requirement(OmegaConf.to_container(cfg, resolve=True))
        if reason is not None:
            planned.append((PlannedBaseline(baseline, run_dir, not_run=reason), overrides))
            continue
        resolved = dataclasses.asdict(to_dataclass(cfg, EvaluateConfig))
        planned.append((PlannedBaseline(baseline, run_dir, resolved), overrides))
    return planned + plan_trained(config, shared)


def plan_trained(
    config: BaselinesConfig, shared: list[str]
) -> list[tuple[PlannedBaseline, list[str]]]:
    """Every trained row's evaluation: the shared overrides less those the run fixes."""
    kept = [o for o in shared if not fixed_by_run(o)]
    planned = []
    for name, row in config.trained.items():
        run_dir = Path(config.sweep_dir) / name
        overrides = [*kept, f"run_dir={row.run_dir}", f"stage={row.stage}", f"out={run_dir}"]
        if not RunFolder(Path(row.run_dir)).config_file.is_file():
            reason = f"no training run in {row.run_dir}"
            planned.append((PlannedBaseline(name, run_dir, not_run=reason, label=row.label), []))
            continue
        cfg = to_dataclass(compose("evaluate", overrides=overrides), EvaluateConfig)
        resolved = dataclasses.asdict(for_trained_run(cfg, overrides))
        planned.append((PlannedBaseline(name, run_dir, resolved, label=row.label), overrides))
    return planned


def evaluate_baseline(job: PlannedBaseline, overrides: list[str]) -> bool:
    """Evaluate one baseline in its own process, unless its folder holds it finished; True
    when an evaluation ran (or failed)."""
    if job.not_run is not None:
        log.info("%s: not run: %s", job.baseline, job.not_run)
        return False
    assert job.config is not None
    if is_finished(job.run_dir, job.config):
        log.info("%s: finished in %s, skipped", job.baseline, job.run_dir)
        return False
    command = [sys.executable, str(EVALUATE_SCRIPT), *overrides]
    log.info("%s (%s): %s", job.baseline, job.row_label, shlex.join(command))
    log_file = job.run_dir / "evaluate.log"
    run_job(f"baseline {job.baseline}", "scripts/evaluate.py", command, job.run_dir, log_file)
    return True


def dry_run_line(job: PlannedBaseline) -> str:
    """What the sweep would do with ``job``: one line."""
    if job.not_run is not None:
        return f"{job.baseline}: not run ({job.not_run})"
    assert job.config is not None
    reasons = unfinished_because(job.run_dir, job.config)
    if not reasons:
        return f"{job.baseline}: finished in {job.run_dir}, would be skipped"
    return f"{job.baseline}: would be evaluated into {job.run_dir} ({', '.join(reasons)})"


def table_token_counter(config: BaselinesConfig) -> TokenCounter:
    """Text -> tokens under the policy model's tokenizer: the context column's unit."""
    return token_counter(config.policy.model)


def question_types(config: BaselinesConfig) -> QuestionTypes:
    """Each dataset's question types by question id, from the files its evaluations read:
    the table splits EM by kind of question with them (trajectories do not record types)."""
    return {
        str(dataset.name): {q.question_id: q.type for q in load_dataset(config, dataset).questions}
        for dataset in config.dataset_configs()
    }


def run_sweep(config: BaselinesConfig, task_overrides: list[str], choices: dict[str, str]) -> None:
    """The sweep of scripts/baselines.py: ``task_overrides`` its command line, ``choices``
    Hydra's chosen config groups. Evaluates every unfinished row, rewriting the table after
    each evaluation; raises RuntimeError naming the rows that failed, once all were tried."""
    shared = evaluate_overrides(task_overrides, choices)
    jobs = plan(config, shared)
    if config.dry_run:
        print("\n".join(dry_run_line(job) for job, _ in jobs))
        return
    planned = [job for job, _ in jobs]
    datasets = [str(d.name) for d in config.dataset_configs()]
    sweep_dir = Path(config.sweep_dir)
    count = table_token_counter(config) if config.context_tokens else None
    pairs = config.paired
    types = question_types(config)
    matched = None
    if config.matched_context.sweep is not None:
        matched = MatchedContext(
            Path(config.matched_context.sweep),
            config.matched_context.baseline,
            list(config.trained),
            list(config.matched_context.metrics),
        )
    if config.table_only:
        files = write_table(sweep_dir, planned, datasets, count, pairs, types, matched)
        print(files.markdown_path.read_text())
        return
    failures = []
    for job, overrides in jobs:
        ran = True
        try:
            ran = evaluate_baseline(job, overrides)
        except RuntimeError as error:  # recorded in failed.json; the other baselines go on
            log.error("%s", error)
            failures.append(str(error))
        finally:
            if ran:  # rewritten after every evaluation: a long sweep shows its progress
                write_table(sweep_dir, planned, datasets, count, pairs, types, matched)
    files = write_table(sweep_dir, planned, datasets, count, pairs, types, matched)
    print(files.markdown_path.read_text())
    log.info("wrote %s and %s", files.markdown_path, files.json_path)
    if failures:
        raise RuntimeError(f"{len(failures)} of {len(jobs)} baselines failed: {failures}")
