"""A GRPO training run: data, index, environment, TRL's GRPOTrainer fed by our rollout engine.

The flow of one run (``run_training``, under the run folder's lock), one function a step:

1. ``start_run``: validate the config, check it against the run folder (its config.json and
   trained steps; a finished run stops here, with nothing to do), load the questions, the
   pooled index, the environment and the policy model (grasp/train/setup.py), then write
   config.json, the run folder's first file;
2. ``warm_started``: the scripted warm start GRPO begins from, when configured;
3. ``_before_training``: the evaluation before training and the dev curve's step 0;
4. ``build_grpo_trainer``: TRL's GRPOTrainer (rollout_func=GraspRollout, one reward function
   per term; grasp/train/trl_bridge.py);
5. ``_train``: train to ``grpo.max_steps``, resuming from the run's last checkpoint if any,
   and save final/;
6. ``_after_training``: the evaluation after training, results.json (``RunResults``) and
   curves.png.

Under a launch of several processes every process runs this; the main process alone writes
the run folder, and the others wait for each of its writes (``MainWrites``,
grasp/train/process.py): steps 3 and 6 are those writes. The run folder's paths and
results.json are grasp/train/run_folder.py's, its resume rules grasp/train/resume.py's, the
GRPOConfig and LoraConfig built from the settings in grasp/train/grpo_args.py.
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from grasp.corpus.index import SearchIndex
from grasp.env.environment import RetrievalEnvironment
from grasp.eval.policy_eval import evaluate_policy
from grasp.eval.provenance import code_version
from grasp.eval.results import RESULTS_FILE as EVALUATION_RESULTS_FILE
from grasp.eval.results import DatasetEvaluation
from grasp.models import ModelConfig, load_policy_model, parameters_sharded_by_launcher
from grasp.paths import default_index_dir
from grasp.rollout.adapters import MergedAdapters
from grasp.rollout.chat import ChatTokenizer
from grasp.rollout.engine import RolloutEngine
from grasp.rollout.factory import model_policy
from grasp.rollout.policy import Policy
from grasp.rollout.trajectory import write_trajectories
from grasp.serve.client import open_index
from grasp.train.callbacks import MetricsFileCallback, TrajectorySampleCallback
from grasp.train.config import TrainConfig
from grasp.train.dev_curve import DevCurve, DevCurveCallback, build_dev_sets
from grasp.train.grpo_args import grpo_args, lora_config, precision
from grasp.train.plots import plot_run
from grasp.train.process import MainWrites, RunProcess, run_process
from grasp.train.resume import (
    check_finished,
    check_same_run,
    check_trained_steps,
    evaluation_fingerprint,
    folder_fingerprint,
    run_lock,
    set_aside_stale_eval,
)
from grasp.train.run_folder import (
    EVAL_AFTER_DIR,
    EVAL_BEFORE_DIR,
    RESULTS_FILE,
    WEIGHTS_STEP_KEY,
    RunFolder,
    RunFolderError,
    RunResults,
    latest_checkpoint,
    load_final_weights,
)
from grasp.train.setup import (
    TrainingData,
    TrainingSetup,
    build_training,
    load_training,
    validate_config,
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
from grasp.train.warm_start import WarmStartContext, WarmStartResult, warm_start
from grasp.types import Question

__all__ = [
    "WEIGHTS_STEP_KEY",
    "Run",
    "TrainerInputs",
    "TrainingData",
    "TrainingSetup",
    "build_grpo_trainer",
    "build_training",
    "make_grpo_trainer",
    "run_results",
    "run_training",
    "start_run",
]

log = logging.getLogger(__name__)

BEFORE_WRITTEN = f"the main process's {EVAL_BEFORE_DIR}"
AFTER_WRITTEN = f"the main process's {EVAL_AFTER_DIR} and {RESULTS_FILE}"
"""What the other processes wait for at the two writes of the run's steps (``MainWrites``)."""


@dataclass
class Run:
    """One run under way: what every step after ``start_run`` reads."""

    config: TrainConfig
    setup: TrainingSetup
    """The questions, environments and policy (the warm-started policy once there is one)."""
    fingerprint: dict[str, Any]
    """What the run's evaluation folders must match to resume (``evaluation_fingerprint``)."""
    warm: WarmStartResult | None = None
    """The warm start GRPO began from; None without one."""

    @property
    def folder(self) -> RunFolder:
        return RunFolder(Path(self.config.run_dir))


def run_training(
    config: TrainConfig, resolved: dict[str, Any], process: RunProcess | None = None
) -> RunResults:
    """Run (or resume) the training described by ``config`` in ``config.run_dir``; its
    results.json (a finished run's as it stands, when there is nothing to do).

    Every process of a launch runs this (``process``: accelerate's ``PartialState`` by
    default); the main process holds the run folder's lock throughout (``run_lock``: a second
    command on the folder is refused at once) and writes the folder, and every other process
    returns the results it wrote."""
    process = process or run_process(cpu=config.model.device == "cpu")
    lock = run_lock(Path(config.run_dir)) if process.is_main_process else nullcontext()
    with lock:
        setup = start_run(config, resolved, process)
        if setup is None:  # finished: nothing to do, nothing written (check_finished)
            return _written_results(RunFolder(Path(config.run_dir)))
        run = Run(config, setup, evaluation_fingerprint(resolved))
        return _train_and_evaluate(run, MainWrites(process, config.main_wait_s))


def _train_and_evaluate(run: Run, writes: MainWrites) -> RunResults:
    """The run's steps after ``start_run``, in order; ``writes`` makes the main process's
    writes and the others' waits for them."""
    log.info("precision: %s", precision(run.config.grpo, run.setup.loaded.model))
    run = warm_started(run, writes.process)
    curve = writes.then_everyone(BEFORE_WRITTEN, lambda: _before_training(run))
    inputs = TrainerInputs(run.config, run.setup, world_size=writes.process.num_processes)
    trainer = build_grpo_trainer(inputs)
    if curve is not None:  # the main process's: it evaluates the curve
        trainer.add_callback(DevCurveCallback(run.config.dev_curve.every, curve))
    step = _train(run, trainer, writes.process)
    results = writes.then_everyone(AFTER_WRITTEN, lambda: _after_training(run, trainer, step))
    return results if results is not None else _written_results(run.folder)


def _written_results(folder: RunFolder) -> RunResults:
    """The results the main process wrote (a finished run's, or this run's once it waited)."""
    results = folder.read_results()
    if results is None:
        raise RunFolderError(f"{folder.results_file}: the main process wrote no results")
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
    folder = RunFolder(Path(config.run_dir))
    # Every process checks before the main one writes (load_training waits for them all).
    check_same_run(folder.config_file, resolved)
    check_trained_steps(folder.path, config.grpo.max_steps)
    if check_finished(folder.path, config.grpo.max_steps):
        return None
    process.wait_for_everyone()
    setup = load_training(config, process)
    if process.is_main_process:
        folder.write_config(resolved)
    return setup


def warm_started(run: Run, process: RunProcess) -> Run:
    """``run`` with its warm start (every process fine-tunes, the main one writes warm_start/):
    GRPO, both evaluations and the final model start from the warm-started policy. ``run``
    itself without one configured."""
    if not run.config.warm_start.enabled:
        return run
    context = warm_start_context(run.config, run.setup)
    warm = warm_start(run.config.warm_start, context, run.setup.loaded, process)
    return replace(run, setup=replace(run.setup, loaded=warm.loaded), warm=warm)


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
        out_dir=RunFolder(Path(config.run_dir)).warm_start_dir,
    )


def _before_training(run: Run) -> DevCurve | None:
    """The main process's work before GRPO: the evaluation before training (unless it stands
    in eval_before/), and the dev curve's step 0 (the policy GRPO starts from); the curve,
    None without one."""
    before = run.folder.eval_before_dir
    model = run.setup.loaded.model
    if run.config.eval_before and not (before / EVALUATION_RESULTS_FILE).exists():
        evaluate_model(run.config, run.setup, model, before, run.fingerprint)
    if not run.config.dev_curve.every:
        return None
    curve = dev_curve(run.config, run.setup, run.fingerprint)
    if not curve.done(0):
        curve.evaluate(0, model)
    return curve


def _train(run: Run, trainer: GRPOTrainerView, process: RunProcess) -> int:
    """Train (every process) and wait until final/ is written; the step trained to."""
    _train_or_reload(run.config, trainer, run.folder)
    process.wait_for_everyone()
    return trainer.state.global_step


def _train_or_reload(config: TrainConfig, trainer: GRPOTrainerView, folder: RunFolder) -> None:
    """Train to ``grpo.max_steps`` (resuming from the latest checkpoint) and save final/; a
    finished run only reloads its weights. Every process takes part (the trainer gates its
    own writes)."""
    final = folder.final_dir
    last = latest_checkpoint(folder.checkpoints_dir)
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


def _after_training(run: Run, trainer: GRPOTrainerView, step: int) -> RunResults:
    """The main process's work after GRPO: the trained model evaluated into eval_after/ (an
    earlier model's set aside), then results.json and curves.png; the results."""
    folder = run.folder
    set_aside_stale_eval(folder.path, step)
    base_model = run.config.model
    if run.warm is not None:
        base_model = replace(base_model, name=str(run.warm.model_dir))
    trained = _after_model(trainer, folder.final_dir, base_model)
    after = evaluate_model(run.config, run.setup, trained, folder.eval_after_dir, run.fingerprint)
    folder.after_step_file.write_text(f"{step}\n")
    results = replace(
        run_results(run.config, run.setup.data, _evaluation(folder.eval_before_dir), after, step),
        precision=precision(run.config.grpo, run.setup.loaded.model),
        warm_start=run.warm.summary() if run.warm is not None else None,
    )
    folder.write_results(results)
    plot_run(folder.path)
    return results


def _evaluation(out_dir: Path) -> DatasetEvaluation | None:
    """The evaluation in ``out_dir`` (its results.json), None when there is none."""
    path = out_dir / EVALUATION_RESULTS_FILE
    return DatasetEvaluation.from_json(json.loads(path.read_text())) if path.exists() else None


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


DELTA_METRICS = ("em", "f1", "recall", "read_recall", "parse_error_rate", "turns_per_episode")
"""The metrics whose change from before training results.json records (with every term)."""


def run_results(
    config: TrainConfig,
    data: TrainingData,
    before: DatasetEvaluation | None,
    after: DatasetEvaluation,
    steps: int,
) -> RunResults:
    """results.json of a run trained to ``steps``, evaluated ``after`` (and ``before``)
    training; the run adds what ran in which precision and its warm start."""
    delta = None
    if before is not None:
        was, now = before.results, after.results
        delta = {k: getattr(now, k) - getattr(was, k) for k in DELTA_METRICS}
        delta.update({k: now.reward[k] - was.reward[k] for k in now.reward})
    return RunResults(
        experiment=config.experiment,
        data=data.label,
        train_questions=len(data.train),
        eval_questions=len(data.eval),
        steps=steps,
        code=code_version(),  # the commit that trained (or last resumed) the run
        after=after,
        before=before,
        delta=delta,
        config={"grpo": asdict(config.grpo), "env": asdict(config.env)},
    )


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


# --------------------------------------------------------------------------- TRL's trainer


@dataclass
class TrainerInputs:
    """What ``build_grpo_trainer`` builds a run's GRPOTrainer from."""

    config: TrainConfig
    """The run's settings; its folder is ``config.run_dir``."""
    setup: TrainingSetup
    """The questions, the environments (training rollouts in ``env``, the trajectory samples
    of evaluation questions in ``eval_env``), the policy model and its merged copy."""
    world_size: int = 1
    """The training processes of the launch."""
    policy_for: Callable[[GRPOTrainerView], Policy] | None = None
    """The policy of each rollout, from the trainer; None: the trainer's own model
    (transformers) or its vLLM engine. Tests pass a scripted policy."""

    @property
    def folder(self) -> RunFolder:
        return RunFolder(Path(self.config.run_dir))


def build_grpo_trainer(inputs: TrainerInputs) -> GRPOTrainerView:
    """TRL's GRPOTrainer wired to our engine, reward terms and callbacks (``GraspGRPOTrainer``:
    on CPU, the loss's log-probabilities from the plain LM head; grasp/train/cpu_logprobs.py).

    Its ``rollout_func`` is the ``GraspRollout``: what each rollout did reaches its output
    under ``REPORT_KEY``. Every ``trajectories_every`` steps it plays a fixed sample of the
    evaluation questions into trajectories/step_N.jsonl."""
    from datasets import Dataset

    config, setup = inputs.config, inputs.setup
    prompts = TrainingPrompts.of(setup.env, setup.data.train)
    policy_for = inputs.policy_for or policy_factory(
        config.grpo, setup.loaded.tokenizer, setup.merged
    )
    trainer = grasp_grpo_trainer(config.grpo)(
        model=setup.loaded.model,
        reward_funcs=reward_functions(),
        args=grpo_args(config, inputs.folder.path, inputs.world_size),
        train_dataset=Dataset.from_list(prompts.rows),
        processing_class=setup.loaded.tokenizer,
        peft_config=lora_config(config),
        rollout_func=_training_rollout(inputs, prompts, policy_for),
        callbacks=[MetricsFileCallback(inputs.folder.path)],
    )
    save_sample = _trajectory_sampler(inputs, trainer, policy_for)
    trainer.add_callback(TrajectorySampleCallback(config.trajectories_every, save_sample))
    return trainer


def _training_rollout(
    inputs: TrainerInputs,
    prompts: TrainingPrompts,
    policy_for: Callable[[GRPOTrainerView], Policy],
) -> GraspRollout:
    """The ``rollout_func``: the training environment's engine, with no policy of its own
    (each rollout plays the trainer's current weights, ``policy_for``)."""
    config, setup = inputs.config, inputs.setup
    engine = RolloutEngine(setup.env, None, config.rollout, chat=setup.chat)
    return GraspRollout(
        engine,
        {q.question_id: q for q in setup.data.train},
        prompts,
        policy_for,
        return_logprobs=config.grpo.use_vllm,
        dynamic_sampling=config.grpo.dynamic_sampling,
        run_folder=inputs.folder,
    )


def _trajectory_sampler(
    inputs: TrainerInputs,
    trainer: GRPOTrainerView,
    policy_for: Callable[[GRPOTrainerView], Policy],
) -> Callable[[int], None]:
    """``save(step)``: the fixed sample of evaluation questions (``trajectory_questions``,
    seeded) played greedily in the evaluation environment by the trainer's current policy,
    into trajectories/step_N.jsonl, each trajectory with the step of the weights that played
    it (``WEIGHTS_STEP_KEY``)."""
    config, setup = inputs.config, inputs.setup
    size = min(config.trajectory_questions, len(setup.data.eval))
    sample = random.Random(config.grpo.seed).sample(setup.data.eval, size)
    engine = RolloutEngine(setup.eval_env, None, config.rollout.greedy(), chat=setup.chat)

    def save(step: int) -> None:
        batch = engine.run(sample, policy=policy_for(trainer))
        trajectories = batch.scored(config.rollout.reward)
        weights = sample_weights_step(trainer, config.grpo.use_vllm)
        for trajectory in trajectories:
            trajectory.extra[WEIGHTS_STEP_KEY] = weights
        write_trajectories(trajectories, inputs.folder.trajectory_sample_file(step))

    return save


def make_grpo_trainer(
    config: TrainConfig,
    data: TrainingData,
    env: RetrievalEnvironment,
    loaded: Any,
    chat: ChatTokenizer,
    run_dir: Path,
) -> GRPOTrainerView:
    """``build_grpo_trainer`` called as it was before ``TrainerInputs``: kept for
    grasp/bench/train_step.py alone (its training and evaluation environments are one), until
    it passes a ``TrainerInputs``."""
    setup = TrainingSetup(data, env, env, loaded, chat, MergedAdapters())
    return build_grpo_trainer(TrainerInputs(replace(config, run_dir=str(run_dir)), setup))
