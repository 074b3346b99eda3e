"""Evaluate a policy on the dev sets in the GRASP environment: the paper's protocol.

    python scripts/evaluate.py policy=scripted                           # all three, n=500
    python scripts/evaluate.py 'datasets=[hotpotqa,musique]' policy=hf n=50
    python scripts/evaluate.py dataset=musique policy=openai policy.base_url=http://localhost:8000/v1
    python scripts/evaluate.py policy=qwen2.5_3b_vllm judge=openai judge.base_url=http://host:8000/v1
    python scripts/evaluate.py run_dir=runs/cpu_grasp                    # a trained run, its own env
    python scripts/evaluate.py run_dir=runs/cpu_grasp stage=warm_start   # the policy GRPO started from
    python scripts/evaluate.py run_dir=results/cpu_grasp n=8 'datasets=[hotpotqa]' show=1

Each dataset: a seed-42 sample of n questions (all of them where fewer exist), searched in the
dataset's own pooled sentence index, written to out/<dataset>/ (config.json,
trajectories.jsonl, judge_cache.jsonl, results.json, results.md). Then out/results.json and
out/results.md: every dataset, all questions pooled, and the macro mean over datasets, each
metric with its 95% bootstrap interval, with the code's commit and the models' identities.
``show=K`` prints the first K trajectories of each dataset turn by turn.
An interrupted evaluation resumes where it stopped, without judging any answer twice.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from grasp.baselines import build_baseline_policy
from grasp.config import (
    REPO_ROOT,
    DatasetConfig,
    EvaluateConfig,
    dataset_path,
    register_configs,
    to_dataclass,
)
from grasp.data import DataSource, load_questions, sample_questions
from grasp.env.environment import RetrievalEnvironment, check_top_k
from grasp.eval.judge import build_judge
from grasp.eval.ladder import ladder_markdown, pool_sections
from grasp.eval.policy_eval import evaluate_policy
from grasp.eval.provenance import (
    code_version,
    dataset_identity,
    judge_identity,
    policy_identity,
)
from grasp.eval.summary import NOT_RECORDED, overall_summary
from grasp.eval.tables import results_markdown
from grasp.eval.trained import for_trained_run
from grasp.eval.transcript import transcript
from grasp.rollout.engine import RolloutEngine
from grasp.rollout.factory import BuiltPolicy
from grasp.serve.client import open_index
from grasp.threads import set_threads
from grasp.types import Question

log = logging.getLogger("evaluate")
register_configs()

RUN_FIELDS = (
    "split",
    "n",
    "seed",
    "index",
    "env",
    "policy",
    "baseline",
    "rollout",
    "batch_questions",
)
"""Settings that shape a dataset's trajectories: a rerun into the same folder must keep them."""


def make_policy(
    config: EvaluateConfig, env: RetrievalEnvironment, reuse: BuiltPolicy | None = None
) -> BuiltPolicy:
    """The policy that acts in ``env``: the one place where the evaluation chooses who acts.

    ``reuse`` is the policy built for the previous dataset. Today's policies depend on the
    environment only through its tool schemas, which come from ``config.env`` and are the same
    for every dataset, so a model is loaded once (and a vLLM engine, which cannot be built
    twice in one process, is created once).
    """
    if reuse is not None:
        return reuse
    return build_baseline_policy(config.baseline, config.policy, env)


@dataclass
class DatasetSetup:
    """One dataset ready to evaluate."""

    questions: list[Question]
    """The seeded sample."""
    env: RetrievalEnvironment
    """The environment over the dataset's pooled index."""
    run_config: dict[str, Any]
    """What config.json of the dataset's folder records."""


@dataclass
class DatasetInput:
    """One dataset's questions, read (and validated) before any evaluation starts."""

    questions: list[Question]
    path: Path | None
    """The file they came from; None for the hub."""


def load_dataset(config: EvaluateConfig, dataset: DatasetConfig) -> DatasetInput:
    """Read every question of ``dataset``; a missing or malformed file fails here, naming it."""
    path = None
    if dataset.source is DataSource.NORMALIZED:
        path = dataset_path(dataset, config.split)
    elif dataset.path:
        path = Path(dataset.path)
    questions = load_questions(dataset.name, dataset.source, path=path, split=config.split)
    return DatasetInput(questions, path)


def prepare_dataset(
    config: EvaluateConfig, dataset: DatasetConfig, loaded: DatasetInput
) -> DatasetSetup:
    """Sample the dataset, build (or reuse) its index, make its environment."""
    name = dataset.name
    questions, path = loaded.questions, loaded.path
    index_root = Path(config.index_root) if config.index_root else REPO_ROOT / "indexes"
    directory = index_root / f"{name}-{config.split}"
    source = {"dataset": str(name), "split": config.split, "path": str(path)}
    index = open_index(config.index, directory, questions, source=source)
    env = RetrievalEnvironment(index, config.env)
    sample = sample_questions(questions, config.n, seed=config.seed)
    log.info("%s: %d of %d questions, index %s", name, len(sample), len(questions), directory)
    resolved = dataclasses.asdict(config)
    run_config = {key: resolved[key] for key in RUN_FIELDS}
    run_config["dataset"] = dataset_identity(str(name), str(dataset.source), path)
    return DatasetSetup(sample, env, run_config)


def run(config: EvaluateConfig) -> dict[str, Any]:
    """Evaluate every configured dataset, then write and return the overall results."""
    config.validate()
    out = Path(config.out) if config.out else REPO_ROOT / "runs" / "evaluate" / config.policy.kind
    provenance = {
        "code": code_version(),
        "policy": policy_identity(config.policy),
        "judge": judge_identity(config.judge),
    }
    judge = build_judge(config.judge)
    built: BuiltPolicy | None = None
    parts, per_dataset = {}, {}
    # Every input is read first: a bad file of the last dataset must not wait for the others.
    inputs = [(dataset, load_dataset(config, dataset)) for dataset in config.dataset_configs()]
    for _, loaded in inputs:  # before any index is built
        check_top_k(config.env, loaded.questions)
    for dataset, loaded in inputs:
        name = str(dataset.name)
        setup = prepare_dataset(config, dataset, loaded)
        built = make_policy(config, setup.env, reuse=built)
        engine = RolloutEngine(setup.env, built.policy, config.rollout, chat=built.chat)
        output = evaluate_policy(
            engine,
            setup.questions,
            out / name,
            setup.run_config,
            config.batch_questions,
            config.save_tokens,
            judge=judge,
            provenance=provenance,
        )
        for trajectory in output.trajectories[: config.show]:
            print(f"\n{transcript(trajectory)}\n")
        parts[name] = (output.trajectories, output.scores)
        per_dataset[name] = {
            k: v for k, v in output.results.items() if k not in ("config", "provenance")
        }
    overall = overall_summary(parts)
    pooled = overall["pooled"]
    pooled["ladder"] = pool_sections([r["ladder"] for r in per_dataset.values()])
    pooled["wall_time_s"] = sum(r["wall_time_s"] for r in per_dataset.values())
    for key in ("questions_rolled_out", "questions_timed"):
        pooled[key] = sum(r[key] for r in per_dataset.values())
    timed = pooled["questions_timed"]
    pooled["wall_time_per_question_s"] = pooled["wall_time_s"] / timed if timed else NOT_RECORDED
    results = {
        "datasets": per_dataset,
        "overall": overall,
        "questions": sum(r["questions"] for r in per_dataset.values()),
        "config": dataclasses.asdict(config),
        "provenance": provenance,
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=2, default=str))
    rows = list(per_dataset.items())
    macro = None
    if len(rows) > 1:
        rows.append(("overall (pooled)", pooled))
        macro = overall["macro"]
    title = f"Evaluation: policy {config.policy.kind}"
    markdown = results_markdown(title, rows, provenance, results["config"], macro)
    markdown += ladder_markdown(*rows[-1])  # the pooled ladder, or the one dataset's
    (out / "results.md").write_text(markdown)
    print(markdown)
    log.info("wrote %s", out)
    return results


@hydra.main(version_base=None, config_path="../configs", config_name="evaluate")
def main(cfg: DictConfig) -> None:
    config = to_dataclass(cfg, EvaluateConfig)
    set_threads(config.threads)
    if config.run_dir:
        config = for_trained_run(config, HydraConfig.get().overrides.task)
    run(config)


if __name__ == "__main__":
    main()
