"""Evaluate a policy in the environment: roll out every question, score, summarize, write.

Output folder::

    config.json          the configuration that shapes the trajectories (a rerun with
                         another one is refused; the judge may change)
    trajectories.jsonl   one trajectory per line, appended batch by batch
    rollout_log.jsonl    one line per finished batch: its question ids and its seconds, so
                         that a resumed evaluation reports the time of every run, not its last
    judge_cache.jsonl    the judge's verdicts (when a judge is configured)
    results.json         em, f1, jd, recall first; then supporting-sentence recall, tool use,
                         errors, stop reasons, cost, the configuration and its provenance
    results.md           the same as tables

An interrupted evaluation resumes: questions already in trajectories.jsonl are skipped, and
answers already in judge_cache.jsonl are not judged again. Its wall time is the sum over
rollout_log.jsonl of the batches whose questions are kept; a batch killed before its log line
was written is not counted, and ``questions_timed`` < ``questions`` says so.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from grasp.corpus.corpus import SentenceCorpus
from grasp.eval.jsonl import end_last_line, read_appended
from grasp.eval.judge import JUDGE_CACHE_FILE, Judge, judge_trajectories
from grasp.eval.summary import EpisodeScores, summarize
from grasp.eval.supporting import seen_sentence_ids, supporting_sentences
from grasp.eval.sweep import config_differences
from grasp.eval.tables import results_markdown
from grasp.metrics import all_gold_found, paragraph_recall
from grasp.rollout.engine import RolloutEngine, RolloutTimings
from grasp.rollout.trajectory import Trajectory
from grasp.types import Question

log = logging.getLogger(__name__)

ROLLOUT_LOG_FILE = "rollout_log.jsonl"


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
    remedy = "delete it to roll out every question again"
    return read_appended(path, Trajectory.from_json, "a trajectory", remedy)


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
    log_path = out_dir / ROLLOUT_LOG_FILE
    end_last_line(log_path)
    run_id = uuid.uuid4().hex[:12]
    with tqdm(total=len(questions), initial=len(done_ids), desc="evaluate", unit="q") as bar:
        for start in range(0, len(todo), batch_questions):
            chunk = todo[start : start + batch_questions]
            started = time.perf_counter()
            batch = engine.run(chunk)
            with path.open("a") as handle:
                for trajectory in batch.trajectories:
                    handle.write(json.dumps(trajectory.to_json(save_tokens)) + "\n")
            wall = time.perf_counter() - started
            with log_path.open("a") as handle:
                line = _log_line(run_id, chunk, batch.timings, wall, provenance)
                handle.write(json.dumps(line) + "\n")
            done.extend(batch.trajectories)
            bar.update(len(chunk))
    wanted = {q.question_id for q in questions}
    trajectories = [t for t in done if t.question_id in wanted]
    timed = rollout_time(log_path, wanted)
    scoring_started = time.perf_counter()
    scores = score_episodes(engine.env.index.corpus, questions, trajectories)
    if judge is not None:
        scores.verdicts = judge_trajectories(judge, trajectories, out_dir / JUDGE_CACHE_FILE)
    results = summarize(trajectories, scores)
    results["scoring_time_s"] = time.perf_counter() - scoring_started
    results["wall_time_s"] = timed["wall"]
    results["wall_time_per_question_s"] = timed["wall"] / max(timed["questions"], 1)
    results["rollout_time_s"] = {
        "generation": timed["generation"],
        "environment": timed["environment"],
        "environment_share": timed["environment"] / timed["total"] if timed["total"] else 0.0,
    }
    results["questions"] = len(wanted)
    results["questions_rolled_out"] = len(todo)
    results["questions_timed"] = timed["questions"]
    results["rollout_runs"] = timed["runs"]
    results["rollout_code"] = timed["code"]
    results["config"] = config
    results["provenance"] = provenance
    (out_dir / "results.json").write_text(json.dumps(results, indent=2, default=str))
    title = f"Evaluation of {out_dir.name}"
    markdown = results_markdown(title, [(out_dir.name, results)], provenance or {}, config)
    (out_dir / "results.md").write_text(markdown)
    return EvaluationOutput(results, trajectories, scores)


def _log_line(
    run_id: str,
    questions: Sequence[Question],
    timings: RolloutTimings,
    wall: float,
    provenance: dict[str, Any] | None,
) -> dict[str, Any]:
    return {
        "run": run_id,
        "code": (provenance or {}).get("code"),
        "question_ids": [q.question_id for q in questions],
        "wall_s": wall,
        "generation_s": timings.generation,
        "environment_s": timings.environment,
        "total_s": timings.total,
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def rollout_time(path: Path, wanted: set[str]) -> dict[str, Any]:
    """Seconds spent rolling out ``wanted``, summed over the batches ``path`` logged.

    A batch counts when every one of its questions is wanted (a folder reused for a subset
    counts only whole batches). ``questions`` is how many wanted questions the counted batches
    cover, ``runs`` how many evaluation runs logged them and ``code`` the code versions that
    rolled them out (one, unless a resumed run had another commit). A torn last line (a run
    killed while writing it) is skipped; its batch counts as untimed.
    """
    timed = {"wall": 0.0, "generation": 0.0, "environment": 0.0, "total": 0.0}
    covered: set[str] = set()
    runs: set[str] = set()
    code: list[Any] = []
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                log.warning("%s: skipping a line that is not JSON (an interrupted write)", path)
                continue
            ids = set(entry["question_ids"])
            if not ids <= wanted or ids & covered:
                continue
            covered |= ids
            runs.add(entry["run"])
            if entry.get("code") not in code:
                code.append(entry.get("code"))
            timed["wall"] += entry["wall_s"]
            timed["generation"] += entry["generation_s"]
            timed["environment"] += entry["environment_s"]
            timed["total"] += entry["total_s"]
    return {**timed, "questions": len(covered), "runs": len(runs), "code": code}


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
        differences = config_differences(json.loads(path.read_text()), json.loads(text))
        if differences:
            raise ValueError(
                f"{path.parent} holds an evaluation with another configuration "
                f"({', '.join(differences)} differ; see {path}); choose another out= "
                "or delete that folder"
            )
        return
    path.write_text(text)
