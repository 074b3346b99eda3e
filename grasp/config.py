"""Structured configs of the entry points, registered in Hydra's ConfigStore.

Each component owns the dataclass of its settings (``IndexConfig`` in ``grasp.corpus``...);
this module composes them into one top-level dataclass per script. The YAML files under
``configs/`` override these defaults and the command line overrides the YAML. Scripts call
``to_dataclass`` once; library code only ever sees the dataclasses.

Building a config has no side effects: no directories, no devices, no environment variables.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, OmegaConf

from grasp.corpus.build import IndexConfig
from grasp.data import DataSource
from grasp.paths import REPO_ROOT
from grasp.types import DatasetName

T = TypeVar("T")
E = TypeVar("E", bound=enum.Enum)


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


def parse_enum(enum_type: type[E], value: object, field_name: str) -> E:
    """``enum_type(value)``, or a ValueError naming the config field and the allowed values.

    Config fields hold enum values as strings: OmegaConf matches enums by member name
    (HOTPOTQA), while users write values (hotpotqa).
    """
    if value == MISSING:  # an unset field of a schema being built; Hydra reports it if left unset
        return value  # type: ignore[return-value]
    try:
        return enum_type(value)
    except ValueError:
        allowed = ", ".join(member.value for member in enum_type)
        raise ValueError(f"{field_name}={value!r} is not one of: {allowed}") from None


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
    store.store(name="bench_retrieval_schema", node=BenchRetrievalConfig)


@dataclass
class BenchRetrievalConfig:
    """scripts/bench_retrieval.py: build speed, query latency, recall and memory of retrieval."""

    sizes: list[int] = field(default_factory=lambda: [20_000, 200_000, 1_000_000])
    """Corpus sizes in sentences, ascending; the first is encoded for real and searched end to end."""
    datasets: list[DatasetName] = field(
        default_factory=lambda: [DatasetName.HOTPOTQA, DatasetName.TWOWIKI, DatasetName.MUSIQUE]
    )
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
    perturbation_sigma: float = 0.03
    """Per-dimension std of the Gaussian noise on tiled real embeddings (renormalized after)."""
    seed: int = 0
    """Seed of the paragraph order, the query sample, the synthetic sentences and the noise."""
    work_dir: str | None = None
    """Folder for the index files written while measuring; default a fresh temporary folder."""
    out: str | None = None
    """JSON output path; default runs/bench_retrieval.json."""
