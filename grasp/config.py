"""Structured configs of the entry points, registered in Hydra's ConfigStore.

Each component owns the dataclass of its settings (``IndexConfig`` in ``grasp.corpus``...);
this module composes them into one top-level dataclass per script. The YAML files under
``configs/`` override these defaults and the command line overrides the YAML. Scripts call
``to_dataclass`` once; library code only ever sees the dataclasses.

Building a config has no side effects: no directories, no devices, no environment variables.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, OmegaConf

from grasp.corpus.build import IndexConfig
from grasp.data import DataSource
from grasp.env.environment import EnvConfig
from grasp.paths import REPO_ROOT
from grasp.rollout.engine import RolloutConfig
from grasp.rollout.factory import PolicyConfig
from grasp.train.config import TrainConfig
from grasp.types import DatasetName, parse_enum

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

    def __post_init__(self) -> None:
        self.datasets = [parse_enum(DatasetName, d, "datasets") for d in self.datasets]


@dataclass
class EvaluateConfig:
    """scripts/evaluate.py: run a policy over a dev set in the environment and score it."""

    dataset: DatasetConfig = field(default_factory=DatasetConfig)
    """The dataset whose pooled index is searched and whose questions are asked."""
    split: str = "dev"
    """Split of the dataset."""
    n: int = 500
    """Questions (seed-42 sample, the paper protocol); all of them when fewer exist."""
    seed: int = 42
    """Sampling seed of the questions."""
    index: IndexConfig = field(default_factory=IndexConfig)
    """Index settings; the index is built (or reused) in index_dir."""
    index_dir: str | None = None
    """Index folder; default indexes/<dataset>-<split>."""
    env: EnvConfig = field(default_factory=EnvConfig)
    """Tools, top-K, turn budget, search scope."""
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    """Who acts: scripted, hf, vllm or openai."""
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    """Samples per question, sampling, context budget, reward weights."""
    batch_questions: int = 64
    """Questions rolled out together (one batched generation call per turn)."""
    out: str | None = None
    """Output folder for results.json and trajectories.jsonl; default runs/evaluate/<dataset>-<policy>."""
    save_tokens: bool = False
    """Also write each trajectory's token ids and env mask."""


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


def dataset_path(dataset: DatasetConfig, split: str) -> Path:
    """The file a dataset config reads: its ``path`` or the bundled default."""
    if dataset.path:
        return Path(dataset.path)
    return REPO_ROOT / "data" / str(dataset.name) / f"{split}.jsonl"


def default_index_dir(name: DatasetName | str, split: str) -> Path:
    return REPO_ROOT / "indexes" / f"{name}-{split}"


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
    store.store(name="bench_env_schema", node=BenchEnvConfig)
    store.store(name="train_schema", node=TrainConfig)
    store.store(name="bench_retrieval_schema", node=BenchRetrievalConfig)


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
