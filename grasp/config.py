"""Structured configs of the entry points, registered in Hydra's ConfigStore.

Each component owns the dataclass of its settings (``IndexConfig`` in ``grasp.corpus``...),
and each layer the configs of its own entry points: the evaluation protocol's in
``grasp.eval.config``, training's in ``grasp.train.config``, the experiments' in
``grasp.experiments.config``, the benchmarks' in ``grasp.bench.config``. This module holds the
remaining ones (data, index, service, report), registers every one of them with Hydra
(``register_configs``) and re-exports them, so a script imports its config from here. The YAML files under
``configs/`` override these defaults and the command line overrides the YAML. Scripts call
``to_dataclass`` once; library code only ever sees the dataclasses.

Building a config has no side effects: no directories, no devices, no environment variables.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, OmegaConf

from grasp.bench.config import (
    BenchAdaptersConfig,
    BenchBuildConfig,
    BenchDtypeConfig,
    BenchEnvConfig,
    BenchRetrievalConfig,
    BenchServeConfig,
    BenchThreadsConfig,
    BenchTrainStepConfig,
)
from grasp.corpus.build import IndexConfig
from grasp.data.config import DatasetConfig, dataset_path
from grasp.eval.config import (
    BehaviourConfig,
    EvalRetrievalConfig,
    EvaluateConfig,
    PairedConfig,
)
from grasp.experiments.ablation import sweep_variants
from grasp.experiments.config import (
    AblateConfig,
    BaselinesConfig,
    BridgeProbeConfig,
    CompareMode,
    KSweepConfig,
    RobustnessConfig,
    TrainedRowConfig,
    hydra_mode,
)
from grasp.models import cpu_dtype
from grasp.paths import REPO_ROOT, default_index_dir
from grasp.serve.config import ServiceConfig
from grasp.structured import to_dataclass
from grasp.train.config import TrainConfig
from grasp.types import check_choice, check_range

__all__ = [
    "REPO_ROOT",
    "AblateConfig",
    "BaselinesConfig",
    "BenchAdaptersConfig",
    "BenchBuildConfig",
    "BenchDtypeConfig",
    "BenchEnvConfig",
    "BenchRetrievalConfig",
    "BenchServeConfig",
    "BenchThreadsConfig",
    "BenchTrainStepConfig",
    "BridgeProbeConfig",
    "BuildIndexConfig",
    "CompareMode",
    "CompressConfig",
    "DatasetConfig",
    "EvalRetrievalConfig",
    "EvaluateConfig",
    "KSweepConfig",
    "PairedConfig",
    "BehaviourConfig",
    "PrepareDataConfig",
    "ReportConfig",
    "RobustnessConfig",
    "ServeRetrievalConfig",
    "TrainConfig",
    "TrainedRowConfig",
    "dataset_path",
    "default_index_dir",
    "register_configs",
    "to_dataclass",
]

LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")
"""uvicorn's log levels (``uvicorn.config.LOG_LEVELS``), which it matches in any case."""


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
class ReportConfig:
    """scripts/report.py: a self-contained HTML report of a run or evaluation directory."""

    run_dir: str = MISSING
    """A training run directory (scripts/train.py) or an evaluation directory (scripts/evaluate.py)."""
    out: str | None = None
    """HTML output path; default <run_dir>/report.html."""
    max_trajectories: int | None = None
    """Trajectories per set in the viewer (the first ones in file order); all when null."""


@dataclass
class CompressConfig:
    """scripts/compress_results.py: store finished evaluations' trajectories as .xz."""

    root: str = "results"
    """Folder searched for finished evaluations (a trajectories.jsonl beside a results.json)."""


def register_configs() -> None:
    """Register every entry point's schema with Hydra."""
    store = ConfigStore.instance()
    store.store(name="prepare_data_schema", node=PrepareDataConfig)
    store.store(name="build_index_schema", node=BuildIndexConfig)
    store.store(name="eval_retrieval_schema", node=EvalRetrievalConfig)
    store.store(name="evaluate_schema", node=EvaluateConfig)
    store.store(name="robustness_schema", node=RobustnessConfig)
    store.store(name="bridge_probe_schema", node=BridgeProbeConfig)
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
    store.store(name="behaviour_schema", node=BehaviourConfig)
    store.store(name="compress_results_schema", node=CompressConfig)
    store.store(name="k_sweep_schema", node=KSweepConfig)
    store.store(name="bench_train_step_schema", node=BenchTrainStepConfig)
    # configs/ablate.yaml: the sweep over the variants, and no sweep when it only compares.
    OmegaConf.register_new_resolver(
        "ablation_sweep", lambda v: ",".join(map(str, sweep_variants(v))), replace=True
    )
    OmegaConf.register_new_resolver("ablation_mode", hydra_mode, replace=True)
    # The CPU configs' dtype: bfloat16 where the CPU computes it natively, else float32.
    OmegaConf.register_new_resolver("cpu_dtype", cpu_dtype, replace=True)
    OmegaConf.register_new_resolver("cpu_bf16", lambda: cpu_dtype() == "bfloat16", replace=True)


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
