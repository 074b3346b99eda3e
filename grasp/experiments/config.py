"""The configs of the experiments' entry points: the baseline table (scripts/baselines.py),
the ablations (scripts/ablate.py), the k sweep (scripts/k_sweep.py) and the robustness suite
(scripts/robustness.py). Registered with Hydra by ``grasp.config.register_configs``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from dataclasses import fields as dataclass_fields
from typing import Any

from omegaconf import MISSING, DictConfig, OmegaConf

from grasp.data.config import DatasetConfig
from grasp.eval.config import EvaluateConfig, PolicyRunConfig
from grasp.eval.paired import check_metrics
from grasp.experiments.ablation import Ablation
from grasp.experiments.adversarial import ExhaustionConfig, InjectionConfig, PoisoningConfig
from grasp.experiments.baseline_table import Baseline
from grasp.train.config import TrainConfig
from grasp.types import (
    DatasetName,
    StrEnum,
    check_range,
    parse_enum,
)


@dataclass
class TrainedRowConfig:
    """A stage of a training run, evaluated as a row of the baseline table by
    ``scripts/evaluate.py run_dir=<run_dir> stage=<stage>``: the run's own environment and
    rollout settings, the table's datasets, n and seed."""

    run_dir: str = MISSING
    """The training run's folder (its config.json and adapters)."""
    stage: str = "final"
    """final, warm_start or a checkpoint folder name."""
    label: str = MISSING
    """The row's name in the table."""


@dataclass
class MatchedContextConfig:
    """The baseline table's recall at matched context (grasp/experiments/matched_context.py):
    every trained row against a baseline swept over k, at the depth whose context tokens per
    episode are the least at or above the row's."""

    sweep: str | None = None
    """The k sweep's folder (scripts/k_sweep.py root=); null: no such section."""
    baseline: str = "single_step_hybrid"
    """The swept baseline the trained rows are compared against."""
    metrics: list[str] = field(default_factory=lambda: ["recall", "answer_in_evidence", "em", "f1"])
    """Metrics compared (grasp/eval/paired.py COMPARABLE_METRICS)."""

    def __post_init__(self) -> None:
        self.baseline = str(parse_enum(Baseline, self.baseline, "matched_context.baseline"))
        check_metrics(self.metrics)


@dataclass
class BaselinesConfig(EvaluateConfig):
    """scripts/baselines.py: evaluate every baseline with the same backend, then one table.

    The evaluation fields are those of scripts/evaluate.py and apply to every baseline alike;
    each baseline's output folder is <sweep_dir>/<baseline> (out and baseline cannot be set).
    """

    baselines: list[str] = field(default_factory=lambda: [str(b) for b in Baseline])
    """Baselines to evaluate (configs/baseline/ names); the table lists them in its own order."""
    trained: dict[str, Any] = field(default_factory=dict)
    """Trained policies evaluated beside the baselines, by row name (after the baselines):
    each a TrainedRowConfig (``+trained.NAME={run_dir:R,stage:S,label:L}``)."""
    sweep_dir: str = "runs/baselines/${policy.kind}"
    """Folder of the sweep: one evaluation folder per row, table.json and table.md."""
    context_tokens: bool = True
    """Add the context tokens per episode to the table, counted with the tokenizer of
    policy.model (grasp/eval/context.py)."""
    dry_run: bool = False
    """Print what the sweep would do with each row (skip it as finished, evaluate it and why,
    or leave it not run) and stop: nothing is evaluated or written."""
    table_only: bool = False
    """Rewrite table.json and table.md from the row folders as they are and stop: nothing is
    evaluated (rebuilds a committed table; a row not finished says so)."""
    paired: list[list[str]] = field(default_factory=list)
    """Pairs of rows [A, B] compared question by question in the table: A minus B with a
    paired-bootstrap interval (grasp/eval/paired.py). Names are baselines or trained rows."""
    matched_context: MatchedContextConfig = field(default_factory=MatchedContextConfig)
    """Every trained row against a baseline swept over k, at matched context (needs
    context_tokens)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        wanted = {parse_enum(Baseline, b, "baselines") for b in self.baselines}
        self.baselines = [b for b in Baseline if b in wanted]
        clashing = sorted(set(self.trained) & {str(b) for b in Baseline})
        if clashing:
            raise ValueError(f"trained: {clashing} are baseline names; name the rows otherwise")
        self.trained = {name: _trained_row(name, row) for name, row in self.trained.items()}
        rows = {str(b) for b in Baseline} | set(self.trained)
        for pair in self.paired:
            if len(pair) != 2 or pair[0] == pair[1]:
                raise ValueError(f"paired: {list(pair)} is not two different rows [A, B]")
            unknown = [name for name in pair if name not in rows]
            if unknown:
                raise ValueError(
                    f"paired: {unknown} name no row (baselines and trained rows: {sorted(rows)})"
                )
        if self.dry_run and self.table_only:
            raise ValueError("dry_run and table_only: choose one (dry_run writes nothing)")


def _trained_row(name: str, row: Any) -> TrainedRowConfig:
    if isinstance(row, TrainedRowConfig):
        return row
    if isinstance(row, DictConfig):
        row = OmegaConf.to_container(row, resolve=True)
    if not isinstance(row, dict):
        raise ValueError(f"trained.{name}: expected {{run_dir, stage, label}}, got {row!r}")
    known = {f.name for f in dataclass_fields(TrainedRowConfig)}
    unknown, missing = sorted(set(row) - known), sorted({"run_dir", "label"} - set(row))
    if unknown or missing:
        raise ValueError(
            f"trained.{name}: unknown fields {unknown}, missing {missing} "
            f"(a row has {sorted(known)})"
        )
    return TrainedRowConfig(**row)


@dataclass
class KSweepConfig:
    """scripts/k_sweep.py: the corrective baselines at several k, then their trigger rates."""

    root: str = "runs/k_sweep"
    """Folder of the sweep: one scripts/baselines.py sweep per k (k<K>/), k_sweep.json/md."""
    ks: list[int] = field(default_factory=lambda: [3, 5, 10])
    """The hits per search (env.top_k) of each sweep."""
    baselines: list[str] = field(default_factory=lambda: ["crag", "self_rag"])
    """Rows of every sweep (configs/baseline/ names)."""
    datasets: list[str] = field(default_factory=lambda: ["hotpotqa"])
    """Datasets of every sweep."""
    n: int = 100
    """Questions per dataset (seed 42, as the baseline table samples them)."""
    overrides: list[str] = field(default_factory=list)
    """Further overrides of every scripts/baselines.py run (policy=..., judge=...)."""
    table_only: bool = False
    """Rewrite k_sweep.json/md from the k<K>/ folders as they are; evaluate nothing."""

    def __post_init__(self) -> None:
        if not self.ks or len(set(self.ks)) != len(self.ks):
            raise ValueError(f"ks must list distinct values of k, got {self.ks}")
        for k in self.ks:
            check_range("ks", k, low=1)
        self.baselines = [str(parse_enum(Baseline, b, "baselines")) for b in self.baselines]
        self.datasets = [str(parse_enum(DatasetName, d, "datasets")) for d in self.datasets]
        check_range("n", self.n, low=1)


class CompareMode(StrEnum):
    """What scripts/ablate.py does."""

    AFTER = "after"
    """Train the variants that are not finished, then compare them."""
    ONLY = "only"
    """Compare what the sweep folder holds; train nothing."""


@dataclass
class AblateConfig(TrainConfig):
    """scripts/ablate.py: train every ablation variant of an experiment, then compare them.

    The training fields are those of scripts/train.py and apply to every variant alike;
    each variant's run folder is <sweep_dir>/<variant> (run_dir cannot be set).
    """

    variants: list[str] = field(default_factory=lambda: [str(a) for a in Ablation])
    """Variants to train (configs/ablation/ names); the full run, none, is always included."""
    sweep_dir: str = "runs/ablate/${experiment}"
    """Folder of the sweep: one run folder per variant, comparison.json and comparison.md."""
    compare: str = "after"
    """after: train the unfinished variants, then compare; only: compare what sweep_dir holds."""
    launcher: list[str] = field(default_factory=list)
    """Command prefix that runs scripts/train.py for each variant, e.g. [accelerate, launch,
    --config_file, configs/accelerate/zero2.yaml, --num_processes, 2]; empty: this Python."""
    dev_n: int = 0
    """After a variant's training, also evaluate it with scripts/evaluate.py run_dir=<variant>
    (its own environment, greedy) on dev_n seed-42 questions of each of dev_datasets, into
    <variant>/eval_dev/; the comparison then pairs every variant with the full run question
    by question. 0: only the training run's own evaluation (eval_questions)."""
    dev_datasets: list[str] = field(
        default_factory=lambda: ["hotpotqa", "2wikimultihopqa", "musique"]
    )
    """The dev sets of that evaluation, each searched in its own pooled index."""
    share_warm_start: bool = True
    """A variant whose configuration differs from the full run's only in the reward (no_rr,
    no_rs) starts from the full run's finished warm start instead of fine-tuning its own:
    the warm start pays no reward, so it would be the same fine-tuning on the same episodes
    (<variant>/warm_start/shared_from.json). false: every variant warm-starts itself."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.variants = [parse_enum(Ablation, v, "variants") for v in self.variants]
        self.compare = parse_enum(CompareMode, self.compare, "compare")
        check_range("dev_n", self.dev_n, low=0)
        self.dev_datasets = [parse_enum(DatasetName, d, "dev_datasets") for d in self.dev_datasets]
        if len(set(self.dev_datasets)) != len(self.dev_datasets):
            raise ValueError(f"dev_datasets lists a dataset twice: {self.dev_datasets}")
        if self.dev_n and not self.dev_datasets:
            raise ValueError("dev_n > 0 needs at least one dataset in dev_datasets")


def hydra_mode(compare: str) -> str:
    """hydra.mode of scripts/ablate.py: a sweep, except when it only compares."""
    return "RUN" if compare == CompareMode.ONLY else "MULTIRUN"


@dataclass
class RobustnessConfig(PolicyRunConfig):
    """scripts/robustness.py: a policy on clean and adversarial corpora of one dev set.

    index applies to every corpus (near_duplicates: to all runs but the detection run), one
    index per corpus under index_root (default indexes/robustness/); the exhaustion runs set
    their own turn, token and wall-clock budgets over env and rollout. The output folder holds
    robustness.json, robustness.md and one subfolder per run; with run_dir it defaults to
    runs/robustness/<run>-<stage>."""

    dataset: DatasetConfig = field(default_factory=lambda: DatasetConfig(name="hotpotqa"))
    """The dataset whose dev questions are sampled and attacked (dataset=musique; dataset.path=
    another file)."""
    n: int = 20
    """Questions sampled (seeded); their pooled paragraphs are the clean corpus."""
    attack_seed: int = 0
    """Seed of the adversarial corpora (canary answers, injection kinds, copies)."""
    injection: InjectionConfig = field(default_factory=InjectionConfig)
    """The injection payloads."""
    poisoning: PoisoningConfig = field(default_factory=PoisoningConfig)
    """Copies per question and the detection threshold."""
    exhaustion: ExhaustionConfig = field(default_factory=ExhaustionConfig)
    """The budgets of the exhaustion runs."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_range("n", self.n, low=1)


@dataclass
class BridgeProbeConfig:
    """scripts/bridge_probe.py: the next hop's candidate queries, probed without a model
    (grasp/experiments/bridge_probe.py)."""

    dataset: DatasetConfig = field(default_factory=lambda: DatasetConfig(name="hotpotqa"))
    """The dataset whose questions are probed (dataset=musique; dataset.path= another file)."""
    split: str = "train"
    """Its split: train, the questions a warm start's scripted episodes are played on."""
    n: int = 0
    """Questions probed (a seeded sample); 0: all of the split."""
    seed: int = 42
    """Sampling seed of the questions."""
    k: int = 5
    """Hits per search (the paper's top-K)."""
    index_dir: str | None = None
    """The split's pooled index; default indexes/<dataset>-<split> (scripts/build_index.py,
    or the one a training run built)."""
    out: str | None = None
    """JSON output path; default runs/bridge_probe.json."""

    def __post_init__(self) -> None:
        check_range("n", self.n, low=0)
        check_range("k", self.k, low=1)
