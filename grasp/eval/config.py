"""The configs of the evaluation protocol's entry points: scripts/evaluate.py
(``EvaluateConfig``), scripts/eval_retrieval.py (``EvalRetrievalConfig``) and scripts/compare.py
(``PairedConfig``). Registered with Hydra by ``grasp.config.register_configs``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from omegaconf import MISSING

from grasp.baselines.config import BaselineConfig
from grasp.corpus.build import IndexConfig
from grasp.data import default_normalized_path
from grasp.data.config import DatasetConfig
from grasp.env.environment import EnvConfig
from grasp.eval.judge import JudgeConfig
from grasp.eval.paired import COMPARABLE_METRICS, PAIRED_METRICS, check_metrics
from grasp.models import ModelConfig
from grasp.rollout.engine import RolloutConfig
from grasp.rollout.factory import PolicyConfig
from grasp.types import (
    DatasetName,
    check_range,
    parse_enum,
)


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
class PolicyRunConfig:
    """What every entry point that plays a policy in the environment on sampled dev questions
    shares (scripts/evaluate.py's ``EvaluateConfig``, scripts/robustness.py's
    ``RobustnessConfig``): where the questions come from and how they are sampled, the index,
    the environment, who acts and how it is rolled out, where the output goes, and a trained
    run that fixes the environment, index, rollout and policy instead
    (grasp/experiments/trained.py)."""

    data_dir: str | None = None
    """Folder of normalized <dataset>/<split>.jsonl files; default the bundled data/."""
    split: str = "dev"
    """Split of every dataset."""
    seed: int = 42
    """Sampling seed of the questions."""
    index: IndexConfig = field(default_factory=IndexConfig)
    """Index settings; each index is built (or reused) under index_root."""
    index_root: str | None = None
    """Folder of the indexes; default indexes/ (the robustness suite: indexes/robustness/)."""
    env: EnvConfig = field(default_factory=EnvConfig)
    """Tools, top-K, turn budget, search scope."""
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    """Who acts: scripted, hf, vllm or openai."""
    baseline: BaselineConfig = field(default_factory=BaselineConfig)
    """A baseline wrapping the policy as its backend (configs/baseline/); none: the policy acts."""
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    """Samples per question, sampling, context budget, reward weights."""
    batch_questions: int = 64
    """Questions rolled out together (one batched generation call per turn)."""
    out: str | None = None
    """Output folder; default runs/evaluate/<policy kind> (the robustness suite:
    runs/robustness/<policy kind>)."""
    threads: int = 0
    """CPU threads for torch (the encoder's too) and FAISS; 0: every core this process may
    run on (os.sched_getaffinity). Set once at start (grasp/threads.py); on a shared machine,
    the cores this process can have to itself."""
    run_dir: str | None = None
    """A training run whose policy acts in its own environment: env, index, rollout (greedy)
    and the policy come from its config.json and adapters (grasp/experiments/trained.py);
    overriding them too is refused."""
    stage: str = "final"
    """With run_dir: final (after GRPO), warm_start (the policy GRPO started from), or a
    checkpoint folder name (checkpoint-40)."""

    def __post_init__(self) -> None:
        check_range("batch_questions", self.batch_questions, low=1)


@dataclass
class EvaluateConfig(PolicyRunConfig):
    """scripts/evaluate.py: run a policy over dev sets in the environment and score it.

    The output folder holds one subfolder per dataset and the pooled results.json and
    results.md; with run_dir it defaults to <run_dir>/evaluate/<stage>."""

    datasets: list[str] = field(default_factory=lambda: ["hotpotqa", "2wikimultihopqa", "musique"])
    """Datasets to evaluate, each searched in its own pooled index
    (<index_root>/<dataset>-<split>), each in its own subfolder."""
    dataset: DatasetConfig | None = None
    """One dataset instead (dataset=musique), with its own source= and path=; replaces datasets."""
    n: int = 500
    """Questions per dataset (seed-42 sample, the paper protocol); all of them when fewer exist."""
    judge: JudgeConfig = field(default_factory=JudgeConfig)
    """The LLM judge of JD (configs/judge/): none, openai or hf, and its versioned prompt."""
    save_tokens: bool = False
    """Also write each trajectory's token ids and env mask."""
    show: int = 0
    """Print the first ``show`` trajectories of each dataset turn by turn (their calls,
    observations, answer and reward; grasp/eval/transcript.py)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.datasets = [parse_enum(DatasetName, d, "datasets") for d in self.datasets]
        if len(set(self.datasets)) != len(self.datasets):
            raise ValueError(f"datasets lists a dataset twice: {self.datasets}")
        # n=0 failed only after the first index was built.
        check_range("n", self.n, low=1)
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
    metrics: list[str] | None = None
    """Metrics compared (grasp/eval/paired.py COMPARABLE_METRICS: em, f1, recall, containment,
    read_recall, reads_run_per_episode, answer_in_evidence, reward/total and each
    reward/<term>); [all]: every one of them; null: EM, F1 and recall, as the baseline table."""
    matched_sweep: str | None = None
    """A k sweep's folder (scripts/k_sweep.py root=): B is then its row ``b`` (a baseline's
    name) at the depth whose context tokens per episode are the least at or above A's, so
    that A is compared at matched context; null: ``b`` is a folder."""
    model: ModelConfig = field(default_factory=ModelConfig)
    """With matched_sweep: the model whose tokenizer counts context tokens (the baseline
    table's unit: the policy model's)."""

    def __post_init__(self) -> None:
        if self.metrics is not None and self.metrics != ["all"]:
            check_metrics(self.metrics)

    def compared_metrics(self) -> tuple[str, ...]:
        """What ``metrics`` names, spelled out."""
        if self.metrics is None:
            return PAIRED_METRICS
        return COMPARABLE_METRICS if self.metrics == ["all"] else tuple(self.metrics)


@dataclass
class BehaviourConfig:
    """scripts/behaviour.py: what policies did, read from their evaluations' trajectories."""

    folders: list[str] = MISSING
    """Evaluation output folders (scripts/evaluate.py out=): <dataset>/trajectories.jsonl."""
    datasets: list[str] | None = None
    """Datasets read in every folder; null: every dataset the first folder holds."""
    examples: int = 10
    """Hop queries listed per folder in the printed markdown (all are in the JSON)."""
    out: str | None = None
    """JSON file to write; null: print only."""

    def __post_init__(self) -> None:
        if self.examples < 0:
            raise ValueError(f"examples must be >= 0, got {self.examples}")
