"""The environment benchmark: tool calls per second, and the environment's share of a real
rollout's time.

``run_benchmark(config)`` runs scripted episodes (no model) and one rollout with the configured
policy; ``table(results)`` is its printed table. ``scripts/bench_env.py`` is the entry point.
"""

from __future__ import annotations

import logging
from typing import TypedDict

from grasp.bench.config import BenchEnvConfig
from grasp.data import load_questions
from grasp.data.config import dataset_path
from grasp.env.environment import RetrievalEnvironment
from grasp.paths import default_index_dir
from grasp.rollout.engine import RolloutConfig, RolloutEngine
from grasp.rollout.factory import build_policy
from grasp.rollout.scripted import HeuristicSearchPolicy
from grasp.serve.client import open_index

log = logging.getLogger("bench_env")


class ScriptedRow(TypedDict):
    """Scripted episodes at once: the environment's seconds and tool calls per second."""

    episodes: int
    tool_calls: int
    environment_s: float
    tool_calls_per_s: float
    token_bookkeeping: bool


HfRollout = TypedDict(
    "HfRollout",
    {
        "questions": int,
        "turns": int,
        "tool_calls": int,
        "generation_s": float,
        "environment_s": float,
        "total_s": float,
        "environment_share": float,
        "generated_tokens": int,
        "generated_tokens_per_s": float,
        "target_environment_share_below": float,
        "pass": bool,
    },
)
"""One rollout with the configured policy, its time split by who spent it (``pass``: the
environment's share under the target; a keyword, hence this form)."""


class EnvReport(TypedDict):
    """The benchmark's JSON report."""

    scripted: list[ScriptedRow]
    hf_rollout: HfRollout


def scripted_throughput(env, questions, episodes: int, chat) -> ScriptedRow:
    """Run ``episodes`` scripted episodes at once; environment time and tool calls/s."""
    group = -(-episodes // len(questions))  # ceil: enough samples per question to reach the count
    chosen = questions[: max(1, episodes // group)]
    engine = RolloutEngine(env, HeuristicSearchPolicy(), RolloutConfig(group_size=group), chat=chat)
    batch = engine.run(chosen)
    trajectories = batch.scored(engine.config.reward)
    calls = sum(sum(t.tool_calls.values()) + sum(t.errors.values()) for t in trajectories)
    return {
        "episodes": len(trajectories),
        "tool_calls": calls,
        "environment_s": batch.timings.environment,
        "tool_calls_per_s": calls / batch.timings.environment,
        "token_bookkeeping": chat is not None,
    }


def run_benchmark(config: BenchEnvConfig) -> EnvReport:
    """Scripted throughput at each episode count, with and without token bookkeeping, then one
    rollout of ``hf_questions`` with the configured policy; the JSON report."""
    name = config.dataset.name
    questions = load_questions(name, "normalized", path=dataset_path(config.dataset, config.split))
    directory = default_index_dir(name, config.split)
    index = open_index(config.index, directory, questions).warm_up()
    env = RetrievalEnvironment(index, config.env)
    built = build_policy(config.policy, env.prompt_tool_schemas)
    scripted = []
    for count in config.episode_counts:
        for chat in (None, built.chat):
            row = scripted_throughput(env, questions, count, chat)
            scripted.append(row)
            log.info("scripted %s", row)
    engine = RolloutEngine(env, built.policy, config.rollout, chat=built.chat)
    batch = engine.run(questions[: config.hf_questions])
    t = batch.timings
    trajectories = batch.scored(config.rollout.reward)
    generated = sum(tr.generated_tokens for tr in trajectories)
    hf_rollout: HfRollout = {
        "questions": config.hf_questions,
        "turns": t.turns,
        "tool_calls": sum(sum(tr.tool_calls.values()) for tr in trajectories),
        "generation_s": t.generation,
        "environment_s": t.environment,
        "total_s": t.total,
        "environment_share": t.environment / t.total,
        "generated_tokens": generated,
        "generated_tokens_per_s": generated / t.generation,
        "target_environment_share_below": 0.10,
        "pass": t.environment / t.total < 0.10,
    }
    return {"scripted": scripted, "hf_rollout": hf_rollout}


def table(results: EnvReport) -> str:
    """The scripted rows as a Markdown table, then the rollout's split in one sentence."""
    lines = [
        "| episodes | token bookkeeping | tool calls | env seconds | tool calls/s |",
        "|---:|---|---:|---:|---:|",
    ]
    for row in results["scripted"]:
        lines.append(
            f"| {row['episodes']} | {row['token_bookkeeping']} | {row['tool_calls']} | "
            f"{row['environment_s']:.2f} | {row['tool_calls_per_s']:.0f} |"
        )
    hf = results["hf_rollout"]
    lines.append(
        f"\nSmolLM2 rollout, {hf['questions']} episodes: generation {hf['generation_s']:.1f}s, "
        f"environment {hf['environment_s']:.2f}s -> environment share {hf['environment_share']:.1%} "
        f"({hf['generated_tokens_per_s']:.0f} generated tokens/s)"
    )
    return "\n".join(lines)
