"""What a training run trains and evaluates with, built once from its config: the questions
(train and evaluation), the pooled indexes (built once per launch, by the main process), the
environments and the policy model (``build_training``), and the checks that need more than the
config's own fields (``validate_config``). The run itself is grasp/train/trainer.py's.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from pathlib import Path

from grasp.corpus import IndexConfig, build_index
from grasp.corpus.index import SearchIndex
from grasp.data import DataSource, load_questions, sample_questions, split_train_eval
from grasp.env.environment import RetrievalEnvironment, check_top_k
from grasp.models import (
    WHEEL_PREFIX,
    LoadedModel,
    load_dtype_for_training,
    load_policy_model,
    parameters_sharded_by_launcher,
    process_device,
    sharded_by_launcher,
    warn_if_emulated_bfloat16,
)
from grasp.paths import default_index_dir
from grasp.rollout.adapters import MergedAdapters
from grasp.rollout.chat import ChatTokenizer
from grasp.serve.client import open_index
from grasp.train.config import TrainConfig, TrainSource
from grasp.train.dev_curve import check_dev_curve
from grasp.train.process import RunProcess, SingleProcess, timed_barrier
from grasp.types import Question

log = logging.getLogger(__name__)


@dataclass
class TrainingData:
    train: list[Question]
    eval: list[Question]
    pooled: list[Question]
    """Every question whose paragraphs go into the training index."""
    label: str
    """What the split is, written into results.json."""
    eval_pooled: list[Question] | None = None
    """The questions whose paragraphs make the evaluation index (the dev set's own pooled
    index, as the baselines search it); None: evaluation searches the training index."""


def validate_config(config: TrainConfig, world_size: int = 1) -> None:
    """Fail before any work, naming the field, on settings that cannot work (``world_size``:
    the training processes of the launch).

    The checks that need more than the config's own fields (files, the launch); each config
    dataclass checks its fields when it is built (``__post_init__``)."""
    name = config.model.name
    if (
        not name.startswith(WHEEL_PREFIX)
        and name.startswith((".", "/"))
        and not Path(name).exists()
    ):
        raise FileNotFoundError(f"model.name={name!r}: no such folder")
    if name.startswith(WHEEL_PREFIX):
        from grasp.models import gguf_path, wheel_model

        gguf_path(wheel_model(name))  # raises naming the missing wheel
    grpo = config.grpo
    if grpo.questions_per_step % world_size:
        raise ValueError(
            f"grpo.questions_per_step={grpo.questions_per_step} must be a multiple of the "
            f"{world_size} training processes: each process rolls out whole groups"
        )
    if parameters_sharded_by_launcher():
        check_sharded_generation(config, "this accelerate launch (FSDP or DeepSpeed ZeRO-3)")


def check_sharded_generation(config: TrainConfig, launch: str) -> None:
    """Refuse transformers rollouts on a model whose parameters are sharded (``launch``).

    Under ZeRO-3 and FSDP every forward pass is a collective: all processes must run it
    together. transformers keeps them in step inside one ``generate`` call (synced_gpus), but
    each process rolls out its own questions, so the processes make different numbers of
    ``generate`` calls (turns, micro-batches) and the first to finish waits forever in its
    next collective. vLLM generates from its own copy of the weights and has no such problem.
    """
    if not config.grpo.use_vllm:
        raise ValueError(
            f"grpo.use_vllm=false under {launch}: transformers generation on sharded parameters "
            "deadlocks when the processes take different numbers of turns; set "
            "grpo.use_vllm=true, or use DeepSpeed ZeRO-2 (configs/accelerate/zero2.yaml) or "
            "one process"
        )


def load_training_data(config: TrainConfig) -> TrainingData:
    dataset = config.dataset
    dev = load_questions(
        dataset, DataSource.NORMALIZED, path=config.questions_path, split=config.eval_split
    )
    source = config.train_source
    if source is TrainSource.SMOKE_SPLIT:
        halves = split_train_eval(dev, eval_fraction=0.5, seed=config.grpo.seed)
        eval_questions = sample_questions(halves.eval, config.eval_questions, seed=42)
        label = f"smoke split: disjoint halves of the bundled {dataset} {config.eval_split} set"
        return TrainingData(halves.train, eval_questions, dev, label)
    if source is TrainSource.BUNDLED:
        train = load_questions(dataset, DataSource.NORMALIZED, split="train")
    else:
        train = load_questions(dataset, DataSource.HUB, split="train")
    overlap = {q.question_id for q in train} & {q.question_id for q in dev}
    if overlap:
        raise ValueError(
            f"{len(overlap)} {config.eval_split} questions are also training questions "
            f"(e.g. {sorted(overlap)[0]}): train_source={source} must be disjoint from them"
        )
    eval_questions = sample_questions(dev, config.eval_questions, seed=42)
    label = f"{dataset} train ({source}, {len(train)} questions, pooled train index) / {config.eval_split} (its own pooled index)"
    return TrainingData(train, eval_questions, train, label, eval_pooled=dev)


def _default_index_dir(config: TrainConfig) -> Path:
    # The smoke split pools the bundled dev set: the same corpus, so the same index, as
    # evaluation and build_index use for that split.
    name = config.eval_split if config.train_source is TrainSource.SMOKE_SPLIT else "train"
    return default_index_dir(config.dataset, name)


def _eval_environment(
    config: TrainConfig, data: TrainingData, train_env: RetrievalEnvironment, process: RunProcess
) -> RetrievalEnvironment:
    """The environment evaluations run in: the dev set's own pooled index when the training
    questions are not dev questions (the baseline table's index), else the training one."""
    if data.eval_pooled is None:
        return train_env
    directory = Path(config.eval_index_dir or default_index_dir(config.dataset, config.eval_split))
    # Local, also when training searches a remote service: that service holds the train index.
    local = replace(config.index, remote_url=None)
    index = shared_index(local, directory, data.eval_pooled, config, process)
    return RetrievalEnvironment(index.warm_up(), config.env)


def shared_index(
    index: IndexConfig,
    directory: Path,
    questions: list[Question],
    config: TrainConfig,
    process: RunProcess,
) -> SearchIndex:
    """``open_index`` for every process of a launch, a local index built once.

    The main process builds (or reuses) the index of ``questions`` in ``directory``; the
    others wait for it (``timed_barrier``, at most ``config.main_wait_s``) instead of racing
    it on the same files, then every process loads it. A remote index needs no build."""
    source = {"dataset": config.dataset}
    if index.remote_url or process.num_processes == 1:
        return open_index(index, directory, questions, source=source)
    if process.is_main_process:
        build_index(questions, index, directory, source=source)
    else:
        log.info("waiting for the main process to build the index in %s", directory)
    timed_barrier(
        process, f"the main process to build the index in {directory}", config.main_wait_s
    )
    return open_index(index, directory)


@dataclass
class TrainingSetup:
    """What a run trains and evaluates with, built once from its config."""

    data: TrainingData
    env: RetrievalEnvironment
    """The training environment (the pooled training index)."""
    eval_env: RetrievalEnvironment
    """Where evaluations run (the dev set's own index, or ``env``)."""
    loaded: LoadedModel
    chat: ChatTokenizer
    merged: MergedAdapters = field(default_factory=MergedAdapters)
    """The merged copy of the trained LoRA model that rollouts and evaluations generate with
    (``grpo.rollout_weights=merged``): one per run, shared by all of them."""


def build_training(config: TrainConfig, process: RunProcess | None = None) -> TrainingSetup:
    """Validate ``config`` (for the training processes of ``process``'s launch), then load
    what the run trains and evaluates with (``load_training``)."""
    process = process or SingleProcess()
    validate_config(config, process.num_processes)
    return load_training(config, process)


def load_training(config: TrainConfig, process: RunProcess) -> TrainingSetup:
    """The questions, the indexes (built once, by the main process) and the policy model of
    a validated ``config`` (``validate_config``); the refusals that need the questions come
    first (top-k, the dev curve's held-out questions)."""
    data = load_training_data(config)
    check_top_k(config.env, data.pooled)
    if config.dev_curve.every:  # its refusals too come before the run folder's first file
        check_dev_curve(config.dev_curve, data.train, config.env)
    index_dir = Path(config.index_dir or _default_index_dir(config))
    index = shared_index(config.index, index_dir, data.pooled, config, process).warm_up()
    env = RetrievalEnvironment(index, config.env)
    eval_env = _eval_environment(config, data, env, process)
    # Full fine-tuning without a sharded optimizer keeps fp32 master weights (bf16 compute).
    dtype = load_dtype_for_training(config.model, config.grpo.lora.enabled, sharded_by_launcher())
    compute = "bfloat16" if config.grpo.bf16 else "float32"
    device = process_device(config.model.device)
    warn_if_emulated_bfloat16(compute, device, "Training (grpo.bf16)", "grpo.bf16=false")
    loaded = load_policy_model(replace(config.model, dtype=dtype))
    chat = ChatTokenizer(loaded.tokenizer, env.prompt_tool_schemas)
    return TrainingSetup(data, env, eval_env, loaded, chat)
