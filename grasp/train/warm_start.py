"""Optional warm start before GRPO: supervised fine-tuning on scripted search episodes.

A small policy that almost never writes a valid search call gets no reward signal from GRPO
(every sample of a group scores 0, so every advantage is 0). A warm start first shows it
the episode format: ``HeuristicSearchPolicy`` plays the training questions in the same
environment (same tools, prompt, assistant prefix and tokenization as the rollouts), the
episodes that found a gold paragraph are kept (rejection sampling), and TRL's
``SFTTrainer`` fits the policy to them, with loss on the turns the policy would generate
only (the env mask), as in GRPO. The LoRA weights are merged and the model saved in
``RUN_DIR/warm_start/model``; GRPO then starts from it. A resumed run reuses the saved model.

With ``plans``, the questions are shared round-robin among several fixed plans (tool
sequences, e.g. ``[semantic_search, answer]`` or ``[semantic_search, keyword_search,
read_paragraph, answer]``). The warm-started policy then mixes those ways of acting and
GRPO has to find out which of them the reward pays for; a single plan leaves it nothing to
choose between.

This departs from the paper (which starts GRPO from Qwen2.5-3B-Instruct); it is off by
default and on in the CPU learning run, where the 135M model needs it.
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from grasp.env.environment import RetrievalEnvironment
from grasp.env.tools import ToolRole
from grasp.models import MODEL_CONFIG_FILE, LoadedModel, ModelConfig, load_policy_model
from grasp.rollout.chat import ChatTokenizer
from grasp.rollout.engine import RolloutConfig, RolloutEngine
from grasp.rollout.scripted import HeuristicSearchPolicy, check_plan, plan_tool, plan_tools
from grasp.rollout.trajectory import Trajectory, write_trajectories
from grasp.train.process import RunProcess, SingleProcess
from grasp.train.run_folder import WarmStartSummary
from grasp.types import Question

log = logging.getLogger(__name__)

MODEL_DIR = "model"
ADAPTER_DIR = "adapter"
"""With LoRA: the warm start's adapter, before it was merged into ``MODEL_DIR``."""
DONE_MARKER = "warm_start.json"


@dataclass
class WarmStartSettings:
    """Supervised warm start on scripted episodes before GRPO (off in the paper's setting)."""

    enabled: bool = False
    """Fine-tune on scripted episodes first (see grasp/train/warm_start.py)."""
    questions: int = 200
    """Training questions the scripted policy plays (seeded sample)."""
    reads: int = 1
    """Paragraphs the scripted policy reads after its two searches (when ``plans`` is empty)."""
    plans: list[list[str]] = field(default_factory=list)
    """Tool sequences the questions are shared among, round-robin (each ends with answer);
    empty: the heuristic search-then-read policy. A step may be ``<search>:bridge`` or
    ``<search>:entity`` (the next hop's query), ``read_paragraph:gold`` (a gold paragraph's
    hit) or ``?<step>`` (only while a gold paragraph is missing): grasp/rollout/scripted.py."""
    adapt_plans: bool = False
    """For a run that lacks some of the plans' tools (the tool ablations): a missing search
    becomes the other search (not repeated where the plan already calls it) and a missing
    read_paragraph is dropped (``adapt_plan``); off: such a plan is an error."""
    min_recall: float = 0.5
    """Keep an episode when at least this fraction of gold paragraphs was retrieved."""
    epochs: float = 1.0
    """Passes over the kept episodes."""
    learning_rate: float = 2.0e-4
    """SFT learning rate (of the LoRA weights when grpo.lora.enabled, else of all weights)."""
    batch_size: int = 4
    """Episodes per optimizer step (micro-batches of 2)."""
    seed: int = 0
    """Sampling of the questions and SFT data order."""


@dataclass
class WarmStartContext:
    """What a warm start plays and fine-tunes with: the run's environment, data and model."""

    env: RetrievalEnvironment
    """The training environment the scripted episodes are played in."""
    chat: ChatTokenizer
    """Tokenizes the episodes exactly as the policy's rollouts are."""
    questions: list[Question]
    """The training questions the scripted policy's sample is drawn from."""
    rollout: RolloutConfig
    """The rollouts' settings (assistant prefix, context budget, reward)."""
    model: ModelConfig
    """The policy model's settings (the warm-started model is loaded with them)."""
    bf16: bool
    """bf16 mixed precision in the fine-tuning."""
    lora: Any
    """peft ``LoraConfig`` of the fine-tuning, or None for full fine-tuning."""
    out_dir: Path
    """The run's warm_start/ folder (written by the main process only)."""


@dataclass
class WarmStartResult:
    """The warm-started policy and how it was made."""

    loaded: LoadedModel
    """The warm-started model (loaded from ``model_dir``) and its tokenizer."""
    model_dir: Path
    kept: int
    """Scripted episodes kept for the fine-tuning (``min_recall``)."""
    played: int
    """Scripted episodes played."""
    train_loss: float | None
    """The fine-tuning's mean loss (None when the trainer reported none)."""

    def summary(self) -> WarmStartSummary:
        """The warm start, as results.json records it."""
        return WarmStartSummary(
            model=str(self.model_dir),
            episodes_played=self.played,
            episodes_kept=self.kept,
            sft_loss=self.train_loss,
            note="eval 'before' is the warm-started policy, the start of GRPO",
        )


def warm_start(
    settings: WarmStartSettings,
    context: WarmStartContext,
    loaded: LoadedModel,
    process: RunProcess | None = None,
) -> WarmStartResult:
    """Fine-tune ``loaded`` on scripted episodes (or reload a finished warm start).

    Every process plays the episodes and fine-tunes (the SFT trainer is distributed over
    them); only the main process writes ``context.out_dir``, and the others wait for it
    before loading the warm-started model from there."""
    process = process or SingleProcess()
    out_dir = context.out_dir
    marker = out_dir / DONE_MARKER
    model_dir = out_dir / MODEL_DIR
    warm_config = replace(context.model, name=str(model_dir))
    if marker.exists():
        log.info("warm start: reusing %s", model_dir)
        done = json.loads(marker.read_text())
        if not (model_dir / MODEL_CONFIG_FILE).is_file() and process.is_main_process:
            _rebuild_from_adapter(context.model, out_dir / ADAPTER_DIR, model_dir)
        process.wait_for_everyone()
        warm = load_policy_model(warm_config)
        return WarmStartResult(warm, model_dir, done["kept"], done["played"], done["train_loss"])
    main = process.is_main_process
    if main:
        out_dir.mkdir(parents=True, exist_ok=True)
    episodes = scripted_episodes(
        settings, context.questions, context.env, context.chat, context.rollout
    )
    if main:
        write_trajectories(episodes, out_dir / "episodes.jsonl")
    kept = [t for t in episodes if _recall(t) >= settings.min_recall]
    if not kept:
        raise ValueError(
            f"warm start: none of {len(episodes)} scripted episodes reached "
            f"warm_start.min_recall={settings.min_recall}"
        )
    log.info("warm start: %d of %d scripted episodes kept", len(kept), len(episodes))
    loss = _fine_tune(settings, context.lora, context.bf16, kept, loaded, out_dir, main)
    if main:
        loaded.tokenizer.save_pretrained(model_dir)
        marker.write_text(
            json.dumps({"kept": len(kept), "played": len(episodes), "train_loss": loss}, indent=2)
        )
    process.wait_for_everyone()
    warm = load_policy_model(warm_config)
    return WarmStartResult(warm, model_dir, len(kept), len(episodes), loss)


def scripted_episodes(
    settings: WarmStartSettings,
    questions: list[Question],
    env: RetrievalEnvironment,
    chat: ChatTokenizer,
    rollout: RolloutConfig,
) -> list[Trajectory]:
    """The scripted policy's episodes, tokenized exactly as the policy's rollouts are; with
    ``plans``, question ``i`` of the seeded sample is played with plan ``i % len(plans)``."""
    tools = [str(tool) for tool in env.config.tools]
    plans = settings.plans
    if settings.adapt_plans:
        plans = [adapt_plan(plan, tools) for plan in plans]
    check_plans(plans, tools)
    sample = random.Random(settings.seed).sample(questions, min(settings.questions, len(questions)))
    prefix = rollout.assistant_prefix
    plans = plans or [None]
    # A demonstration may choose with the gold paragraphs (a hop only where one is missing);
    # the policy that learns from it sees none of them.
    gold = {
        q.question_id: frozenset(p.title for p in q.paragraphs if p.is_supporting) for q in sample
    }
    episodes = []
    for number, plan in enumerate(plans):
        share = sample[number :: len(plans)]
        if not share:
            continue
        policy = HeuristicSearchPolicy(
            reads=settings.reads, assistant_prefix=prefix, plan=plan, gold_titles=gold
        )
        engine = RolloutEngine(env, policy, replace(rollout, group_size=1), chat=chat)
        episodes.extend(engine.run(share).scored(rollout.reward))
    return episodes


def substitutes(tool: str) -> list[str]:
    """The searches a plan may call instead of ``tool`` when the run lacks it (``adapt_plan``):
    the other searches a plan can name (semantic_search for keyword_search, and back)."""
    searches = plan_tools(ToolRole.SEARCH)
    return [other for other in searches if other != tool] if tool in searches else []


def adapt_plan(plan: Sequence[str], tools: Sequence[str]) -> list[str]:
    """``plan`` for a run offering only ``tools``: each missing search becomes the other
    search unless the plan already calls that one, and a missing read_paragraph is dropped.

    >>> adapt_plan(["semantic_search", "keyword_search", "answer"], ["keyword_search", "answer"])
    ['keyword_search', 'answer']
    """
    adapted = []
    called = {plan_tool(step) for step in plan}
    for step in plan:
        tool = plan_tool(step)
        if tool in tools:
            adapted.append(step)
            continue
        substitute = next((s for s in substitutes(tool) if s in tools and s not in called), None)
        if substitute is not None:
            adapted.append(step.replace(tool, substitute, 1))  # a bridge stays a bridge
    return adapted


def check_plans(plans: list[list[str]], tools: Sequence[str]) -> None:
    """Each plan is valid and calls only tools the episode offers."""
    for number, plan in enumerate(plans):
        field_name = f"warm_start.plans[{number}]"
        check_plan(plan, field_name)
        missing = sorted({plan_tool(step) for step in plan} - set(tools))
        if missing:
            raise ValueError(
                f"{field_name} calls {missing}, which this run's tools {list(tools)} lack"
            )


def sft_rows(trajectories: list[Trajectory]) -> list[dict[str, list[int]]]:
    """input_ids and labels (-100 on the prompt and on every id the environment inserted)."""
    rows = []
    for trajectory in trajectories:
        trace = trajectory.tokens
        if trace is None:
            raise ValueError("warm start needs token traces (a rollout with a chat tokenizer)")
        labels = [-100] * len(trace.prompt_ids) + [
            token if generated else -100
            for token, generated in zip(trace.completion_ids, trace.env_mask, strict=True)
        ]
        rows.append({"input_ids": trace.context_ids, "labels": labels})
    return rows


def _fine_tune(
    settings: WarmStartSettings,
    lora_config: Any,
    bf16: bool,
    episodes: list[Trajectory],
    loaded: LoadedModel,
    out_dir: Path,
    write: bool = True,
) -> float | None:
    """SFT of ``loaded`` on ``episodes``; saves the model (and adapter) when ``write``."""
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    model = loaded.model
    model.train()
    micro = min(2, settings.batch_size)
    args = SFTConfig(
        output_dir=str(out_dir / "sft"),
        per_device_train_batch_size=micro,
        gradient_accumulation_steps=max(settings.batch_size // micro, 1),
        num_train_epochs=settings.epochs,
        learning_rate=settings.learning_rate,
        lr_scheduler_type="constant",
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        seed=settings.seed,
        bf16=bf16,
        use_cpu=str(model.device) == "cpu",
        max_length=None,
        dataloader_num_workers=0,
    )
    trainer = SFTTrainer(
        model=model,
        args=args,
        train_dataset=Dataset.from_list(sft_rows(episodes)),
        processing_class=loaded.tokenizer,
        peft_config=lora_config,
    )
    output = trainer.train()
    loss = float(output.training_loss) if output.training_loss is not None else None
    if not write:
        return loss
    trained = trainer.model
    if lora_config is not None:
        # The adapter (a few MB) rebuilds this model from the base one (grasp/rollout/adapters.py).
        trained.save_pretrained(out_dir / ADAPTER_DIR)
        trained = trained.merge_and_unload()
    trained.save_pretrained(out_dir / MODEL_DIR)
    history = [row for row in trainer.state.log_history if "loss" in row]
    (out_dir / "sft_log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in history))
    return loss


def _recall(trajectory: Trajectory) -> float:
    gold = set(trajectory.gold_paragraph_ids)
    return len(gold & set(trajectory.retrieved_paragraph_ids)) / len(gold) if gold else 0.0


def _rebuild_from_adapter(model_config: ModelConfig, adapter: Path, model_dir: Path) -> None:
    """Write the warm-started model again from the base model and the saved adapter (a run
    folder kept without its model weights, e.g. committed under results/)."""
    from grasp.rollout.adapters import check_adapter_dir

    check_adapter_dir(adapter)
    log.info("warm start: rebuilding %s from %s", model_dir, adapter)
    from peft import PeftModel

    base = load_policy_model(model_config)
    merged = PeftModel.from_pretrained(base.model, str(adapter)).merge_and_unload()
    merged.save_pretrained(model_dir)
    base.tokenizer.save_pretrained(model_dir)
