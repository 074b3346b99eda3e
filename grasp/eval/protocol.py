"""The paper's evaluation protocol: a policy on every configured dev set, then all of them pooled.

    results = evaluate_datasets(config)      # an EvaluateConfig; scripts/evaluate.py's work

Each dataset: a seeded sample of ``config.n`` questions (all of them where fewer exist),
searched in the dataset's own pooled sentence index (built, or reused, under
``config.index_root``), evaluated by ``grasp.eval.policy_eval.evaluate_policy`` into
``<out>/<dataset>/``. Then ``<out>/results.json`` (``EvaluationResults``) and
``<out>/results.md``: every dataset, all questions pooled, and the macro mean over datasets,
with the code's commit and the models' identities, then the evaluation ladder
(``grasp.eval.ladder``) of the pooled questions (of the one dataset's, when there is one).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grasp.baselines import build_baseline_policy
from grasp.data import sample_questions
from grasp.data.config import DatasetConfig, read_questions
from grasp.env.environment import RetrievalEnvironment, check_top_k
from grasp.eval.config import EvaluateConfig
from grasp.eval.judge import build_judge
from grasp.eval.ladder import ladder_markdown, pool_sections
from grasp.eval.policy_eval import evaluate_policy
from grasp.eval.provenance import (
    code_version,
    dataset_identity,
    judge_identity,
    policy_identity,
)
from grasp.eval.results import (
    RESULTS_FILE,
    DatasetResults,
    EvaluationResults,
    OverallResults,
    PooledResults,
)
from grasp.eval.summary import EpisodeScores, overall_summary
from grasp.eval.tables import results_markdown
from grasp.eval.transcript import transcript
from grasp.paths import REPO_ROOT, default_index_dir
from grasp.rollout.engine import RolloutEngine
from grasp.rollout.factory import BuiltPolicy
from grasp.rollout.trajectory import Trajectory
from grasp.serve.client import open_index
from grasp.types import Question

log = logging.getLogger("evaluate")
"""Named for scripts/evaluate.py, whose log lines these are."""

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
    return DatasetInput(*read_questions(dataset, config.split))


def prepare_dataset(
    config: EvaluateConfig, dataset: DatasetConfig, loaded: DatasetInput
) -> DatasetSetup:
    """Sample the dataset, build (or reuse) its index, make its environment."""
    name = dataset.name
    questions, path = loaded.questions, loaded.path
    directory = default_index_dir(name, config.split, config.index_root)
    source = {"dataset": str(name), "split": config.split, "path": str(path)}
    index = open_index(config.index, directory, questions, source=source)
    env = RetrievalEnvironment(index, config.env)
    sample = sample_questions(questions, config.n, seed=config.seed)
    log.info("%s: %d of %d questions, index %s", name, len(sample), len(questions), directory)
    resolved = dataclasses.asdict(config)
    run_config = {key: resolved[key] for key in RUN_FIELDS}
    run_config["dataset"] = dataset_identity(str(name), str(dataset.source), path)
    return DatasetSetup(sample, env, run_config)


def pool(
    parts: dict[str, tuple[list[Trajectory], EpisodeScores]],
    per_dataset: dict[str, DatasetResults],
) -> OverallResults:
    """Every dataset's episodes pooled (their seconds and questions summed, their ladders
    pooled when each has one), and the macro mean over datasets."""
    overall = overall_summary(parts)
    datasets = list(per_dataset.values())
    ladders = [r.ladder for r in datasets if r.ladder is not None]
    ladder = pool_sections(ladders) if ladders and len(ladders) == len(datasets) else None
    return OverallResults(PooledResults.of(overall.pooled, datasets, ladder), overall.macro)


def evaluate_datasets(config: EvaluateConfig) -> EvaluationResults:
    """Evaluate every configured dataset, then write and return the overall results.

    Every input is read (and checked against ``env.top_k``) before any index is built: a bad
    file of the last dataset must not wait for the others. ``config.show`` prints the first
    trajectories of each dataset turn by turn.
    """
    out = Path(config.out) if config.out else REPO_ROOT / "runs" / "evaluate" / config.policy.kind
    provenance = {
        "code": code_version(),
        "policy": policy_identity(config.policy),
        "judge": judge_identity(config.judge),
    }
    judge = build_judge(config.judge)
    built: BuiltPolicy | None = None
    parts: dict[str, tuple[list[Trajectory], EpisodeScores]] = {}
    per_dataset: dict[str, DatasetResults] = {}
    inputs = [(dataset, load_dataset(config, dataset)) for dataset in config.dataset_configs()]
    for _, loaded in inputs:
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
        per_dataset[name] = output.results.results
    overall = pool(parts, per_dataset)
    results = EvaluationResults(
        datasets=per_dataset,
        overall=overall,
        questions=sum(r.questions for r in per_dataset.values()),
        config=dataclasses.asdict(config),
        provenance=provenance,
    )
    write_results(out, results, f"Evaluation: policy {config.policy.kind}")
    return results


def write_results(out: Path, results: EvaluationResults, title: str) -> None:
    """``out/results.json`` and ``out/results.md`` (printed too); the pooled and macro rows
    only when there are several datasets."""
    out.mkdir(parents=True, exist_ok=True)
    (out / RESULTS_FILE).write_text(json.dumps(results.to_json(), indent=2, default=str))
    rows: list[tuple[str, Any]] = list(results.datasets.items())
    macro = None
    if len(rows) > 1:
        rows.append(("overall (pooled)", results.overall.pooled))
        macro = results.overall.macro
    markdown = results_markdown(title, rows, results.provenance, results.config, macro)
    name, last = rows[-1]  # the pooled ladder, or the one dataset's
    if last.ladder is not None:
        markdown += ladder_markdown(name, last)
    (out / "results.md").write_text(markdown)
    print(markdown)
    log.info("wrote %s", out)
