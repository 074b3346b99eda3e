"""Evaluate a policy on a bundled dev set in the GRASP environment.

    python scripts/evaluate.py policy=scripted n=100 out=runs/eval-scripted
    python scripts/evaluate.py policy=hf n=50 out=runs/eval-smollm2
    python scripts/evaluate.py dataset=musique policy=openai policy.base_url=http://localhost:8000/v1

Writes results.json (em, f1, recall, tool use, parse errors, stop reasons, turns, tokens,
wall time) and trajectories.jsonl into out=; an interrupted run resumes where it stopped.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import hydra
from omegaconf import DictConfig

from grasp.config import (
    REPO_ROOT,
    EvaluateConfig,
    dataset_path,
    default_index_dir,
    register_configs,
    to_dataclass,
)
from grasp.corpus import CorpusIndex, build_index
from grasp.data import load_questions, sample_questions
from grasp.env.environment import RetrievalEnvironment
from grasp.eval.policy_eval import evaluate_policy
from grasp.rollout.engine import RolloutEngine
from grasp.rollout.factory import build_policy

log = logging.getLogger("evaluate")
register_configs()


@hydra.main(version_base=None, config_path="../configs", config_name="evaluate")
def main(cfg: DictConfig) -> None:
    config = to_dataclass(cfg, EvaluateConfig)
    config.env.validate()
    name = config.dataset.name
    path = dataset_path(config.dataset, config.split)
    questions = load_questions(name, config.dataset.source, path=path, split=config.split)
    directory = (
        Path(config.index_dir) if config.index_dir else default_index_dir(name, config.split)
    )
    source = {"dataset": str(name), "split": config.split, "path": str(path)}
    build_index(questions, config.index, directory, source=source)
    index = CorpusIndex.load(directory, config.index)
    env = RetrievalEnvironment(index, config.env)
    built = build_policy(config.policy, env.prompt_tool_schemas)
    engine = RolloutEngine(env, built.policy, config.rollout, chat=built.chat)
    sample = sample_questions(questions, config.n, seed=config.seed)
    out = (
        Path(config.out)
        if config.out
        else REPO_ROOT / "runs" / "evaluate" / f"{name}-{config.policy.kind}"
    )
    log.info("%s: %d questions, policy %s -> %s", name, len(sample), config.policy.kind, out)
    output = evaluate_policy(
        engine, sample, out, dataclasses.asdict(config), config.batch_questions, config.save_tokens
    )
    r = output.results
    print(
        f"{name} ({r['questions']} questions, policy={config.policy.kind}): "
        f"EM {r['em']:.3f}  F1 {r['f1']:.3f}  recall {r['recall']:.3f} "
        f"(all gold {r['recall_all_gold']:.3f}, read {r['read_recall']:.3f})  "
        f"turns {r['turns_per_episode']:.2f}  parse errors {r['parse_error_rate']:.3f}  "
        f"wall {r['wall_time_s']:.1f}s"
    )
    print(f"tool calls per episode: {r['tool_calls_per_episode']}  stops: {r['stop_reasons']}")
    log.info("wrote %s", out)


if __name__ == "__main__":
    main()
