"""TRL's GRPOConfig and peft's LoraConfig, built from a run's settings (grasp/train/config.py),
and what ran in which precision.

``grpo_args`` maps each ``grpo.*`` setting to the GRPOConfig field TRL reads; the mapping
is the one place a TRL or transformers rename (``activation_checkpointing``) is absorbed.
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any

from grasp.train.config import GRPOSettings, TrainConfig, WandbMode
from grasp.train.run_folder import RunFolder
from grasp.train.trl_bridge import reward_weights, rollout_autocast


def per_device_batch(grpo: GRPOSettings, world_size: int) -> int:
    """Sequences per process per micro-batch; fails unless the step batch splits evenly.

    One optimizer step sees B questions x G samples, spread over processes and micro-batches.
    """
    step_batch = grpo.questions_per_step * grpo.num_generations
    per_device, remainder = divmod(step_batch, grpo.gradient_accumulation_steps * world_size)
    if remainder or per_device < 1:
        raise ValueError(
            f"grpo.questions_per_step x grpo.num_generations = {step_batch} must split evenly over "
            f"{world_size} processes x {grpo.gradient_accumulation_steps} accumulation steps"
        )
    return per_device


def precision(grpo: GRPOSettings, model: Any) -> dict[str, str]:
    """What ran in which dtype (results.json's ``precision``, logged at the start)."""
    weights = str(model.get_input_embeddings().weight.dtype).removeprefix("torch.")
    autocast = rollout_autocast(grpo, model)
    mixed = "bfloat16 autocast" if grpo.bf16 else "float32"
    return {
        "weights": weights,
        "rollouts": f"{str(autocast).removeprefix('torch.')} autocast" if autocast else weights,
        "loss": mixed if weights == "float32" else weights,
        "logprobs": "float32",
    }


def grpo_args(config: TrainConfig, run_dir: Path, world_size: int = 1):
    from trl import GRPOConfig

    grpo = config.grpo
    per_device = per_device_batch(grpo, world_size)
    # transformers 5.x renamed gradient_checkpointing (a deprecated alias that warns even when
    # False) to activation_checkpointing; older releases know only the old name.
    names = {f.name for f in fields(GRPOConfig)}
    checkpointing = (
        "activation_checkpointing"
        if "activation_checkpointing" in names
        else "gradient_checkpointing"
    )
    return GRPOConfig(
        output_dir=str(RunFolder(run_dir).checkpoints_dir),
        per_device_train_batch_size=per_device,
        gradient_accumulation_steps=grpo.gradient_accumulation_steps,
        num_generations=grpo.num_generations,
        max_completion_length=config.rollout.max_context_tokens,
        max_steps=grpo.max_steps,
        learning_rate=grpo.learning_rate,
        lr_scheduler_type=grpo.lr_scheduler_type,
        warmup_steps=grpo.warmup_steps,
        weight_decay=grpo.weight_decay,
        max_grad_norm=grpo.max_grad_norm,
        beta=grpo.beta,
        loss_type=grpo.loss_type,
        epsilon=grpo.epsilon,
        epsilon_high=grpo.epsilon_high if grpo.epsilon_high is not None else grpo.epsilon,
        scale_rewards=grpo.scale_rewards,
        num_iterations=grpo.num_iterations,
        reward_weights=reward_weights(config.rollout.reward),
        bf16=grpo.bf16,
        **{checkpointing: grpo.gradient_checkpointing},
        use_cpu=config.model.device == "cpu",
        use_vllm=grpo.use_vllm,
        vllm_mode=grpo.vllm_mode.value,
        vllm_server_base_url=grpo.vllm_server_base_url,
        vllm_gpu_memory_utilization=grpo.vllm_gpu_memory_utilization,
        vllm_importance_sampling_mode=grpo.vllm_importance_sampling_mode,
        vllm_importance_sampling_clip_max=grpo.vllm_importance_sampling_cap,
        # The trainer scores log-probabilities at the temperature the rollouts sampled at.
        temperature=config.rollout.sampling.temperature,
        top_p=config.rollout.sampling.top_p,
        seed=grpo.seed,
        logging_steps=1,
        save_strategy="steps",
        save_steps=config.save_every,
        save_total_limit=2,
        report_to=[] if config.wandb is WandbMode.DISABLED else ["wandb"],
        disable_dropout=True,
        log_completions=False,
        dataloader_num_workers=0,
    )


def lora_config(config: TrainConfig):
    lora = config.grpo.lora
    if not lora.enabled:
        return None
    from peft import LoraConfig

    return LoraConfig(
        r=lora.r,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=list(lora.target_modules),
        task_type="CAUSAL_LM",
    )
