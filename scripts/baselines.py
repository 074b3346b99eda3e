"""The baseline table: evaluate every baseline with the same backend, then compare them.

    python scripts/baselines.py                                # policy=hf, every baseline
    python scripts/baselines.py baselines=[direct,ircot] n=20 'datasets=[hotpotqa]'
    python scripts/baselines.py policy=qwen2.5_3b_vllm judge=openai judge.base_url=http://h:8000/v1
    python scripts/baselines.py baseline.reranker.path=PATH    # single_step_rerank runs too
    python scripts/baselines.py sweep_dir=results/baselines/hf dry_run=true  # what would run

Each baseline of ``baselines`` (configs/baseline/ names; default all of them) is evaluated by
scripts/evaluate.py in a process of its own (which frees the previous backend's memory, vLLM's
included) with this command's overrides plus baseline=<name> and out=<sweep_dir>/<name>: the
same policy, datasets, n, seed and judge for every row (configs/baselines.yaml: evaluate.yaml
with policy=hf). The evaluation's output also goes to <sweep_dir>/<name>/evaluate.log. A
finished baseline (results.json of the same configuration) is skipped; an interrupted one
resumes through evaluate.py's own resume; single_step_rerank is not run unless
baseline.reranker.path is set, and its row says so.

Trained policies are rows too (``trained`` in configs/baselines.yaml: row name -> run_dir,
stage, label): each is evaluated by ``scripts/evaluate.py run_dir=R stage=S`` into
<sweep_dir>/<row>, in the run's own environment and rollout settings (grasp/eval/trained.py),
with the same datasets, n, seed and judge as the baselines.

After each baseline, <sweep_dir>/table.json and table.md are rewritten: per dataset EM, F1,
JD and recall with 95% bootstrap intervals and the wall time, then pooled and macro over the
datasets, with the commit and the policy's identity once. A baseline that failed is recorded
(failed.json), shown as failed, and makes the command exit non-zero once the others are done.
"""

from __future__ import annotations

import dataclasses
import logging
import shlex
import sys
from dataclasses import fields
from pathlib import Path

import hydra
from hydra import compose
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, OmegaConf

from grasp.config import BaselinesConfig, EvaluateConfig, register_configs, to_dataclass
from grasp.eval.baseline_table import (
    PlannedBaseline,
    is_finished,
    unfinished_because,
    unmet_requirement,
    write_table,
)
from grasp.eval.context import TokenCounter
from grasp.eval.sweep import job_overrides, run_job
from grasp.eval.trained import fixed_by_run, for_trained_run
from grasp.models import prepare_model
from grasp.paths import REPO_ROOT

log = logging.getLogger("baselines")
register_configs()

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
        if not (Path(row.run_dir) / "config.json").is_file():
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


def token_counter(config: BaselinesConfig) -> TokenCounter:
    """Text -> tokens under the policy model's tokenizer: the context column's unit."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(prepare_model(config.policy.model)))
    return lambda text: len(tokenizer(text, add_special_tokens=False).input_ids)


@hydra.main(version_base=None, config_path="../configs", config_name="baselines")
def main(cfg: DictConfig) -> None:
    config = to_dataclass(cfg, BaselinesConfig)
    hydra_config = HydraConfig.get()
    shared = evaluate_overrides(list(hydra_config.overrides.task), hydra_config.runtime.choices)
    jobs = plan(config, shared)
    if config.dry_run:
        print("\n".join(dry_run_line(job) for job, _ in jobs))
        return
    planned = [job for job, _ in jobs]
    datasets = [str(d.name) for d in config.dataset_configs()]
    sweep_dir = Path(config.sweep_dir)
    count = token_counter(config) if config.context_tokens else None
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
                write_table(sweep_dir, planned, datasets, count)
    files = write_table(sweep_dir, planned, datasets, count)
    print(files.markdown_path.read_text())
    log.info("wrote %s and %s", files.markdown_path, files.json_path)
    if failures:
        raise RuntimeError(f"{len(failures)} of {len(jobs)} baselines failed: {failures}")


if __name__ == "__main__":
    main()
