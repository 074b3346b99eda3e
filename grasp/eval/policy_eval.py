"""Evaluate a policy in the environment: roll out every question, score, summarize, write.

Output folder::

    config.json          the configuration that shapes the trajectories (a rerun with
                         another one is refused; the judge may change)
    trajectories.jsonl   one trajectory per line, appended batch by batch (committed as
                         trajectories.jsonl.xz: grasp.compressed; a resumed run that has
                         questions to roll out makes it plain again first)
    rollout_log.jsonl    one line per finished batch: its question ids and its seconds, so
                         that a resumed evaluation reports the time of every run, not its last
    judge_cache.jsonl    the judge's verdicts (when a judge is configured)
    results.json         em, f1, jd, recall first; then supporting-sentence recall, tool use,
                         errors, stop reasons, cost, the ladder (grasp.eval.ladder), the
                         configuration and its provenance
    results.md           the same as tables

An interrupted evaluation resumes: questions already in trajectories.jsonl are skipped (those
whose episodes ended in a generation error are rolled out again), and answers already in
judge_cache.jsonl are not judged again. A run that rolls out nothing and whose results would
restate results.json (the same values, policy and judge) leaves results.json and results.md
as they are, so a finished dataset keeps the code version that produced it. One process at a
time writes a folder (``grasp.eval.resume``), and an episode counts once however many lines
name it. Its wall time is the sum over rollout_log.jsonl of the batches whose questions are
kept; a batch killed before its log line was written is not counted, and
``questions_timed`` < ``questions`` says so.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from tqdm.auto import tqdm

from grasp.compressed import compress, decompress, stored_path
from grasp.corpus.corpus import SentenceCorpus
from grasp.eval.config_diff import config_differences, flatten, predates
from grasp.eval.jsonl import end_last_line, read_appended
from grasp.eval.judge import JUDGE_CACHE_FILE, Judge, judge_trajectories
from grasp.eval.ladder import ladder_markdown, ladder_section
from grasp.eval.results import (
    CONFIG_FILE,
    NOT_RECORDED,
    RESULTS_FILE,
    DatasetEvaluation,
    DatasetResults,
    Mean,
    RolloutTime,
)
from grasp.eval.resume import FinishedEpisodes, collect, failed, locked, write_atomic
from grasp.eval.summary import EpisodeScores, summarize
from grasp.eval.supporting import seen_sentence_ids, supporting_sentences
from grasp.eval.tables import results_markdown
from grasp.metrics import all_gold_found, paragraph_recall
from grasp.rollout.engine import RolloutEngine, RolloutTimings
from grasp.rollout.trajectory import TRAJECTORIES_FILE, Trajectory
from grasp.types import Question

if TYPE_CHECKING:  # its module loads model libraries
    from grasp.eval.provenance import CodeVersion

log = logging.getLogger(__name__)

ROLLOUT_LOG_FILE = "rollout_log.jsonl"


@dataclass
class EvaluationOutput:
    results: DatasetEvaluation
    """What results.json holds."""
    trajectories: list[Trajectory]
    scores: EpisodeScores
    """Supporting-sentence recall and judge verdicts by episode id."""


GENERATION_ERROR_SHARE = 0.5
"""Share of a dataset's episodes beyond which generation errors fail the evaluation."""


class GenerationErrorsError(RuntimeError):
    """Most episodes of an evaluation ended because the policy's backend failed."""


def read_finished(path: Path) -> FinishedEpisodes:
    """The episodes an earlier run appended to ``path``, one trajectory each (``collect``).

    A run killed while appending leaves a torn last line: it is cut off the file (its question
    is rolled out again) with a warning. A bad line before the last is corruption, not an
    interruption: ValueError naming the file and the line. Lines repeating an episode that
    already has a trajectory are dropped with a warning.
    """
    remedy = "delete it to roll out every question again"
    finished = collect(read_appended(path, Trajectory.from_json, "a trajectory", remedy))
    if finished.repeated:
        log.warning(
            "%s: %d lines repeat an episode that already has a trajectory; the first of each "
            "is kept",
            path,
            finished.repeated,
        )
    return finished


@dataclass
class RolledOut:
    finished: FinishedEpisodes
    rolled_out: int
    """Questions rolled out by this run (the others were in the file already)."""


def roll_out(
    engine: RolloutEngine,
    questions: Sequence[Question],
    out_dir: Path,
    batch_questions: int,
    save_tokens: bool,
    provenance: dict[str, Any] | None,
    max_error_share: float = GENERATION_ERROR_SHARE,
) -> RolledOut:
    """Roll out every question without a finished trajectory in ``out_dir``, batch by batch.

    Questions whose episodes ended in a generation error are rolled out again. Stops with
    GenerationErrorsError as soon as this run's generation errors alone exceed
    ``max_error_share`` of the dataset's episodes: the backend is failing, and the rest
    of the run could not bring the share back under it.
    """
    path = out_dir / TRAJECTORIES_FILE
    stored = stored_path(path)
    finished = read_finished(stored) if stored else FinishedEpisodes()
    group_size = engine.config.group_size
    done_ids = finished.done_question_ids(group_size)
    todo = [q for q in questions if q.question_id not in done_ids]
    if todo and stored is not None:
        decompress(path)  # appends go to the plain file; a finished one stays as stored
    seen = {t.question_id for t in finished.trajectories}
    retried = sum(1 for q in todo if q.question_id in seen)
    if finished.by_episode:
        log.info(
            "resuming: %d questions done, %d to go (%d after a generation error)",
            len(questions) - len(todo),
            len(todo),
            retried,
        )
    log_path = out_dir / ROLLOUT_LOG_FILE
    end_last_line(log_path)
    run_id = uuid.uuid4().hex[:12]
    episodes = len(questions) * group_size
    errors = 0
    with tqdm(
        total=len(questions), initial=len(questions) - len(todo), desc="evaluate", unit="q"
    ) as bar:
        for start in range(0, len(todo), batch_questions):
            chunk = todo[start : start + batch_questions]
            started = time.perf_counter()
            batch = engine.run(chunk)
            trajectories = batch.scored(engine.config.reward)
            with path.open("a") as handle:
                for trajectory in trajectories:
                    handle.write(json.dumps(trajectory.to_json(save_tokens)) + "\n")
            wall = time.perf_counter() - started
            with log_path.open("a") as handle:
                line = _log_line(run_id, chunk, batch.timings, wall, provenance)
                handle.write(json.dumps(line) + "\n")
            for trajectory in trajectories:
                if finished.add(trajectory) and failed(trajectory):
                    errors += 1
            bar.update(len(chunk))
            if errors > max_error_share * episodes:
                check_generation_errors(out_dir, finished.for_questions(questions), max_error_share)
    return RolledOut(finished, len(todo))


def check_generation_errors(
    out_dir: Path, trajectories: Sequence[Trajectory], max_error_share: float
) -> int:
    """How many episodes ended in a generation error; GenerationErrorsError when too many.

    An evaluation whose backend failed for most episodes measures the backend, not the
    policy: it must fail loudly, not report a score near zero. A few errors are reported
    (a warning and ``generation_errors`` in results.json) and retried by the next run.
    """
    failures = [t for t in trajectories if failed(t)]
    if not failures:
        return 0
    first = failures[0].extra.get("generation_error", "the error was not recorded")
    message = (
        f"{out_dir}: {len(failures)} of {len(trajectories)} episodes ended in a generation "
        f"error (the policy's backend failed; first, {failures[0].episode_id}: {first})"
    )
    if len(failures) > max_error_share * len(trajectories):
        raise GenerationErrorsError(
            f"{message}. No results are written: fix the backend (for policy=openai, is a "
            "server answering at policy.base_url?) and run the same command again; the "
            "failed episodes are rolled out again and the others kept"
        )
    log.warning("%s. They count as unanswered; run the same command again to retry them", message)
    return len(failures)


def evaluate_policy(
    engine: RolloutEngine,
    questions: Sequence[Question],
    out_dir: Path,
    fingerprint: dict[str, Any],
    batch_questions: int = 64,
    save_tokens: bool = False,
    judge: Judge | None = None,
    provenance: dict[str, Any] | None = None,
    max_error_share: float = GENERATION_ERROR_SHARE,
) -> EvaluationOutput:
    """Roll out ``questions`` in batches, appending trajectories; score; write the results.

    ``fingerprint`` is what the folder must match to resume (its config.json: the settings
    that shape the trajectories, as the caller derives them); ``provenance`` (code version,
    policy and judge identity) goes into results.json and results.md as it is. The folder is
    locked while this runs (EvaluationLockedError when another process holds it), and
    GenerationErrorsError is raised, before any result is written, when more than
    ``max_error_share`` of the episodes ended in a generation error.
    """
    with locked(out_dir):
        check_or_write_config(out_dir / CONFIG_FILE, fingerprint)
        rolled = roll_out(
            engine, questions, out_dir, batch_questions, save_tokens, provenance, max_error_share
        )
        trajectories = rolled.finished.for_questions(questions)
        generation_errors = check_generation_errors(out_dir, trajectories, max_error_share)
        wanted = {q.question_id for q in questions}
        timed = rollout_time(out_dir / ROLLOUT_LOG_FILE, wanted)
        scoring_started = time.perf_counter()
        scores = score_episodes(engine.env.index.corpus, questions, trajectories)
        if judge is not None:
            scores.verdicts = judge_trajectories(judge, trajectories, out_dir / JUDGE_CACHE_FILE)
        summary = summarize(trajectories, scores)
        corpus = engine.env.index.corpus
        supporting = scores.supporting_sentence_ids
        ladder = ladder_section(trajectories, corpus.paragraph_text, supporting=supporting)
        dataset = DatasetResults(
            **summary.summary_fields(),
            scoring_time_s=time.perf_counter() - scoring_started,
            wall_time_s=timed.wall,
            wall_time_per_question_s=timed.per_question(),
            rollout_time_s=timed.split(),
            questions=len(wanted),
            questions_rolled_out=rolled.rolled_out,
            questions_timed=timed.questions,
            rollout_runs=timed.runs,
            rollout_code=timed.code,
            generation_errors=generation_errors,
            repeated_lines_dropped=rolled.finished.repeated,
            ladder=ladder,
        )
        results = DatasetEvaluation(dataset, fingerprint, provenance)
        earlier = None if rolled.rolled_out else _standing_results(out_dir / RESULTS_FILE, results)
        if earlier is not None:  # the same results: they keep the provenance they were made with
            return EvaluationOutput(earlier, trajectories, scores)
        write_atomic(out_dir / RESULTS_FILE, json.dumps(results.to_json(), indent=2, default=str))
        title = f"Evaluation of {out_dir.name}"
        markdown = results_markdown(title, [(out_dir.name, dataset)], provenance or {}, fingerprint)
        markdown += ladder_markdown(out_dir.name, dataset)
        write_atomic(out_dir / "results.md", markdown)
    return EvaluationOutput(results, trajectories, scores)


def _standing_results(path: Path, results: DatasetEvaluation) -> DatasetEvaluation | None:
    """The evaluation in ``path`` when ``results`` would only restate it, else None.

    Called when this run rolled out no question. Restating means equal in every value but the
    scoring time, the questions rolled out and the code version: a finished dataset evaluated
    again by later code that scores it the same keeps its results.json and results.md, and with them the code version that
    produced them. Another policy or judge identity, another score or another rollout log
    writes the new results; an unreadable results.json is rewritten with a warning.
    """
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
        earlier = DatasetEvaluation.from_json(data)
    except (ValueError, KeyError, TypeError) as error:
        log.warning("%s is rewritten: it could not be read (%s)", path, error)
        return None
    now = json.loads(json.dumps(results.to_json(), default=str))
    if _restatable(data) != _restatable(now):
        return None
    log.info("%s stands: scoring its trajectories again gives the same results", path)
    return earlier


def _restatable(data: dict[str, Any]) -> dict[str, Any]:
    """A results.json without what may change when nothing in the evaluation does."""
    kept = {k: v for k, v in data.items() if k not in ("scoring_time_s", "questions_rolled_out")}
    provenance = kept.get("provenance") or {}
    kept["provenance"] = {k: v for k, v in provenance.items() if k != "code"}
    return kept


class RolloutLogLine(TypedDict):
    """One batch's line of rollout_log.jsonl: which questions it rolled out, with which
    code, and its seconds."""

    run: str
    code: CodeVersion | None
    """The provenance's ``code``; None: none given."""
    question_ids: list[str]
    wall_s: float
    generation_s: float
    environment_s: float
    total_s: float
    finished_at: str


def _log_line(
    run_id: str,
    questions: Sequence[Question],
    timings: RolloutTimings,
    wall: float,
    provenance: dict[str, Any] | None,
) -> RolloutLogLine:
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


@dataclass
class LoggedTime:
    """``rollout_time``: the seconds of the logged batches that cover wanted questions."""

    wall: float = 0.0
    generation: float = 0.0
    environment: float = 0.0
    total: float = 0.0
    questions: int = 0
    """Wanted questions the counted batches cover."""
    runs: int = 0
    """Evaluation runs that logged them."""
    code: list[Any] = field(default_factory=list)
    """The code versions that rolled them out (one, unless a resumed run had another commit)."""

    def per_question(self) -> Mean:
        """Wall seconds per timed question; "not recorded" when no batch was timed."""
        return self.wall / self.questions if self.questions else NOT_RECORDED

    def split(self) -> RolloutTime:
        """Generation against environment seconds, as results.json reports them."""
        share = self.environment / self.total if self.total else 0.0
        return RolloutTime(self.generation, self.environment, share)


def rollout_time(path: Path, wanted: set[str]) -> LoggedTime:
    """Seconds spent rolling out ``wanted``, summed over the batches ``path`` logged.

    A batch counts when every one of its questions is wanted (a folder reused for a subset
    counts only whole batches). A torn last line (a run killed while writing it) is skipped;
    its batch counts as untimed.
    """
    timed = LoggedTime()
    covered: set[str] = set()
    runs: set[str] = set()
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
            if entry.get("code") not in timed.code:
                timed.code.append(entry.get("code"))
            timed.wall += entry["wall_s"]
            timed.generation += entry["generation_s"]
            timed.environment += entry["environment_s"]
            timed.total += entry["total_s"]
    timed.questions, timed.runs = len(covered), len(runs)
    return timed


def score_episodes(
    corpus: SentenceCorpus, questions: Sequence[Question], trajectories: Sequence[Trajectory]
) -> EpisodeScores:
    """Every episode's question type (EM by kind of question), and the supporting-sentence
    recall of every episode whose question has sentence-level facts (and those facts' sentence
    ids, against which citations are scored)."""
    by_id = {q.question_id: q for q in questions}
    scores = EpisodeScores()
    for t in trajectories:
        scores.question_types[t.episode_id] = by_id[t.question_id].type
        supporting = supporting_sentences(corpus, by_id[t.question_id])
        if supporting is None:
            continue
        seen = seen_sentence_ids(corpus, t)
        # The set recall of grasp.metrics, over sentence ids instead of paragraph ids.
        scores.supporting_recall[t.episode_id] = paragraph_recall(seen, supporting.sentence_ids)
        scores.supporting_all_found[t.episode_id] = all_gold_found(seen, supporting.sentence_ids)
        scores.supporting_sentence_ids[t.episode_id] = supporting.sentence_ids
    return scores


def check_or_write_config(path: Path, config: dict[str, Any]) -> None:
    """Write ``config`` to ``path`` (atomically), or check it against the one written there.

    Raises ValueError naming the differing keys when the folder holds an evaluation with
    another configuration (a field added since it was written is none, at the value it ran
    with: ``grasp.experiments.sweep.predates``), and naming the file when it is not a JSON object (cut short by
    an older, non-atomic writer, or edited).
    """
    text = json.dumps(config, indent=2, sort_keys=True, default=str)
    if not path.exists():
        write_atomic(path, text)
        return
    try:
        written = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, RecursionError) as error:  # JSON and UTF-8 errors included
        written, problem = None, f"{type(error).__name__}: {error}"
    else:
        problem = f"it holds a {type(written).__name__}"
    if not isinstance(written, dict):
        raise ValueError(
            f"{path} is not an evaluation's configuration ({problem}): it was cut short or "
            "edited, so the trajectories in its folder cannot be checked against this "
            f"configuration. Choose another out=, or delete {path.name} if you know they "
            "were made with this configuration"
        )
    written_keys = set(flatten(written))
    wanted = json.loads(text)
    differences = [  # a field added since, at the value the folder ran with, is no difference
        key
        for key in config_differences(written, wanted)
        if key in written_keys or not predates(key, wanted)
    ]
    if differences:
        raise ValueError(
            f"{path.parent} holds an evaluation with another configuration "
            f"({', '.join(differences)} differ; see {path}); choose another out= "
            "or delete that folder"
        )


def compress_finished(root: Path) -> list[Path]:
    """Store every finished evaluation's trajectories.jsonl under ``root`` as .xz; the files
    written. Finished means results.json beside it; each folder is compressed under its lock,
    so a folder an evaluation is writing is refused (EvaluationLockedError), never cut."""
    written = []
    for path in sorted(Path(root).rglob(TRAJECTORIES_FILE)):
        if (path.parent / RESULTS_FILE).is_file():
            with locked(path.parent):
                written.append(compress(path))
    return written
