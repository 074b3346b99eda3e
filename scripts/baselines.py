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
<sweep_dir>/<row>, in the run's own environment and rollout settings (grasp/experiments/trained.py),
with the same datasets, n, seed and judge as the baselines.

The sweep itself lives in grasp/experiments/baseline_sweep.py, the table in grasp/experiments/baseline_table.py.

After each baseline, <sweep_dir>/table.json and table.md are rewritten: per dataset EM, F1,
JD and recall with 95% bootstrap intervals and the wall time, then pooled and macro over the
datasets, with the commit and the policy's identity once. A baseline that failed is recorded
(failed.json), shown as failed, and makes the command exit non-zero once the others are done.
"""

from __future__ import annotations

import os

from grasp.startup import one_line_errors, process_environment

# Before any other import: bm25s (through grasp.corpus) would start JAX on the GPU, which then
# preallocates 75% of it (grasp/startup.py).
os.environ.update(process_environment())

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from grasp.config import BaselinesConfig, register_configs, to_dataclass
from grasp.experiments.baseline_sweep import run_sweep

register_configs()


@hydra.main(version_base=None, config_path="../configs", config_name="baselines")
@one_line_errors
def main(cfg: DictConfig) -> None:
    hydra_config = HydraConfig.get()
    run_sweep(
        to_dataclass(cfg, BaselinesConfig),
        list(hydra_config.overrides.task),
        hydra_config.runtime.choices,
    )


if __name__ == "__main__":
    main()
