"""Evaluate a policy in the environment: roll out every question, score, summarize, write.

Output folder::

    config.json          the resolved configuration (a rerun with another one is refused)
    trajectories.jsonl   one trajectory per line, appended batch by batch
    results.json         em, f1, recall first; then tool use, errors, stop reasons, cost

An interrupted evaluation resumes: questions already in trajectories.jsonl are skipped.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from grasp.eval.summary import summarize
from grasp.rollout.engine import RolloutEngine, RolloutTimings
from grasp.rollout.trajectory import Trajectory, read_trajectories
from grasp.types import Question

log = logging.getLogger(__name__)


@dataclass
class EvaluationOutput:
    results: dict[str, Any]
    trajectories: list[Trajectory]


def evaluate_policy(
    engine: RolloutEngine,
    questions: Sequence[Question],
    out_dir: Path,
    config: dict[str, Any],
    batch_questions: int = 64,
    save_tokens: bool = False,
) -> EvaluationOutput:
    """Roll out ``questions`` in batches, appending trajectories; write results.json."""
    out_dir.mkdir(parents=True, exist_ok=True)
    _check_or_write_config(out_dir / "config.json", config)
    path = out_dir / "trajectories.jsonl"
    done = read_trajectories(path) if path.exists() else []
    done_ids = {t.question_id for t in done}
    todo = [q for q in questions if q.question_id not in done_ids]
    if done:
        log.info("resuming: %d questions done, %d to go", len(done_ids), len(todo))
    timings = RolloutTimings()
    started = time.perf_counter()
    with tqdm(total=len(questions), initial=len(done_ids), desc="evaluate", unit="q") as bar:
        for start in range(0, len(todo), batch_questions):
            batch = engine.run(todo[start : start + batch_questions])
            with path.open("a") as handle:
                for trajectory in batch.trajectories:
                    handle.write(json.dumps(trajectory.to_json(save_tokens)) + "\n")
            done.extend(batch.trajectories)
            for name in ("generation", "environment", "total"):
                setattr(timings, name, getattr(timings, name) + getattr(batch.timings, name))
            bar.update(len(todo[start : start + batch_questions]))
    wall = time.perf_counter() - started
    wanted = {q.question_id for q in questions}
    trajectories = [t for t in done if t.question_id in wanted]
    results = summarize(trajectories)
    results["wall_time_s"] = wall
    results["wall_time_per_question_s"] = wall / max(len(todo), 1)
    results["rollout_time_s"] = {
        "generation": timings.generation,
        "environment": timings.environment,
        "environment_share": timings.environment / timings.total if timings.total else 0.0,
    }
    results["questions"] = len(wanted)
    results["config"] = config
    (out_dir / "results.json").write_text(json.dumps(results, indent=2, default=str))
    return EvaluationOutput(results, trajectories)


def _check_or_write_config(path: Path, config: dict[str, Any]) -> None:
    text = json.dumps(config, indent=2, sort_keys=True, default=str)
    if path.exists():
        if json.loads(path.read_text()) != json.loads(text):
            raise ValueError(
                f"{path.parent} holds an evaluation with another configuration "
                f"(see {path}); choose another out= or delete that folder"
            )
        return
    path.write_text(text)
