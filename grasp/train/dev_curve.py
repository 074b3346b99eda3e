"""The dev learning curve: fixed held-out dev questions evaluated greedily during training.

With ``dev_curve.every`` > 0, the policy GRPO starts from (step 0) and the policy after every
``every`` steps play the same ``questions_per_dataset`` seeded dev questions of each dataset
in ``dev_curve.datasets``, each dataset in its dev set's own pooled index (the baseline
table's), with the run's own tools, budgets and reward (``env``, ``rollout``)::

    <run_dir>/dev_curve/step_000025/<dataset>/   one evaluation folder (grasp.eval.policy_eval)
    <run_dir>/dev_curve.jsonl                     one line per evaluated step, rebuilt from them

Each line holds, per dataset and pooled over the datasets' episodes, the mean reward under
the training reward and each of its terms, EM, F1, recall, read recall, the share of episodes
that answer, reads that ran and reads refused per episode, parse errors per turn and context
tokens per episode. The questions are the same at every step, so any two steps compare
question by question (``python scripts/compare.py a=<run>/dev_curve/step_000150
b=<run>/dev_curve/step_000000``). Dev questions that are also training questions (the same id,
or the same text up to case, punctuation and whitespace) are refused.
A resumed run evaluates only the steps not yet in ``dev_curve/``.
"""

from __future__ import annotations

import json
import logging
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from grasp.data import DataSource, load_questions, sample_questions
from grasp.env.environment import RetrievalEnvironment, check_top_k
from grasp.eval.context import observation_tokens, read_trajectories
from grasp.eval.policy_eval import evaluate_policy
from grasp.eval.provenance import code_version
from grasp.eval.results import RESULTS_FILE
from grasp.eval.summary import read_calls, summarize
from grasp.rollout.trajectory import Trajectory
from grasp.train.config import DevCurveSettings
from grasp.train.plots import plot_run
from grasp.train.run_folder import RunFolder
from grasp.types import Question, StopReason

log = logging.getLogger(__name__)


@dataclass
class DevSet:
    """One dataset's curve questions and the environment they are played in."""

    dataset: str
    questions: list[Question]
    env: RetrievalEnvironment


def question_text(text: str) -> str:
    """A question's text as the overlap check compares it: case-folded, each punctuation mark
    a space, whitespace runs one space. A copy that differs by a doubled space, a question
    mark or its case is the same question under another id."""
    spaced = "".join(" " if unicodedata.category(c).startswith("P") else c for c in text.casefold())
    return " ".join(spaced.split())


def dev_questions(
    settings: DevCurveSettings, training: Sequence[Question]
) -> dict[str, tuple[list[Question], list[Question]]]:
    """Each dataset's (curve questions, whole dev set: the pool of its index).

    Raises:
        ValueError: a curve question is also a training question (named): the same id, or the
            same text (``question_text``).
    """
    train_ids = {q.question_id for q in training}
    train_texts = {question_text(q.question) for q in training}
    chosen = {}
    for dataset in settings.datasets:
        dev = load_questions(dataset, DataSource.NORMALIZED, split="dev")
        sample = sample_questions(dev, settings.questions_per_dataset, seed=settings.seed)
        mixed = [
            q.question_id
            for q in sample
            if q.question_id in train_ids or question_text(q.question) in train_texts
        ]
        if mixed:
            raise ValueError(
                f"dev_curve: {len(mixed)} {dataset} dev questions are also training questions "
                f"(e.g. {mixed[0]}); the curve must be held out"
            )
        chosen[dataset] = (sample, dev)
    return chosen


def check_dev_curve(
    settings: DevCurveSettings, training: Sequence[Question], env_config: Any
) -> dict[str, tuple[list[Question], list[Question]]]:
    """``dev_questions``, each dataset's pool checked against ``env_config``'s top-k: every
    refusal the curve can make, made before the run writes anything.

    Raises:
        ValueError: a curve question is also a training question, or top-k exceeds a pool.
    """
    chosen = dev_questions(settings, training)
    for _, pool in chosen.values():
        check_top_k(env_config, pool)
    return chosen


def build_dev_sets(
    settings: DevCurveSettings,
    training: Sequence[Question],
    env_config: Any,
    open_dev_index: Callable[[str, list[Question]], Any],
) -> list[DevSet]:
    """The curve's datasets, each with its dev index (``open_dev_index(dataset, pool)``: built
    once, where the evaluation protocol builds it) and an environment with ``env_config``."""
    sets = []
    for dataset, (sample, pool) in check_dev_curve(settings, training, env_config).items():
        index = open_dev_index(dataset, pool)
        sets.append(DevSet(dataset, sample, RetrievalEnvironment(index, env_config)))
    return sets


def reads(trajectory: Trajectory) -> tuple[int, int]:
    """Reads that ran and reads refused (a well-formed call its tool refused) of an episode:
    the evaluation's count (``grasp.eval.summary.read_calls``)."""
    return read_calls(trajectory)


def curve_entry(trajectories: Sequence[Trajectory], count: Callable[[str], int]) -> dict[str, Any]:
    """The curve's figures of one set of episodes (a dataset's, or all of them pooled)."""
    summary = summarize(trajectories)
    n = len(trajectories)
    ran, refused = (sum(r[i] for r in map(reads, trajectories)) for i in (0, 1))
    entry = {
        "episodes": n,
        **{key: value for key, value in summary.reward.items()},
        "em": summary.em,
        "f1": summary.f1,
        "recall": summary.recall,
        "read_recall": summary.read_recall,
        "answered": summary.stop_reasons.get(StopReason.ANSWERED.value, 0.0),
        "reads_run_per_episode": ran / n,
        "reads_refused_per_episode": refused / n,
        "parse_error_rate": summary.parse_error_rate,
        "repaired_call_rate": summary.repaired_call_rate,
        "context_tokens": sum(observation_tokens(t, count) for t in trajectories) / n,
    }
    return entry


class DevCurve:
    """Evaluates a model on the curve's questions at a step and rewrites dev_curve.jsonl."""

    def __init__(
        self,
        run_dir: Path,
        dev_sets: list[DevSet],
        engine_for: Callable[[RetrievalEnvironment, Any], Any],
        count: Callable[[str], int],
        fingerprint: dict[str, Any],
    ) -> None:
        self.run_dir = Path(run_dir)
        self.folder = RunFolder(run_dir)
        self.dev_sets = dev_sets
        self.engine_for = engine_for
        """(environment, model) -> the greedy RolloutEngine of the run's evaluations."""
        self.count = count
        self.fingerprint = fingerprint

    def done(self, step: int) -> bool:
        folder = self.folder.dev_curve_step_dir(step)
        return all((folder / s.dataset / RESULTS_FILE).is_file() for s in self.dev_sets)

    def evaluate(self, step: int, model: Any) -> dict[str, Any]:
        """Play every curve question with ``model`` (resuming a step's folders), then rewrite
        the curve file; the step's line."""
        folder = self.folder.dev_curve_step_dir(step)
        for dev in self.dev_sets:
            engine = self.engine_for(dev.env, model)
            fingerprint = {**self.fingerprint, "dev_curve_dataset": dev.dataset}
            evaluate_policy(
                engine,
                dev.questions,
                folder / dev.dataset,
                fingerprint=fingerprint,
                provenance={"code": code_version()},  # each batch's commit in rollout_log.jsonl
            )
        self.rewrite()
        return self.line(step)

    def line(self, step: int) -> dict[str, Any]:
        folder = self.folder.dev_curve_step_dir(step)
        by_dataset = {dev.dataset: read_trajectories(folder / dev.dataset) for dev in self.dev_sets}
        pooled = [t for part in by_dataset.values() for t in part]
        return {
            "step": step,
            "pooled": curve_entry(pooled, self.count),
            **{name: curve_entry(part, self.count) for name, part in by_dataset.items()},
        }

    def rewrite(self) -> None:
        """dev_curve.jsonl from every finished step folder, in step order."""
        steps = [step for step in self.folder.dev_curve_steps() if self.done(step)]
        lines = [json.dumps(self.line(step)) for step in steps]
        self.folder.dev_curve_file.write_text("".join(line + "\n" for line in lines))


class DevCurveCallback(TrainerCallback):
    """Evaluates the curve at the end of every ``every``-th step (the main process only)."""

    def __init__(self, every: int, curve: DevCurve) -> None:
        self.every = every
        self.curve = curve

    def on_step_end(self, args, state, control, **kwargs):
        step = state.global_step
        if self.every and step % self.every == 0 and state.is_world_process_zero:
            if not self.curve.done(step):
                model = kwargs["model"]
                log.info("dev curve: step %d", step)
                self.curve.evaluate(step, getattr(model, "module", model))
                plot_run(self.curve.run_dir)  # curves.png with the new point, mid-run
