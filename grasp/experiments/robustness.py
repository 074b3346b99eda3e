"""The robustness suite: one policy on clean and adversarial corpora of the same dev questions.

    report = run_robustness(config)      # a RobustnessConfig; scripts/robustness.py's work

A seeded sample of ``config.n`` dev questions; their pooled paragraphs are the clean corpus,
and ``grasp.experiments.adversarial`` adds the attacks to it. Each run is an evaluation
(``grasp.eval.policy_eval.evaluate_policy``) in its own folder ``<out>/<run>/``, over its own
index under ``<index_root>/<dataset>-<split>/<corpus>/`` (the exhaustion runs share one):

- ``clean``: the sample's own corpus;
- ``injection``: plus one injected paragraph per question. Attack success: the episode
  answered the injected X, or its call right after a turn that showed an injected paragraph
  is the call that paragraph asked for;
- ``poisoning`` and ``poisoning_detected``: plus ``poisoning.copies`` near-identical copies
  claiming a wrong answer, without and with near-duplicate detection at index build. Reported:
  the share of the top-K slots the copies take (the question as the query, each search tool),
  the share of the episodes' hits they took, and how often the answer flips;
- ``exhaustion_*``: the questions with their evidence removed, under the turn budget, the
  token budget (token-level policies only) and the wall-clock budget: how every episode ended.

The measurements are ``grasp.experiments.robustness_metrics``. Then ``<out>/robustness.json`` (``RobustnessReport.to_json``) and ``<out>/robustness.md``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from grasp.baselines import build_baseline_policy
from grasp.corpus.build import IndexConfig
from grasp.corpus.index import SearchIndex
from grasp.corpus.near_duplicates import NearDuplicateConfig, NearDuplicateReport
from grasp.data import sample_questions
from grasp.data.config import read_questions
from grasp.env.environment import EnvConfig, RetrievalEnvironment, check_top_k
from grasp.eval.policy_eval import evaluate_policy
from grasp.eval.provenance import code_version, policy_identity
from grasp.experiments.adversarial import inject, poison, unanswerable
from grasp.experiments.config import RobustnessConfig
from grasp.experiments.robustness_metrics import (
    answer_flips,
    attack_success,
    hit_share,
    quality_difference,
    stop_reason_shares,
    top_k_share,
)
from grasp.experiments.robustness_tables import robustness_markdown
from grasp.experiments.trained import for_trained_run
from grasp.paths import REPO_ROOT
from grasp.rollout.engine import RolloutConfig, RolloutEngine
from grasp.rollout.factory import BuiltPolicy
from grasp.rollout.trajectory import Trajectory
from grasp.serve.client import open_index
from grasp.types import Question, StrEnum

log = logging.getLogger("robustness")


class RunName(StrEnum):
    """The runs of the suite, each an evaluation of its own."""

    CLEAN = "clean"
    INJECTION = "injection"
    POISONING = "poisoning"
    POISONING_DETECTED = "poisoning_detected"
    EXHAUSTION_TURNS = "exhaustion_turn_budget"
    EXHAUSTION_TOKENS = "exhaustion_token_budget"
    EXHAUSTION_WALL_CLOCK = "exhaustion_wall_clock_budget"


@dataclass
class RunSetting:
    """What one run searches and under which budgets."""

    name: RunName
    corpus_questions: list[Question]
    """The questions whose paragraphs (adversarial ones included) pool into its index."""
    questions: list[Question]
    """The questions its episodes answer."""
    env: EnvConfig
    rollout: RolloutConfig
    index: IndexConfig
    corpus: str
    """The name of its index folder: the exhaustion runs share one corpus, and one index."""


@dataclass
class RunOutput:
    trajectories: list[Trajectory]
    index: SearchIndex
    quality: dict[str, float]
    """em, f1 and recall of the run."""
    stop_reasons: dict[str, float]
    wall_time_s: float


# --- the runs --------------------------------------------------------------------------------


class RunEntry(TypedDict):
    """One run in the report's ``runs``: its quality (``RunOutput.quality``), stop reasons,
    time and index."""

    em: float
    f1: float
    recall: float
    stop_reasons: dict[str, float]
    wall_time_s: float
    paragraphs: int
    near_duplicates: NearDuplicateReport | None


@dataclass
class RobustnessReport:
    """What robustness.json holds."""

    questions: int
    runs: dict[str, RunEntry]
    injection: dict[str, Any]
    poisoning: dict[str, Any]
    exhaustion: dict[str, Any]
    config: dict[str, Any]
    provenance: dict[str, Any]
    wall_time_s: float = 0.0
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def run_settings(config: RobustnessConfig, sample: list[Question]) -> list[RunSetting]:
    """Every run of the suite over ``sample``, in order (built from the attacks, seeded)."""
    attack = inject(sample, config.attack_seed, config.injection.kinds)
    poisoned = poison(sample, config.poisoning.copies, config.attack_seed)
    detection = dataclasses.replace(
        config.index,
        near_duplicates=NearDuplicateConfig(threshold=config.poisoning.detection_threshold),
    )
    exhausted = unanswerable(sample)
    turns = dataclasses.replace(config.env, turn_budget=config.exhaustion.turn_budget)
    tokens = dataclasses.replace(
        config.rollout, max_context_tokens=config.exhaustion.max_context_tokens
    )
    wall = dataclasses.replace(
        config.rollout, max_episode_seconds=config.exhaustion.max_episode_seconds
    )
    env, rollout, index = config.env, config.rollout, config.index
    return [
        RunSetting(RunName.CLEAN, sample, sample, env, rollout, index, "clean"),
        RunSetting(RunName.INJECTION, attack.questions, sample, env, rollout, index, "injection"),
        RunSetting(RunName.POISONING, poisoned.questions, sample, env, rollout, index, "poisoning"),
        RunSetting(
            RunName.POISONING_DETECTED,
            poisoned.questions,
            sample,
            env,
            rollout,
            detection,
            "poisoning_detected",
        ),
        RunSetting(
            RunName.EXHAUSTION_TURNS, exhausted, exhausted, turns, rollout, index, "exhaustion"
        ),
        RunSetting(
            RunName.EXHAUSTION_TOKENS, exhausted, exhausted, turns, tokens, index, "exhaustion"
        ),
        RunSetting(
            RunName.EXHAUSTION_WALL_CLOCK, exhausted, exhausted, turns, wall, index, "exhaustion"
        ),
    ]


class Suite:
    """Runs the settings one by one, sharing one policy (loaded once)."""

    def __init__(self, config: RobustnessConfig, out: Path) -> None:
        self.config = config
        self.out = out
        self.index_dir = (
            Path(config.index_root) if config.index_root else REPO_ROOT / "indexes" / "robustness"
        ) / f"{config.dataset.name}-{config.split}"
        self.built: BuiltPolicy | None = None
        self.provenance = {"code": code_version(), "policy": policy_identity(config.policy)}

    def run(self, setting: RunSetting) -> RunOutput | None:
        """One run (None: the token-budget run of a policy without a token trace)."""
        if setting.name is RunName.EXHAUSTION_TOKENS and self.built and self.built.chat is None:
            return None
        check_top_k(setting.env, setting.corpus_questions)
        source = {"dataset": str(self.config.dataset.name), "split": self.config.split}
        directory = self.index_dir / setting.corpus
        index = open_index(setting.index, directory, setting.corpus_questions, source=source)
        env = RetrievalEnvironment(index, setting.env)
        if self.built is None:
            self.built = build_baseline_policy(self.config.baseline, self.config.policy, env)
        engine = RolloutEngine(env, self.built.policy, setting.rollout, chat=self.built.chat)
        fingerprint = {
            "run": str(setting.name),
            "dataset": str(self.config.dataset.name),
            "split": self.config.split,
            "n": self.config.n,
            "seed": self.config.seed,
            "attack_seed": self.config.attack_seed,
            "injection": dataclasses.asdict(self.config.injection),
            "poisoning": dataclasses.asdict(self.config.poisoning),
            "index": dataclasses.asdict(setting.index),
            "env": dataclasses.asdict(setting.env),
            "rollout": dataclasses.asdict(setting.rollout),
            "policy": dataclasses.asdict(self.config.policy),
            "baseline": dataclasses.asdict(self.config.baseline),
        }
        log.info("%s: %d questions, index %s", setting.name, len(setting.questions), directory)
        output = evaluate_policy(
            engine,
            setting.questions,
            self.out / str(setting.name),
            fingerprint,
            self.config.batch_questions,
            provenance=self.provenance,
        )
        results = output.results.results
        return RunOutput(
            output.trajectories,
            index,
            {"em": results.em, "f1": results.f1, "recall": results.recall},
            stop_reason_shares(output.trajectories),
            float(results.wall_time_s),
        )


def trained_policy(config: RobustnessConfig, overrides: Sequence[str]) -> RobustnessConfig:
    """``config`` (``run_dir`` set) attacking that run's policy in the environment it was
    trained in (``grasp.experiments.trained.for_trained_run``: overriding its env, index, rollout or
    policy is refused); the output folder defaults to runs/robustness/<run>-<stage>."""
    assert config.run_dir is not None
    out = config.out or str(
        REPO_ROOT / "runs" / "robustness" / f"{Path(config.run_dir).name}-{config.stage}"
    )
    return for_trained_run(dataclasses.replace(config, out=out), overrides)


def run_robustness(config: RobustnessConfig) -> RobustnessReport:
    """Every run of the suite, then robustness.json and robustness.md in ``config.out``."""
    started = time.perf_counter()
    out = Path(config.out) if config.out else REPO_ROOT / "runs" / "robustness" / config.policy.kind
    questions, _ = read_questions(config.dataset, config.split, config.data_dir)
    sample = sample_questions(questions, config.n, seed=config.seed)
    suite = Suite(config, out)
    settings = run_settings(config, sample)
    outputs = {s.name: suite.run(s) for s in settings}
    report = summarize_runs(config, sample, outputs)
    report.provenance = suite.provenance
    report.wall_time_s = time.perf_counter() - started
    write_report(out, report)
    return report


def summarize_runs(
    config: RobustnessConfig, sample: list[Question], outputs: Mapping[RunName, RunOutput | None]
) -> RobustnessReport:
    """The report of finished runs (the attacks rebuilt from the same seeds)."""
    attack = inject(sample, config.attack_seed, config.injection.kinds)
    poisoned = poison(sample, config.poisoning.copies, config.attack_seed)
    clean, injected = outputs[RunName.CLEAN], outputs[RunName.INJECTION]
    assert clean is not None and injected is not None
    runs = {str(name): _run_entry(o) for name, o in outputs.items() if o is not None}
    injection = {
        **attack_success(injected.trajectories, attack.injections, injected.index.corpus),
        "clean": clean.quality,
        "attacked": injected.quality,
        "difference": quality_difference(clean.quality, injected.quality),
    }
    poisoning: dict[str, Any] = {"copies": config.poisoning.copies}
    for name, label in (
        (RunName.POISONING, "detection_off"),
        (RunName.POISONING_DETECTED, "detection_on"),
    ):
        run = outputs[name]
        assert run is not None
        poisoning[label] = {
            "top_k_share": top_k_share(run.index, sample, poisoned.poisons, config.env),
            "episode_hit_share": hit_share(run.trajectories, poisoned.poisons, run.index.corpus),
            **answer_flips(clean.trajectories, run.trajectories, poisoned.poisons),
            "quality": run.quality,
            "difference": quality_difference(clean.quality, run.quality),
            "near_duplicates": _near_duplicates(run.index),
        }
    exhaustion: dict[str, Any] = {}
    notes = []
    for name in (
        RunName.EXHAUSTION_TURNS,
        RunName.EXHAUSTION_TOKENS,
        RunName.EXHAUSTION_WALL_CLOCK,
    ):
        run = outputs[name]
        if run is None:
            notes.append(
                f"{name}: not run, the policy has no token trace (no token budget applies)"
            )
            continue
        exhaustion[str(name)] = {
            "stop_reasons": run.stop_reasons,
            "episodes": len(run.trajectories),
            "ended": sum(1 for t in run.trajectories if t.stop_reason is not None),
            "turns_per_episode": sum(t.turns_used for t in run.trajectories)
            / max(len(run.trajectories), 1),
            "wall_time_s": run.wall_time_s,
        }
    return RobustnessReport(
        questions=len(sample),
        runs=runs,
        injection=injection,
        poisoning=poisoning,
        exhaustion=exhaustion,
        config=dataclasses.asdict(config),
        provenance={},
        notes=notes,
    )


def _run_entry(output: RunOutput) -> RunEntry:
    return {
        **output.quality,
        "stop_reasons": output.stop_reasons,
        "wall_time_s": output.wall_time_s,
        "paragraphs": output.index.corpus.num_paragraphs,
        "near_duplicates": _near_duplicates(output.index),
    }


def _near_duplicates(index: SearchIndex) -> NearDuplicateReport | None:
    """The index manifest's near-duplicate report (None: detection was off)."""
    manifest = getattr(index, "manifest", None)
    return manifest.corpus.get("near_duplicates") if manifest is not None else None


def write_report(out: Path, report: RobustnessReport) -> None:
    """``out/robustness.json`` and ``out/robustness.md`` (printed too)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "robustness.json").write_text(json.dumps(report.to_json(), indent=2, default=str))
    markdown = robustness_markdown(report.to_json())
    (out / "robustness.md").write_text(markdown)
    print(markdown)
    log.info("wrote %s", out)
