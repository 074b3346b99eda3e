"""Evaluate a policy in the environment: roll out every question, score, summarize, write.

Output folder::

    config.json          the configuration that shapes the trajectories (a rerun with
                         another one is refused; the judge may change)
    trajectories.jsonl   one trajectory per line, appended batch by batch
    judge_cache.jsonl    the judge's verdicts (when a judge is configured)
    results.json         em, f1, jd, recall first; then supporting-sentence recall, tool use,
                         errors, stop reasons, cost, the configuration and its provenance
    results.md           the same as tables

An interrupted evaluation resumes: questions already in trajectories.jsonl are skipped, and
answers already in judge_cache.jsonl are not judged again.
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

from grasp.corpus.corpus import SentenceCorpus
from grasp.eval.judge import JUDGE_CACHE_FILE, Judge, judge_trajectories
from grasp.eval.summary import EpisodeScores, summarize
from grasp.eval.supporting import seen_sentence_ids, supporting_sentences
from grasp.eval.tables import results_markdown
from grasp.metrics import all_gold_found, paragraph_recall
from grasp.rollout.engine import RolloutEngine, RolloutTimings
from grasp.rollout.trajectory import Trajectory
from grasp.types import Question

log = logging.getLogger(__name__)


@dataclass
class EvaluationOutput:
    results: dict[str, Any]
    trajectories: list[Trajectory]
    scores: EpisodeScores
    """Supporting-sentence recall and judge verdicts by episode id."""


def read_finished(path: Path) -> list[Trajectory]:
    """The trajectories an earlier run appended to ``path``.

    A run killed while appending leaves a torn last line: it is cut off the file (its question
    is rolled out again) with a warning. A bad line before the last is corruption, not an
    interruption: ValueError naming the file and the line.
    """
    lines = path.read_bytes().split(b"\n")
    trajectories, kept = [], 0
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            kept += len(line) + 1
            continue
        try:
            trajectories.append(Trajectory.from_json(json.loads(line)))
        except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError) as error:
            if any(rest.strip() for rest in lines[number:]):
                raise ValueError(
                    f"{path}: line {number} is not a trajectory ({error}); the file is "
                    "corrupted: delete it to roll out every question again"
                ) from None
            log.warning("%s: dropping a torn last line (an interrupted write)", path)
            with path.open("r+b") as handle:
                handle.truncate(kept)
            return trajectories
        kept += len(line) + 1
    if lines[-1].strip():  # a whole last line whose newline was not written yet
        with path.open("ab") as handle:
            handle.write(b"\n")
    return trajectories


def evaluate_policy(
    engine: RolloutEngine,
    questions: Sequence[Question],
    out_dir: Path,
    config: dict[str, Any],
    batch_questions: int = 64,
    save_tokens: bool = False,
    judge: Judge | None = None,
    provenance: dict[str, Any] | None = None,
) -> EvaluationOutput:
    """Roll out ``questions`` in batches, appending trajectories; score; write the results.

    ``config`` is what must match on resume (config.json); ``provenance`` (code version,
    policy and judge identity) goes into results.json and results.md as it is.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    _check_or_write_config(out_dir / "config.json", config)
    path = out_dir / "trajectories.jsonl"
    done = read_finished(path) if path.exists() else []
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
    scoring_started = time.perf_counter()
    scores = score_episodes(engine.env.index.corpus, questions, trajectories)
    if judge is not None:
        scores.verdicts = judge_trajectories(judge, trajectories, out_dir / JUDGE_CACHE_FILE)
    results = summarize(trajectories, scores)
    results["scoring_time_s"] = time.perf_counter() - scoring_started
    results["wall_time_s"] = wall
    results["wall_time_per_question_s"] = wall / max(len(todo), 1)
    results["rollout_time_s"] = {
        "generation": timings.generation,
        "environment": timings.environment,
        "environment_share": timings.environment / timings.total if timings.total else 0.0,
    }
    results["questions"] = len(wanted)
    results["questions_rolled_out"] = len(todo)
    results["config"] = config
    results["provenance"] = provenance
    (out_dir / "results.json").write_text(json.dumps(results, indent=2, default=str))
    title = f"Evaluation of {out_dir.name}"
    markdown = results_markdown(title, [(out_dir.name, results)], provenance or {}, config)
    (out_dir / "results.md").write_text(markdown)
    return EvaluationOutput(results, trajectories, scores)


def score_episodes(
    corpus: SentenceCorpus, questions: Sequence[Question], trajectories: Sequence[Trajectory]
) -> EpisodeScores:
    """Supporting-sentence recall of every episode whose question has sentence-level facts."""
    by_id = {q.question_id: q for q in questions}
    scores = EpisodeScores()
    for t in trajectories:
        supporting = supporting_sentences(corpus, by_id[t.question_id])
        if supporting is None:
            continue
        seen = seen_sentence_ids(corpus, t)
        # The set recall of grasp.metrics, over sentence ids instead of paragraph ids.
        scores.supporting_recall[t.episode_id] = paragraph_recall(seen, supporting.sentence_ids)
        scores.supporting_all_found[t.episode_id] = all_gold_found(seen, supporting.sentence_ids)
    return scores


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
