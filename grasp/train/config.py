"""Configuration of a GRPO training run (scripts/train.py), as structured dataclasses.

The defaults are the CPU smoke run; ``configs/experiment/*.yaml`` override them (the
paper's Qwen2.5-3B run, the CPU learning run, the ablations).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from grasp.corpus.build import IndexConfig
from grasp.env.environment import EnvConfig
from grasp.models import ModelConfig
from grasp.rollout.engine import RolloutConfig
from grasp.rollout.policy import SamplingConfig
from grasp.train.cpu_logprobs import LossLogprobs
from grasp.train.dynamic_sampling import DynamicSamplingSettings
from grasp.train.process import WandbMode
from grasp.train.warm_start import WarmStartSettings
from grasp.types import DatasetName, StrEnum, check_choice, check_range, parse_enum

LOSS_TYPES = ("grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo", "luspo", "vespo")
"""The loss variants of TRL 1.16's ``GRPOConfig.loss_type``."""
SCALE_REWARDS = ("group", "batch", "none")
"""The advantage scalings of TRL's ``GRPOConfig.scale_rewards``."""
IMPORTANCE_SAMPLING_MODES = ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")
"""TRL's ``GRPOConfig.vllm_importance_sampling_mode`` values."""
LR_SCHEDULERS = (
    "constant",
    "constant_with_warmup",
    "linear",
    "cosine",
    "cosine_with_restarts",
    "polynomial",
    "inverse_sqrt",
)
"""transformers ``SchedulerType`` values that work with the arguments we pass: not
reduce_lr_on_plateau and greedy (they need an eval strategy), cosine_with_min_lr,
cosine_warmup_with_min_lr (min_lr) or warmup_stable_decay (num_decay_steps)."""


class TrainSource(StrEnum):
    """Where the training questions come from."""

    SMOKE_SPLIT = "smoke_split"
    """Disjoint halves of the bundled dev set, one index over both (NOT the paper's protocol)."""
    BUNDLED = "bundled"
    """The bundled train questions (data/<dataset>/train.jsonl), evaluated on the dev set."""
    HUB = "hub"
    """The dataset's train split from the Hugging Face hub, evaluated on the bundled dev set."""


class RolloutWeights(StrEnum):
    """What transformers rollouts of a LoRA policy generate with (``grpo.rollout_weights``)."""

    MERGED = "merged"
    """A copy of the weights with the adapters merged in, refreshed after each update."""
    ADAPTERS = "adapters"
    """The trained model itself, its adapters unmerged."""


class VllmMode(StrEnum):
    """Where vLLM generates the rollouts (TRL's ``GRPOConfig.vllm_mode``)."""

    COLOCATE = "colocate"
    """vLLM inside the trainer process, sharing its GPU."""
    SERVER = "server"
    """A separate ``trl vllm-serve`` process on other GPUs."""


@dataclass
class LoraSettings:
    """Low-rank adapters (peft); disabled means full fine-tuning."""

    enabled: bool = True
    """Train LoRA adapters instead of every weight."""
    r: int = 16
    """Adapter rank."""
    alpha: int = 32
    """Adapter scaling numerator (scale = alpha / r)."""
    dropout: float = 0.0
    """Dropout on the adapter input."""
    target_modules: list[str] = field(
        default_factory=lambda: [
            "q_proj",
            "k_proj",
            "v_proj",
            "o_proj",
            "gate_proj",
            "up_proj",
            "down_proj",
        ]
    )
    """Linear layers that get adapters."""


@dataclass
class GRPOSettings:
    """The optimizer side: TRL GRPOTrainer arguments we expose."""

    num_generations: int = 4
    """G: trajectories per question; advantages are relative within each group."""
    questions_per_step: int = 2
    """B: questions per optimizer step (the step sees B x G trajectories)."""
    max_steps: int = 4
    """Optimizer steps of the run."""
    learning_rate: float = 2e-4
    """Peak learning rate."""
    lr_scheduler_type: str = "constant"
    """transformers scheduler name (constant, cosine, linear...)."""
    warmup_steps: int = 0
    """Linear warm-up steps."""
    beta: float = 0.01
    """KL coefficient to the reference policy (0 loads no reference model)."""
    loss_type: str = "grpo"
    """TRL loss variant: grpo (the paper's), dapo, dr_grpo, bnpo, cispo, sapo..."""
    epsilon: float = 0.2
    """Lower clip range of the policy ratio."""
    epsilon_high: float | None = None
    """Upper clip range (None: same as epsilon; DAPO uses 0.28)."""
    scale_rewards: str = "group"
    """Advantage scaling: group (divide by the group's std), batch, or none."""
    num_iterations: int = 1
    """Policy updates per generated batch (GRPO's mu)."""
    gradient_accumulation_steps: int = 1
    """Micro-batches per optimizer step."""
    max_grad_norm: float = 1.0
    """Gradient clipping."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    bf16: bool = True
    """bf16 mixed precision (also on CPU: 2-3x faster there where the CPU has native bfloat16,
    slower where it has not; grasp.models.native_bfloat16)."""
    rollout_autocast: bool = True
    """Transformers rollouts and the run's evaluations generate under bf16 autocast when
    ``bf16`` is on and the weights are float32 master weights (full fine-tuning without a
    sharded optimizer), as the loss computes; false generates in float32 (on an H100/H200
    about 12x less matrix throughput). LoRA and sharded runs hold bf16 weights: no change.
    Log-probabilities are float32 in both. The run's results.json says what ran
    (``precision``)."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass to save memory."""
    lora: LoraSettings = field(default_factory=LoraSettings)
    """LoRA adapters or full fine-tuning."""
    dynamic_sampling: DynamicSamplingSettings = field(default_factory=DynamicSamplingSettings)
    """Replace zero-spread groups by fresh questions before the update (DAPO; off)."""
    use_vllm: bool = False
    """Generate rollouts with vLLM (GPU) instead of transformers."""
    reuse_cache: bool = True
    """Transformers rollouts and the run's evaluations: each turn prefills only the tokens
    appended since the previous turn, continuing its KV cache (``HFPolicy(reuse_cache=True)``),
    instead of re-encoding the whole episode. Same distribution; other rounding (false:
    every turn prefilled whole)."""
    rollout_weights: str = "adapters"
    """What transformers rollouts and the run's evaluations of a LoRA policy generate with
    (a ``RolloutWeights``): adapters, the trained model itself, its adapters unmerged; merged,
    a copy of the weights with the adapters merged in, brought up to date after each optimizer
    step (``grasp.rollout.adapters.MergedAdapters``: the same model up to one rounding per
    weight). Merged generates 1.2-1.6x faster alone (results/bench/adapters.json), but
    cpu_grasp_v2's rollouts were no faster with it
    (results/bench/train_step-cpu_grasp_v2.json: 78.1 s against 75.5 s), so the default
    samples from the trained model itself."""
    rollout_native_gqa: bool = False
    """Transformers rollouts and the run's evaluations on the CPU: attention with a mask runs
    grouped-query attention natively (the same numbers; 1.6-1.9x faster prefill attention
    against a continued cache alone, ``grasp.rollout.hf_decode.grouped_query_attention``; no
    faster in cpu_grasp_v2's rollouts, with merged weights); false copies the key/value heads
    first, as transformers does by default."""
    loss_logprobs: str = "rows"
    """How the loss's log-probabilities are computed on CPU (a ``LossLogprobs``,
    grasp/train/cpu_logprobs.py): rows, each row without its padding and the LM head only at
    the positions read, a chunk at a time; full_vocab, the padded micro-batch with float32
    logits of every completion position (the former path, kept to compare against). The same
    objective either way; GPU runs keep TRL's fused head."""
    logprob_chunk: int = 1024
    """loss_logprobs=rows: positions per LM-head chunk; at most one chunk's [positions,
    vocabulary] logits exist at a time (recomputed in the backward)."""
    vllm_mode: str = "colocate"
    """colocate (vLLM inside the trainer process) or server (trl vllm-serve on other GPUs);
    a ``VllmMode``."""
    vllm_server_base_url: str | None = None
    """server mode: URL of the trl vllm-serve process."""
    vllm_importance_sampling_mode: str = "token_truncate"
    """vLLM rollouts: how TRL corrects for the sampler/trainer mismatch. token_truncate clips
    each token's ratio (TIS); TRL's default sequence_mask multiplies the ratios of every
    generated token of a multi-turn trajectory and drops the whole sequence past the cap."""
    vllm_importance_sampling_cap: float = 3.0
    """Upper bound of the importance-sampling ratio (TRL's clip_max)."""
    vllm_gpu_memory_utilization: float = 0.3
    """colocate mode: share of GPU memory vLLM may take."""
    seed: int = 0
    """Seed of the data order, sampling and adapter initialization."""

    def __post_init__(self) -> None:
        # Checked here, not where TRL reads them: after the index build and the model load.
        check_range("grpo.learning_rate", self.learning_rate, low=0)
        check_range("grpo.warmup_steps", self.warmup_steps, low=0)
        check_range("grpo.beta", self.beta, low=0)
        check_choice("grpo.loss_type", self.loss_type, LOSS_TYPES)
        check_choice("grpo.scale_rewards", self.scale_rewards, SCALE_REWARDS)
        check_choice("grpo.lr_scheduler_type", self.lr_scheduler_type, LR_SCHEDULERS)
        check_choice(
            "grpo.vllm_importance_sampling_mode",
            self.vllm_importance_sampling_mode,
            IMPORTANCE_SAMPLING_MODES,
        )
        self.vllm_mode = parse_enum(VllmMode, self.vllm_mode, "grpo.vllm_mode")
        self.rollout_weights = parse_enum(
            RolloutWeights, self.rollout_weights, "grpo.rollout_weights"
        )
        self.loss_logprobs = parse_enum(LossLogprobs, self.loss_logprobs, "grpo.loss_logprobs")
        check_range("grpo.logprob_chunk", self.logprob_chunk, low=1)
        check_range("grpo.questions_per_step", self.questions_per_step, low=1)
        check_range("grpo.max_steps", self.max_steps, low=1)
        if self.num_generations < 2:
            raise ValueError(
                "grpo.num_generations must be at least 2: GRPO compares samples in a group"
            )


@dataclass
class DevCurveSettings:
    """Which dev questions the learning curve plays, and how often."""

    every: int = 0
    """Steps between evaluations; step 0 (the policy GRPO starts from) comes first. 0: off."""
    questions_per_dataset: int = 32
    """Seeded dev questions of each dataset (the same ones at every step)."""
    datasets: list[str] = field(default_factory=lambda: ["hotpotqa", "2wikimultihopqa", "musique"])
    """Datasets whose bundled dev sets the questions are drawn from."""
    seed: int = 42
    """Seed of the question sample (the evaluation protocol's)."""

    def check(self) -> None:
        if self.every < 0:
            raise ValueError(f"dev_curve.every must be >= 0, got {self.every}")
        if self.every and self.questions_per_dataset < 1:
            raise ValueError(
                f"dev_curve.questions_per_dataset must be >= 1, got {self.questions_per_dataset}"
            )
        if self.every and not self.datasets:
            raise ValueError("dev_curve.datasets is empty: name at least one dataset")


@dataclass
class TrainConfig:
    """scripts/train.py: a GRPO run with evaluation before and after."""

    experiment: str = "cpu_smoke"
    """Name of the experiment (set by each configs/experiment file)."""
    dataset: str = "hotpotqa"
    """Dataset of the questions and of the pooled index (a ``DatasetName``)."""
    train_source: str = "smoke_split"
    """smoke_split (bundled dev split into disjoint train/eval halves: NOT the paper protocol),
    bundled (data/<dataset>/train.jsonl, offline) or hub (the dataset's train split from the
    Hugging Face hub). With bundled and hub, the training index pools the train questions only
    and evaluation searches the dev set's own pooled index (the paper's protocol)."""
    questions_path: str | None = None
    """smoke_split: a normalized JSONL to split instead of the bundled data/<dataset>/ file."""
    eval_split: str = "dev"
    """Split the evaluation questions come from (bundled)."""
    eval_questions: int = 16
    """Questions of the evaluation before and after training (seeded sample)."""
    eval_before: bool = True
    """Evaluate the untrained policy first."""
    eval_max_batch_size: int = 32
    """Rows per ``model.generate`` call in the evaluations before and after training (bounds
    their memory: KV cache and one step's scores grow with it)."""
    index: IndexConfig = field(default_factory=IndexConfig)
    """Index of the training questions' pooled paragraphs."""
    index_dir: str | None = None
    """Index folder; default indexes/<dataset>-<train source>."""
    eval_index_dir: str | None = None
    """bundled/hub: folder of the evaluation (dev) index; default indexes/<dataset>-<eval_split>,
    the baseline table's index. Always searched in-process."""
    main_wait_s: float = 7200.0
    """Under a launch of several processes: how long the others wait, in seconds, for work
    the main process does alone (building or checking a local index, eval_before, eval_after
    and the results); past it they fail, naming what they waited for. Set it above the
    longest evaluation of ``eval_questions``."""
    env: EnvConfig = field(default_factory=lambda: EnvConfig(turn_budget=4))
    """Tools, top-K, turn budget."""
    model: ModelConfig = field(default_factory=ModelConfig)
    """The policy model."""
    rollout: RolloutConfig = field(
        default_factory=lambda: RolloutConfig(
            sampling=SamplingConfig(temperature=1.0, max_new_tokens=64), max_context_tokens=2048
        )
    )
    """Sampling of training rollouts, context budget and reward weights."""
    grpo: GRPOSettings = field(default_factory=GRPOSettings)
    """Optimizer and GRPO settings."""
    warm_start: WarmStartSettings = field(default_factory=WarmStartSettings)
    """Supervised warm start on scripted episodes before GRPO (off by default)."""
    dev_curve: DevCurveSettings = field(default_factory=DevCurveSettings)
    """Held-out dev questions evaluated at step 0 and every few steps (off by default)."""
    trajectories_every: int = 2
    """Every this many steps, write the trajectories of a fixed question sample (0: never)."""
    trajectory_questions: int = 4
    """Size of that fixed sample (drawn once, seeded)."""
    save_every: int = 2
    """Checkpoint every this many steps."""
    run_dir: str = "runs/${experiment}"
    """Folder of the run; rerunning with the same folder resumes from its last checkpoint."""
    wandb: str = "disabled"
    """disabled, offline or online (a ``WandbMode``; metrics.jsonl is always written)."""
    threads: int = 0
    """CPU threads for torch (the encoder's too) and FAISS; 0: every core this process may
    run on (os.sched_getaffinity). Set once at start (grasp/threads.py); on a shared machine,
    the cores this process can have to itself."""

    def __post_init__(self) -> None:
        # The closed sets are parsed here, once: the code past the config sees enums.
        self.dataset = parse_enum(DatasetName, self.dataset, "dataset")
        self.train_source = parse_enum(TrainSource, self.train_source, "train_source")
        self.wandb = parse_enum(WandbMode, self.wandb, "wandb")
        # save_every has no "never" (a run resumes from its checkpoints); 0 reached TRL's
        # save_steps. eval_questions=0 failed only after the index build.
        check_range("save_every", self.save_every, low=1)
        check_range("threads", self.threads, low=0)
        check_range("main_wait_s", self.main_wait_s, low=1)
        check_range("eval_questions", self.eval_questions, low=1)
        check_range("trajectories_every", self.trajectories_every, low=0)
        check_range("trajectory_questions", self.trajectory_questions, low=0)
        check_range("eval_max_batch_size", self.eval_max_batch_size, low=1)
        for name in self.dev_curve.datasets:
            parse_enum(DatasetName, name, "dev_curve.datasets")
        self.dev_curve.check()
        if self.rollout.sampling.temperature <= 0:
            raise ValueError(
                "rollout.sampling.temperature must be > 0 in training: greedy samples of a group "
                "are identical and GRPO learns nothing from them"
            )
