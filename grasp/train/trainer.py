"""A GRPO training run: data, index, environment, TRL's GRPOTrainer fed by our rollout engine.

The flow of one run (``run_training``, under the run folder's lock):
validate the config (against the run directory's config.json and trained steps, if any; a
finished run stops here, with nothing to do) ->
questions (train / eval) -> pooled index -> environment -> policy model -> config.json, the
run directory's first file -> evaluation before -> GRPOTrainer(rollout_func=GraspRollout,
one reward function per term; grasp/train/trl_bridge.py) -> train (resuming from the run's
last checkpoint if any) -> evaluation after -> results.json and curves.png in the run
directory.

The run folder's resume rules are in grasp/train/run_folder.py, the GRPOConfig and LoraConfig
built from the settings in grasp/train/grpo_args.py.
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from grasp.corpus import IndexConfig, build_index
from grasp.corpus.index import SearchIndex
from grasp.data import DataSource, load_questions, sample_questions, split_train_eval
from grasp.env.environment import RetrievalEnvironment, check_top_k
from grasp.eval.policy_eval import evaluate_policy
from grasp.eval.provenance import code_version
from grasp.eval.results import DatasetEvaluation
from grasp.models import (
    WHEEL_PREFIX,
    LoadedModel,
    ModelConfig,
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
from grasp.rollout.engine import RolloutEngine
from grasp.rollout.factory import model_policy
from grasp.rollout.policy import Policy
from grasp.rollout.trajectory import write_trajectories
from grasp.serve.client import open_index
from grasp.train.callbacks import MetricsFileCallback, TrajectorySampleCallback
from grasp.train.config import TrainConfig, TrainSource
from grasp.train.dev_curve import DevCurve, DevCurveCallback, build_dev_sets, check_dev_curve
from grasp.train.grpo_args import grpo_args, lora_config, precision
from grasp.train.plots import plot_run
from grasp.train.process import RunProcess, SingleProcess, run_process, timed_barrier
from grasp.train.rollout_stats import ROLLOUTS_DIR
from grasp.train.run_folder import (
    AFTER_STEP_FILE,
    RESULTS_FILE,
    check_finished,
    check_same_run,
    check_trained_steps,
    evaluation_fingerprint,
    folder_fingerprint,
    latest_checkpoint,
    load_final_weights,
    run_lock,
    set_aside_stale_eval,
)
from grasp.train.trl_bridge import (
    GraspRollout,
    GRPOTrainerView,
    TrainingPrompts,
    grasp_grpo_trainer,
    policy_factory,
    reward_functions,
    rollout_autocast,
    rollout_model,
    sample_weights_step,
)
from grasp.train.warm_start import WarmStartContext, warm_start
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
    """Validate ``config`` (for the training processes of ``process``'s launch), then load the
    questions, the indexes (built once, by the main process) and the policy model."""
    process = process or SingleProcess()
    validate_config(config, process.num_processes)
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
    precision = "bfloat16" if config.grpo.bf16 else "float32"
    device = process_device(config.model.device)
    warn_if_emulated_bfloat16(precision, device, "Training (grpo.bf16)", "grpo.bf16=false")
    loaded = load_policy_model(replace(config.model, dtype=dtype))
    chat = ChatTokenizer(loaded.tokenizer, env.prompt_tool_schemas)
    return TrainingSetup(data, env, eval_env, loaded, chat)


def run_training(
    config: TrainConfig, resolved: dict[str, Any], process: RunProcess | None = None
) -> dict[str, Any]:
    """Run (or resume) the training described by ``config`` in ``config.run_dir``; a finished
    run's results.json as it stands when there is nothing to do.

    Every process of a launch runs this; only ``process.is_main_process`` (accelerate's
    ``PartialState`` by default) writes the run directory, the others waiting for it at each
    write (grasp/train/process.py). The others return what the main process wrote in
    results.json. The main process holds the run folder's lock throughout (``run_lock``): a
    second command on the folder is refused at once."""
    process = process or run_process(cpu=config.model.device == "cpu")
    lock = run_lock(Path(config.run_dir)) if process.is_main_process else nullcontext()
    with lock:
        return _run_training(config, resolved, process)


def _run_training(
    config: TrainConfig, resolved: dict[str, Any], process: RunProcess
) -> dict[str, Any]:
    """``run_training``'s work, under the run folder's lock."""
    main = process.is_main_process
    run_dir = Path(config.run_dir)
    setup = start_run(config, resolved, process)
    if setup is None:  # finished: nothing to do, nothing written (check_finished)
        return json.loads((run_dir / RESULTS_FILE).read_text())
    log.info("precision: %s", precision(config.grpo, setup.loaded.model))
    fingerprint = evaluation_fingerprint(resolved)
    warm = None
    base_model = config.model
    if config.warm_start.enabled:
        warm = warm_start(
            config.warm_start, warm_start_context(config, setup), setup.loaded, process
        )
        # GRPO, both evaluations and the final model start from the warm-started policy.
        setup = replace(setup, loaded=warm.loaded)
        base_model = replace(config.model, name=str(warm.model_dir))
    before_file = run_dir / "eval_before" / "results.json"
    if main and config.eval_before and not before_file.exists():
        evaluate_model(config, setup, setup.loaded.model, run_dir / "eval_before", fingerprint)
    curve = dev_curve(config, setup, fingerprint) if main and config.dev_curve.every else None
    if curve is not None and not curve.done(0):
        curve.evaluate(0, setup.loaded.model)  # the policy GRPO starts from
    timed_barrier(process, "the main process's eval_before", config.main_wait_s)
    trainer = make_grpo_trainer(
        config,
        setup.data,
        setup.env,
        setup.loaded,
        setup.chat,
        run_dir,
        eval_env=setup.eval_env,
        world_size=process.num_processes,
        merged=setup.merged,
    )
    if curve is not None:
        trainer.add_callback(DevCurveCallback(config.dev_curve.every, curve))
    final = run_dir / "final"
    _train_or_reload(config, trainer, final)
    step = trainer.state.global_step
    process.wait_for_everyone()  # final/ is written
    after_done = "the main process's eval_after and results.json"
    if not main:  # the main process evaluates and writes the results
        timed_barrier(process, after_done, config.main_wait_s)
        results_file = run_dir / "results.json"
        return json.loads(results_file.read_text()) if results_file.exists() else {}
    set_aside_stale_eval(run_dir / "eval_after", step)
    trained = _after_model(trainer, final, base_model)
    after = evaluate_model(config, setup, trained, run_dir / "eval_after", fingerprint)
    (run_dir / "eval_after" / AFTER_STEP_FILE).write_text(f"{step}\n")
    before = (
        DatasetEvaluation.from_json(json.loads(before_file.read_text()))
        if before_file.exists()
        else None
    )
    results = _results(config, setup.data, before, after, step)
    results["precision"] = precision(config.grpo, setup.loaded.model)
    if warm is not None:
        results["warm_start"] = warm.summary()
    (run_dir / "results.json").write_text(json.dumps(results, indent=2, default=str))
    plot_run(run_dir)
    timed_barrier(process, after_done, config.main_wait_s)
    return results


def start_run(
    config: TrainConfig, resolved: dict[str, Any], process: RunProcess
) -> TrainingSetup | None:
    """Check ``config`` against the run folder and build what the run needs, then (the main
    process) write its config.json: the run folder's first file. None for a finished run:
    nothing to build, nothing to write (``check_finished``).

    Nothing is written there before every check has passed, those that need the data, the
    index and the model included: a refused configuration would otherwise leave a
    config.json behind, and the corrected command would be refused as "another
    configuration" of that folder."""
    validate_config(config, process.num_processes)
    run_dir = Path(config.run_dir)
    # Every process checks before the main one writes (build_training waits for them all).
    check_same_run(run_dir / "config.json", resolved)
    check_trained_steps(run_dir, config.grpo.max_steps)
    if check_finished(run_dir, config.grpo.max_steps):
        return None
    process.wait_for_everyone()
    setup = build_training(config, process)
    if process.is_main_process:
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "config.json").write_text(json.dumps(resolved, indent=2, default=str))
    return setup


def warm_start_context(config: TrainConfig, setup: TrainingSetup) -> WarmStartContext:
    """What the warm start of this run plays and fine-tunes with (grasp/train/warm_start.py)."""
    return WarmStartContext(
        env=setup.env,
        chat=setup.chat,
        questions=setup.data.train,
        rollout=config.rollout,
        model=config.model,
        bf16=config.grpo.bf16,
        lora=lora_config(config),
        out_dir=Path(config.run_dir) / "warm_start",
    )


def _train_or_reload(config: TrainConfig, trainer: GRPOTrainerView, final: Path) -> None:
    """Train to ``grpo.max_steps`` (resuming from the latest checkpoint) and save ``final``;
    a finished run only reloads its weights. Every process takes part (the trainer gates
    its own writes)."""
    last = latest_checkpoint(final.parent / "checkpoints")
    if last is not None and last.step >= config.grpo.max_steps:
        # A finished run does no more training: "after" stays the model it describes.
        source = final if final.is_dir() else last.path
        log.info(
            "training finished at step %d: not training again (weights of %s)", last.step, source
        )
        trainer.state.global_step = last.step
        load_final_weights(trainer.accelerator.unwrap_model(trainer.model), source)
        if not final.is_dir():
            trainer.save_model(str(final))
        return
    if last is not None:
        log.info("resuming from %s", last.path)
    trainer.train(resume_from_checkpoint=str(last.path) if last else None)
    trainer.save_model(str(final))


def _after_model(trainer: GRPOTrainerView, final: Path, base_model: ModelConfig) -> Any:
    """The trained model, for the main process to evaluate alone.

    With whole parameters per process, the trainer's own model. Under FSDP or ZeRO-3 each
    process holds a shard, and a forward pass on one process alone would wait for the others
    forever: the saved ``final`` is loaded instead (a full model, or ``base_model`` with
    the LoRA adapter; the launch plans save a loadable final model)."""
    if not parameters_sharded_by_launcher():
        return trainer.accelerator.unwrap_model(trainer.model)
    from grasp.rollout.adapters import ADAPTER_CONFIG, apply_adapters

    if (final / ADAPTER_CONFIG).is_file():
        return apply_adapters(load_policy_model(base_model).model, [final])
    return load_policy_model(replace(base_model, name=str(final))).model


def evaluation_engine(
    config: TrainConfig,
    setup: TrainingSetup,
    model: Any,
    env: RetrievalEnvironment | None = None,
) -> RolloutEngine:
    """The engine of a run's evaluations: ``model`` decoded greedily in ``env`` (default the
    evaluation environment), at most ``config.eval_max_batch_size`` rows per
    ``model.generate`` call."""
    model = rollout_model(config.grpo, model, setup.merged)
    policy = model_policy(
        model,
        setup.loaded.tokenizer,
        max_batch_size=config.eval_max_batch_size,
        reuse_cache=config.grpo.reuse_cache,
        autocast_dtype=rollout_autocast(config.grpo, model),
        native_gqa=config.grpo.rollout_native_gqa,
    )
    greedy = config.rollout.greedy()
    return RolloutEngine(env or setup.eval_env, policy, greedy, chat=setup.chat)


def dev_curve(config: TrainConfig, setup: TrainingSetup, fingerprint: dict[str, Any]) -> DevCurve:
    """The run's dev learning curve (``grasp/train/dev_curve.py``): its datasets' dev indexes
    built or reused under indexes/, as the evaluation protocol's (local, like every
    evaluation of a run)."""
    local = replace(config.index, remote_url=None)

    def open_dev_index(dataset: str, pool: list[Question]) -> SearchIndex:
        directory = default_index_dir(dataset, "dev")
        source = {"dataset": dataset, "split": "dev"}
        return open_index(local, directory, pool, source=source).warm_up()

    sets = build_dev_sets(config.dev_curve, setup.data.train, config.env, open_dev_index)
    tokenizer = setup.loaded.tokenizer

    def count(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False).input_ids)

    def engine_for(env: RetrievalEnvironment, model: Any) -> RolloutEngine:
        return evaluation_engine(config, setup, model, env)

    return DevCurve(Path(config.run_dir), sets, engine_for, count, fingerprint)


def evaluate_model(
    config: TrainConfig,
    setup: TrainingSetup,
    model: Any,
    out_dir: Path,
    fingerprint: dict[str, Any],
) -> DatasetEvaluation:
    """Evaluate ``model`` on the run's evaluation questions into ``out_dir``; its results.
    ``fingerprint`` (``evaluation_fingerprint``) is what the folder must match to resume.

    Raises GenerationErrorsError (``grasp.eval.policy_eval``) when most episodes ended in a
    generation error (out of memory...): a broken backend must not read as a score near 0."""
    engine = evaluation_engine(config, setup, model)
    fingerprint = folder_fingerprint(out_dir, fingerprint)
    provenance = {"code": code_version()}  # each batch's commit in rollout_log.jsonl
    return evaluate_policy(
        engine, setup.data.eval, out_dir, fingerprint=fingerprint, provenance=provenance
    ).results


def make_grpo_trainer(
    config: TrainConfig,
    data: TrainingData,
    env: RetrievalEnvironment,
    loaded: LoadedModel,
    chat: ChatTokenizer,
    run_dir: Path,
    policy_for: Callable[[GRPOTrainerView], Policy] | None = None,
    eval_env: RetrievalEnvironment | None = None,
    world_size: int = 1,
    merged: MergedAdapters | None = None,
):
    """TRL's GRPOTrainer wired to our engine, reward terms and callbacks (``GraspGRPOTrainer``:
    on CPU, the loss's log-probabilities from the plain LM head; grasp/train/cpu_logprobs.py).

    ``policy_for(trainer)`` gives the policy of each rollout; by default the trainer's own
    model (transformers) or its vLLM engine. Tests pass a scripted policy. ``eval_env`` is
    where the trajectory samples of evaluation questions are played (their own index; default
    ``env``, when the evaluation questions are in the training corpus). ``world_size``: the
    training processes of the launch. The trainer's ``rollout_func`` is the ``GraspRollout``;
    what each rollout did reaches its output under ``REPORT_KEY``.
    """
    from datasets import Dataset

    # No policy of its own: each rollout plays the trainer's current weights (``policy_for``).
    engine = RolloutEngine(env, None, config.rollout, chat=chat)
    prompts = TrainingPrompts.of(env, data.train)
    policy_for = policy_for or policy_factory(config.grpo, loaded.tokenizer, merged)
    rollout = GraspRollout(
        engine,
        {q.question_id: q for q in data.train},
        prompts,
        policy_for,
        return_logprobs=config.grpo.use_vllm,
        dynamic_sampling=config.grpo.dynamic_sampling,
        records_dir=run_dir / ROLLOUTS_DIR,
    )
    # TRL's GRPOTrainer; on CPU its loss's log-probabilities come from the model's own LM head
    # over the completion positions (grasp/train/cpu_logprobs.py).
    trainer = grasp_grpo_trainer(config.grpo)(
        model=loaded.model,
        reward_funcs=reward_functions(),
        args=grpo_args(config, run_dir, world_size),
        train_dataset=Dataset.from_list(prompts.rows),
        processing_class=loaded.tokenizer,
        peft_config=lora_config(config),
        rollout_func=rollout,
        callbacks=[MetricsFileCallback(run_dir)],
    )
    size = min(config.trajectory_questions, len(data.eval))
    sample = random.Random(config.grpo.seed).sample(data.eval, size)
    sample_engine = RolloutEngine(eval_env or env, None, config.rollout.greedy(), chat=chat)

    def save_sample(step: int) -> None:
        batch = sample_engine.run(sample, policy=policy_for(trainer))
        trajectories = batch.scored(config.rollout.reward)
        weights = sample_weights_step(trainer, config.grpo.use_vllm)
        for trajectory in trajectories:
            trajectory.extra[WEIGHTS_STEP_KEY] = weights
        write_trajectories(trajectories, run_dir / "trajectories" / f"step_{step:06d}.jsonl")

    trainer.add_callback(TrajectorySampleCallback(config.trajectories_every, save_sample))
    return trainer


WEIGHTS_STEP_KEY = "weights_step"
"""In each trajectory of ``trajectories/step_N.jsonl``, under ``extra``: the optimizer steps
the weights that played it had taken."""


def _results(
    config,
    data: TrainingData,
    before: DatasetEvaluation | None,
    after: DatasetEvaluation,
    steps: int,
) -> dict[str, Any]:
    keys = ("em", "f1", "recall", "read_recall", "parse_error_rate", "turns_per_episode")
    results: dict[str, Any] = {
        "experiment": config.experiment,
        "data": data.label,
        "train_questions": len(data.train),
        "eval_questions": len(data.eval),
        "steps": steps,
        "code": code_version(),  # the commit that trained (or last resumed) the run
        "after": after.to_json(),
    }
    if before is not None:
        results["before"] = before.to_json()
        was, now = before.results, after.results
        results["delta"] = {k: getattr(now, k) - getattr(was, k) for k in keys}
        results["delta"].update({k: now.reward[k] - was.reward[k] for k in now.reward})
    results["config"] = {"grpo": asdict(config.grpo), "env": asdict(config.env)}
    return results
