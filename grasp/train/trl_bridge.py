"""The bridge to TRL's GRPOTrainer: the one module that touches the trainer object.

Everything TRL calls back into, and everything we read from or override on its trainer, is
here, behind ``GRPOTrainerView`` (the small typed protocol of what we read):

- ``GraspRollout``, TRL's ``rollout_func``: prompts in, our engine's trajectories out as TRL's
  fields (token ids, env mask, log-probabilities); it scores each episode
  (``batch.scored(reward)``) and reports its statistics through the trainer's own metric log
  (``log_metric``: averaged over the processes, logged beside TRL's ``kl`` and ``entropy``).
- ``reward_functions`` / ``reward_weights``: one TRL reward function per term of
  ``grasp.reward.REWARD_TERMS``, weighted by the term's weight, so TRL's weighted sum is
  exactly ``compute_reward(...).total``.
- ``grasp_grpo_trainer``: GRPOTrainer with the CPU log-probability override
  (``grasp.train.cpu_logprobs``); ``make_grpo_trainer`` wires it to the engine.
- ``policy_factory``: the policy of each rollout, from the trainer's current weights (its
  model, its colocated vLLM engine, or a vLLM server after the weight push).
- ``sample_weights_step``, ``wrap_step_calls``: what the trajectory samples and the step
  profiler need from the trainer.

``TRL_ATTRIBUTES`` names every attribute of TRL's trainer this module relies on, private ones
included; ``tests/train/test_trl_bridge.py`` checks each against the installed TRL, so a TRL
upgrade that renames one fails there, in one place.

A training prompt is the environment's first messages of a question, exactly as the
environment writes them; ``TrainingPrompts`` finds the question of a prompt TRL hands back
from its content (no id rides inside a chat message).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol, TypedDict

import torch

from grasp import reward as reward_table
from grasp.reward import RewardBreakdown, RewardConfig
from grasp.rollout.adapters import MergedAdapters
from grasp.rollout.engine import RolloutEngine, RolloutTimings
from grasp.rollout.factory import model_policy
from grasp.rollout.policy import Policy
from grasp.rollout.trajectory import Trajectory
from grasp.train.config import GRPOSettings, RolloutWeights, VllmMode
from grasp.train.cpu_logprobs import (
    LossLogprobs,
    completion_logprobs,
    full_vocabulary_logprobs,
    fused_lora,
)
from grasp.train.dynamic_sampling import DynamicSamplingSettings, replacement_ids, select_groups
from grasp.train.metrics_log import drop_records_after
from grasp.train.rollout_stats import (
    REPORT_KEY,
    ROLLOUT_SECONDS_KEY,
    RolloutRecord,
    RolloutReport,
    rollout_metrics,
    trained_trace,
)
from grasp.train.run_folder import RunFolder
from grasp.types import Question

if TYPE_CHECKING:
    from grasp.env.environment import RetrievalEnvironment

# --------------------------------------------------------------------------- what we read


class _State(Protocol):
    global_step: int


class _Args(Protocol):
    seed: int
    cast_lm_head_to_fp32: bool


class _Accelerator(Protocol):
    process_index: int

    def unwrap_model(self, model: Any) -> Any: ...

    def wait_for_everyone(self) -> None: ...

    def autocast(self) -> Any: ...


class GRPOTrainerView(Protocol):
    """What the bridge reads of TRL's GRPOTrainer (public attributes; the private ones are
    read by the functions below, each named in ``TRL_ATTRIBUTES``)."""

    model: Any
    state: _State
    args: _Args
    accelerator: _Accelerator
    num_generations: int
    num_generations_eval: int
    temperature: float

    def train(self, resume_from_checkpoint: str | None = None) -> Any: ...

    def save_model(self, output_dir: str | None = None) -> None: ...

    def add_callback(self, callback: Any) -> None: ...


TRL_ATTRIBUTES: dict[str, str] = {
    "model": "public: the policy model (its .training says train or eval rollout)",
    "state": "public: global_step",
    "args": "public: seed, cast_lm_head_to_fp32",
    "accelerator": "public: process_index, unwrap_model, wait_for_everyone, autocast",
    "num_generations": "public: G of a training rollout",
    "num_generations_eval": "public: G of an evaluation rollout",
    "temperature": "public: the temperature the loss scores at",
    "rollout_func": "public: the GraspRollout (the step profiler times its engine)",
    "compute_loss": "public: timed by the step profiler",
    "train": "public: the run (resumed from a checkpoint)",
    "save_model": "public: the final weights",
    "add_callback": "public: trajectory samples, the dev curve, the step profiler",
    "ref_model": "public: the reference model of full fine-tuning with beta > 0 (else None)",
    "_log_metric": "private: the rollout's statistics, averaged over processes like TRL's",
    "_last_loaded_step": "private, vLLM only: the step whose weights vLLM last received",
    "vllm_generation": "private-ish, vLLM only: .llm, the colocated engine",
    "_entropy_bonus_enabled": "private: an entropy bonus needs TRL's own log-probabilities",
    "_get_per_token_logps_and_entropies": "private: overridden on CPU (cpu_logprobs)",
    "_compute_loss": "private: overridden to pass the loss's own positions to cpu_logprobs",
}
"""Every GRPOTrainer attribute this module reads or overrides, and why. Set after
``__init__`` (instance attributes) or on the class (methods); tests/train/test_trl_bridge.py
checks both kinds against the installed TRL."""


def log_metric(trainer: GRPOTrainerView, name: str, value: float) -> None:
    """One scalar into TRL's own metric log for this step (flushed after the rewards)."""
    trainer._log_metric(name, value)  # type: ignore[attr-defined]


def last_loaded_step(trainer: GRPOTrainerView) -> int | None:
    """The global step whose weights TRL last pushed to vLLM; None if never (or unknown)."""
    loaded = getattr(trainer, "_last_loaded_step", None)
    return None if loaded is None or loaded < 0 else int(loaded)


def colocated_llm(trainer: GRPOTrainerView) -> Any:
    """The vLLM engine TRL runs inside this process (``vllm_mode=colocate``)."""
    return trainer.vllm_generation.llm  # type: ignore[attr-defined]


def entropy_bonus_enabled(trainer: GRPOTrainerView) -> bool:
    return bool(getattr(trainer, "_entropy_bonus_enabled", False))


def scoring_models(trainer: GRPOTrainerView) -> list[Any]:
    """The models TRL's log-probability passes run: the policy, and a separate reference model
    when it has one (full fine-tuning with beta > 0; with LoRA the reference is the policy
    with its adapters disabled)."""
    reference = getattr(trainer, "ref_model", None)
    return [trainer.model] if reference is None else [trainer.model, reference]


def wrap_step_calls(
    trainer: GRPOTrainerView, wrap: Callable[[str, Callable[..., Any]], Callable[..., Any]]
) -> None:
    """Replace the calls of one step the profiler times with ``wrap(part, call)``: the
    rollout engine's ``run`` ("rollout"), the log-probability pass ("logprobs"), the loss
    ("forward") and the backward ("backward")."""
    engine = trainer.rollout_func.engine  # type: ignore[attr-defined]
    engine.run = wrap("rollout", engine.run)
    logprobs = trainer._get_per_token_logps_and_entropies  # type: ignore[attr-defined]
    trainer._get_per_token_logps_and_entropies = wrap("logprobs", logprobs)  # type: ignore[attr-defined]
    trainer.compute_loss = wrap("forward", trainer.compute_loss)  # type: ignore[attr-defined]
    accelerator = trainer.accelerator
    accelerator.backward = wrap("backward", accelerator.backward)  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- prompts


def prompt_key(messages: Sequence[Mapping[str, Any]]) -> str:
    """A prompt's identity: its messages as canonical JSON."""
    return json.dumps([dict(m) for m in messages], sort_keys=True, ensure_ascii=False)


@dataclass
class TrainingPrompts:
    """The training dataset's prompts and the question of each."""

    rows: list[dict[str, Any]]
    """TRL's dataset rows: ``{"prompt": messages}``, one per question."""
    by_key: dict[str, str]
    """``prompt_key(messages)`` -> question id."""

    @classmethod
    def of(cls, env: RetrievalEnvironment, questions: Iterable[Question]) -> TrainingPrompts:
        """Each question's first messages, as the environment writes them. A rollout cannot
        tell apart two questions with the same prompt: copies of one question (equal but for
        their id) play as the first of them; two different questions are refused."""
        rows, by_key, first = [], {}, {}
        for question in questions:
            messages = env.reset(question).messages
            key = prompt_key(messages)
            if key in first and replace(question, question_id=first[key].question_id) != first[key]:
                raise ValueError(
                    f"training questions {first[key].question_id} and {question.question_id} "
                    "have the same prompt but differ: keep one of them"
                )
            first.setdefault(key, question)
            by_key[key] = first[key].question_id
            rows.append({"prompt": messages})
        return cls(rows, by_key)

    def question_id(self, messages: Sequence[Mapping[str, Any]]) -> str:
        try:
            return self.by_key[prompt_key(messages)]
        except KeyError:
            raise ValueError("a prompt that is not one of the training prompts") from None


# --------------------------------------------------------------------------- the rollout


@dataclass
class Resampled:
    """What dynamic sampling made of a step's rollout (``GraspRollout._resample``)."""

    trajectories: list[Trajectory]
    """The kept B groups of G trajectories, their groups renumbered 0..B-1."""
    metrics: dict[str, float]
    """The step's ``sampling/*`` metrics."""
    extra: RolloutTimings
    """The generation and environment seconds of the extra rounds' rollouts."""


class RolloutOutput(TypedDict):
    """What ``GraspRollout`` hands TRL: per sample, the token ids, log-probabilities (None:
    not returned), environment mask and what the reward function reads; and the step's
    ``RolloutReport`` under ``REPORT_KEY`` (``grasp_rollout``), one for every sample."""

    prompt_ids: list[list[int]]
    completion_ids: list[list[int]]
    logprobs: list[list[float]] | None
    env_mask: list[list[int]]
    grasp_reward: list[RewardBreakdown]
    group_id: list[int]
    episode_id: list[str]
    grasp_rollout: RolloutReport


class GraspRollout:
    """TRL ``rollout_func``: prompts in, our engine's trajectories out, as TRL's fields.

    TRL hands it the prompts of the step, each repeated G times in a row; it finds each
    group's question, runs the engine once for the whole batch (B questions x G samples),
    scores the episodes, and returns the token ids, the env mask (tool results carry no
    loss) and per-sample extra fields. An episode that generated nothing (its first turn
    failed) reaches TRL with one masked id (``trained_trace``). Each process also appends one
    ``RolloutRecord`` per call to the run folder's ``rollouts/process-<i>.jsonl``."""

    def __init__(
        self,
        engine: RolloutEngine,
        questions: Mapping[str, Question],
        prompts: TrainingPrompts,
        policy_for: Callable[[GRPOTrainerView], Policy],
        return_logprobs: bool = False,
        dynamic_sampling: DynamicSamplingSettings | None = None,
        run_folder: RunFolder | None = None,
    ) -> None:
        if engine.chat is None:
            raise ValueError(
                "training needs token bookkeeping: build the engine with a chat tokenizer"
            )
        self.engine = engine
        self.questions = questions
        self.prompts = prompts
        self.policy_for = policy_for
        """The policy of a call, from the trainer: its current weights (or its vLLM engine)."""
        self.return_logprobs = return_logprobs
        self.dynamic_sampling = dynamic_sampling or DynamicSamplingSettings()
        self.run_folder = run_folder
        """Where each process appends its ``RolloutRecord`` lines (None: nowhere)."""
        self._records_opened = False

    def __call__(self, prompts: Sequence[list[dict]], trainer: GRPOTrainerView) -> RolloutOutput:
        training = bool(trainer.model.training)
        group = trainer.num_generations if training else trainer.num_generations_eval
        ids = [self.prompts.question_id(p) for p in prompts]
        if len(ids) % group:
            raise ValueError(f"{len(ids)} prompts do not split into groups of {group}")
        heads = ids[::group]
        for start, head in zip(range(0, len(ids), group), heads, strict=True):
            if any(i != head for i in ids[start : start + group]):
                raise ValueError("each group of G prompts must be one question repeated")
        policy = self.policy_for(trainer)
        started = time.perf_counter()
        batch = self.engine.run(
            [self.questions[i] for i in heads],
            group_size=group,
            seed=self._step_seed(trainer, 0),
            policy=policy,
        )
        generation, environment = batch.timings.generation, batch.timings.environment
        trajectories = batch.scored(self.engine.config.reward)
        sampling: dict[str, float] = {}
        if self.dynamic_sampling.enabled and training:
            resampled = self._resample(trajectories, group, heads, trainer, policy)
            trajectories, sampling = resampled.trajectories, resampled.metrics
            generation += resampled.extra.generation
            environment += resampled.extra.environment
        metrics = rollout_metrics(trajectories, group)
        metrics.update(sampling)
        metrics["time/rollout_generation_s"] = generation
        metrics["time/rollout_environment_s"] = environment
        metrics[ROLLOUT_SECONDS_KEY] = time.perf_counter() - started
        for name, value in metrics.items():
            log_metric(trainer, name, value)
        if self.run_folder is not None:
            self._record(trajectories, trainer)
        assert self.engine.chat is not None
        traces = [trained_trace(t.tokens, self.engine.chat.end_of_turn_id) for t in trajectories]
        logprobs = None
        if self.return_logprobs and all(trace.has_logprobs for trace in traces):
            logprobs = [trace.logprobs for trace in traces]
        return {
            "prompt_ids": [trace.prompt_ids for trace in traces],
            "completion_ids": [trace.completion_ids for trace in traces],
            "logprobs": logprobs,
            "env_mask": [trace.env_mask for trace in traces],
            "grasp_reward": [t.reward for t in trajectories],
            "group_id": [t.group_id for t in trajectories],
            "episode_id": [t.episode_id for t in trajectories],
            # Not a list: TRL hands the same report to every sample's reward kwargs.
            REPORT_KEY: RolloutReport(trajectories, metrics),
        }

    def _resample(
        self,
        trajectories: list[Trajectory],
        group: int,
        heads: list[str],
        trainer: GRPOTrainerView,
        policy: Policy,
    ) -> Resampled:
        """Replace zero-spread groups with groups of fresh questions, round by round, while
        some are missing, fresh questions remain and rounds are left
        (grasp/train/dynamic_sampling.py)."""
        needed = len(heads)
        groups = [trajectories[i : i + group] for i in range(0, len(trajectories), group)]
        seen = set(heads)
        extra = RolloutTimings()
        rounds = 0
        while rounds < self.dynamic_sampling.max_rounds and (
            ids := self._fresh_ids(groups, needed, seen, trainer, rounds + 1)
        ):
            rounds += 1
            seen.update(ids)
            batch = self.engine.run(
                [self.questions[i] for i in ids],
                group_size=group,
                seed=self._step_seed(trainer, rounds),
                policy=policy,
            )
            extra.generation += batch.timings.generation
            extra.environment += batch.timings.environment
            fresh = batch.scored(self.engine.config.reward)
            groups += [fresh[i : i + group] for i in range(0, len(fresh), group)]
        selection = select_groups([[t.reward.total for t in g] for g in groups], needed)
        kept = [
            replace(t, group_id=number)
            for number, index in enumerate(selection.kept)
            for t in groups[index]
        ]
        metrics = {
            "sampling/groups_rolled_out": float(len(groups)),
            "sampling/dropped_group_share": 1.0 - needed / len(groups),
            "sampling/extra_rollouts": float((len(groups) - needed) * group),
            "sampling/rounds": float(rounds),
            "sampling/kept_zero_spread_share": 1.0 - selection.with_spread / needed,
        }
        return Resampled(kept, metrics, extra)

    def _fresh_ids(
        self,
        groups: list[list[Trajectory]],
        needed: int,
        seen: set[str],
        trainer: GRPOTrainerView,
        round_: int,
    ) -> list[str]:
        """The questions round ``round_`` rolls out: one per group with reward spread still
        missing from the ``needed``, none rolled out this step (``seen``); [] when none is
        missing, or every training question was rolled out this step."""
        totals = [[t.reward.total for t in g] for g in groups]
        missing = needed - select_groups(totals, needed).with_spread
        if missing == 0:
            return []
        step = trainer.state.global_step
        return replacement_ids(list(self.questions), seen, missing, trainer.args.seed, step, round_)

    def _record(self, trajectories: Sequence[Trajectory], trainer: GRPOTrainerView) -> None:
        """Append this call's ``RolloutRecord`` to this process's file. A resumed run first drops
        the records of the steps after its checkpoint (played again), as metrics.jsonl does."""
        assert self.run_folder is not None
        index = int(trainer.accelerator.process_index)
        step = int(trainer.state.global_step) + 1
        path = self.run_folder.rollout_records_file(index)
        if not self._records_opened:
            path.parent.mkdir(parents=True, exist_ok=True)
            drop_records_after(path, step - 1)
            self._records_opened = True
        record = RolloutRecord.of(trajectories, step, index, bool(trainer.model.training))
        with path.open("a") as handle:
            handle.write(json.dumps(asdict(record)) + "\n")

    def _step_seed(self, trainer: GRPOTrainerView, round_: int) -> int:
        """A sampling seed per step and rollout round: the same stream every step would
        correlate the samples of successive steps (a resumed run draws the same seeds)."""
        base = self.engine.config.sampling.seed
        return base + 100_003 * trainer.state.global_step + 1_009 * round_


# --------------------------------------------------------------------------- the reward


def reward_weights(config: RewardConfig) -> list[float]:
    """TRL's weight of each function of ``reward_functions``: each term's weight in
    ``config`` (``grasp.reward.REWARD_TERMS``: 1, alpha, beta, ...)."""
    # Read from the module when called: the table is the one place a term is declared.
    return [term.weight_of(config) for term in reward_table.REWARD_TERMS]


def reward_functions() -> list[Callable[..., list[float | None]]]:
    """One TRL reward function per term of ``REWARD_TERMS``: the term of each sample's
    ``RewardBreakdown`` (``grasp_reward``, computed by the rollout)."""

    def term(name: str) -> Callable[..., list[float | None]]:

        def reward(
            prompts, completions, grasp_reward: list[RewardBreakdown], **kwargs
        ) -> list[float | None]:
            return [float(r[name]) for r in grasp_reward]

        reward.__name__ = name
        return reward

    return [term(t.name) for t in reward_table.REWARD_TERMS]


# --------------------------------------------------------------------------- the trainer


def plain_head_applies(
    trainer: GRPOTrainerView, model: Any, input_ids: torch.Tensor, **extra: Any
) -> bool:
    """Whether ``completion_logprobs`` computes what TRL's fused head would for this call."""
    if input_ids.device.type != "cpu" or any(value is not None for value in extra.values()):
        return False
    if entropy_bonus_enabled(trainer) or trainer.args.cast_lm_head_to_fp32:
        return False
    config = trainer.accelerator.unwrap_model(model).config
    config = getattr(config, "text_config", None) or config
    if getattr(config, "final_logit_softcapping", None) or getattr(
        config, "output_router_logits", False
    ):
        return False
    return getattr(config, "logit_scale", None) in (None, 1.0)


def grasp_grpo_trainer(grpo: GRPOSettings | None = None) -> type:
    """TRL's GRPOTrainer with the CPU log-probabilities of ``grpo.loss_logprobs``
    (grasp/train/cpu_logprobs.py; imported late: TRL is heavy)."""
    from trl import GRPOTrainer

    settings = grpo or GRPOSettings()

    class GraspGRPOTrainer(GRPOTrainer):
        _scored: torch.Tensor | None = None
        """During the loss's forward: the positions it reads (completion x tool mask)."""

        def _compute_loss(self, model, inputs):
            # The loss, its KL and its entropy read only the generated tokens: the training
            # forward scores those alone (observation tokens carry no loss).
            scored = inputs["completion_mask"]
            if "tool_mask" in inputs:
                scored = scored * inputs["tool_mask"]
            self._scored = scored
            try:
                return super()._compute_loss(model, inputs)
            finally:
                self._scored = None

        def _get_per_token_logps_and_entropies(
            self,
            model,
            input_ids,
            attention_mask,
            logits_to_keep,
            batch_size=None,
            compute_entropy=False,
            compute_aux_loss=False,
            **extra,
        ):
            if compute_aux_loss or not plain_head_applies(self, model, input_ids, **extra):
                return super()._get_per_token_logps_and_entropies(
                    model,
                    input_ids,
                    attention_mask,
                    logits_to_keep,
                    batch_size=batch_size,
                    compute_entropy=compute_entropy,
                    compute_aux_loss=compute_aux_loss,
                    **extra,
                )
            if settings.loss_logprobs is LossLogprobs.FULL_VOCAB:
                logps, entropies = full_vocabulary_logprobs(
                    model,
                    input_ids,
                    attention_mask,
                    logits_to_keep,
                    temperature=self.temperature,
                    batch_size=batch_size,
                    compute_entropy=compute_entropy,
                    autocast=self.accelerator.autocast,
                )
                return logps, entropies, None
            scored = self._scored if torch.is_grad_enabled() else None
            if scored is not None and tuple(scored.shape) != (input_ids.shape[0], logits_to_keep):
                scored = None  # not the loss's own micro-batch: score every position
            with fused_lora(model):
                logps, entropies = completion_logprobs(
                    model,
                    input_ids,
                    attention_mask,
                    logits_to_keep,
                    temperature=self.temperature,
                    compute_entropy=compute_entropy,
                    autocast=self.accelerator.autocast,
                    scored=scored,
                    chunk=settings.logprob_chunk,
                )
            return logps, entropies, None

    return GraspGRPOTrainer


def sample_weights_step(trainer: GRPOTrainerView, use_vllm: bool) -> int | None:
    """How many optimizer steps the weights of a trajectory sample written now had taken.

    The sample is written at the end of step N. Transformers rollouts play the trainer's own
    model: N. vLLM plays the weights TRL last pushed to it, which it does before a step's
    generation (``_last_loaded_step``, the global step then): at the end of step N those are
    the weights of step N-1 (or earlier, when a generation serves several steps). None if
    this TRL does not say."""
    if not use_vllm:
        return int(trainer.state.global_step)
    return last_loaded_step(trainer)


def rollout_autocast(grpo: GRPOSettings, model: Any) -> torch.dtype | None:
    """The dtype transformers rollouts of ``model`` generate under (``HFPolicy``'s
    ``autocast_dtype``): bfloat16 when the run computes in bf16 and ``model`` holds float32
    weights (full fine-tuning's master weights), unless ``grpo.rollout_autocast`` is off;
    None (the weights' own dtype) otherwise."""
    weights = model.get_input_embeddings().weight.dtype
    if grpo.bf16 and grpo.rollout_autocast and weights == torch.float32:
        return torch.bfloat16
    return None


def rollout_model(grpo: GRPOSettings, model: Any, merged: MergedAdapters) -> Any:
    """The model transformers rollouts and the run's evaluations generate with: ``model``, or
    with ``grpo.rollout_weights=merged`` its merged copy (a LoRA model; ``merged`` keeps it
    up to date)."""
    if grpo.rollout_weights is RolloutWeights.MERGED:
        return merged.of(model)
    return model


def policy_factory(
    grpo: GRPOSettings, tokenizer: Any, merged: MergedAdapters | None = None
) -> Callable[[GRPOTrainerView], Policy]:
    """How a rollout reaches the current weights: the trainer's model (or its merged copy,
    ``rollout_model``), or its vLLM engine."""
    servers: dict[str, Any] = {}
    merged = merged or MergedAdapters()

    def policy_for(trainer: GRPOTrainerView) -> Policy:
        model = trainer.accelerator.unwrap_model(trainer.model)
        if not grpo.use_vllm:
            model = rollout_model(grpo, model, merged)
            autocast = rollout_autocast(grpo, model)
            return model_policy(
                model,
                tokenizer,
                reuse_cache=grpo.reuse_cache,
                autocast_dtype=autocast,
                native_gqa=grpo.rollout_native_gqa,
            )
        from grasp.rollout.vllm_policy import VLLMPolicy, VLLMServerPolicy

        generation_config = model.generation_config
        if grpo.vllm_mode is VllmMode.COLOCATE:
            return VLLMPolicy(colocated_llm(trainer), generation_config=generation_config)
        # TRL builds its client (weight sync) on the main process only: every rank generates
        # through its own HTTP connection, after the weights of this step were pushed.
        trainer.accelerator.wait_for_everyone()
        if "server" not in servers:
            servers["server"] = VLLMServerPolicy.connect(
                grpo.vllm_server_base_url, tokenizer, generation_config
            )
        return servers["server"]

    return policy_for
