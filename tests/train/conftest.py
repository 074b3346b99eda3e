"""A tiny random-weight Llama with SmolLM2's tokenizer: GRPO steps in seconds on a CPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from grasp.data import write_normalized
from grasp.models import ModelConfig, prepare_model


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer, 64-wide Llama saved with the (Qwen2.5-templated) SmolLM2 tokenizer."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(prepare_model(ModelConfig()))
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    directory = tmp_path_factory.mktemp("tiny-llama")
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


@pytest.fixture(scope="session")
def tiny_questions_file(tmp_path_factory, tiny_questions) -> Path:
    """The tiny corpus's questions, repeated under new ids so that both halves are non-empty."""
    import dataclasses

    questions = [
        dataclasses.replace(q, question_id=f"{q.question_id}-{copy}")
        for copy in range(4)
        for q in tiny_questions
    ]
    return write_normalized(questions, tmp_path_factory.mktemp("questions") / "dev.jsonl")


def _scripted_trainer(
    tiny_index, tiny_questions, tiny_model_dir, run_dir, script, policy_for=None, **grpo
):
    """A GRPOTrainer on the tiny model over the tiny corpus, every rollout played by a
    ScriptedPolicy(``script``), or by ``policy_for(trainer)`` when given; ``grpo`` overrides
    GRPOSettings (full fine-tuning, fp32)."""
    from grasp.env.environment import EnvConfig, RetrievalEnvironment
    from grasp.models import load_policy_model
    from grasp.rollout.chat import ChatTokenizer
    from grasp.rollout.scripted import ScriptedPolicy
    from grasp.train.config import GRPOSettings, LoraSettings, TrainConfig
    from grasp.train.trainer import TrainingData, make_grpo_trainer

    settings = {"bf16": False, "lora": LoraSettings(enabled=False), **grpo}
    config = TrainConfig(
        env=EnvConfig(turn_budget=3, top_k=2),
        model=ModelConfig(name=str(tiny_model_dir), dtype="float32", chat_template="model"),
        grpo=GRPOSettings(**settings),
        trajectories_every=0,
        save_every=100,
        run_dir=str(run_dir),
    )
    env = RetrievalEnvironment(tiny_index, config.env)
    loaded = load_policy_model(config.model)
    chat = ChatTokenizer(loaded.tokenizer, env.prompt_tool_schemas)
    questions = list(tiny_questions)
    data = TrainingData(questions, questions, questions, "tiny")
    policy = ScriptedPolicy(script)
    policy_for = policy_for or (lambda _: policy)
    return make_grpo_trainer(config, data, env, loaded, chat, run_dir, policy_for=policy_for)


@pytest.fixture(scope="session")
def scripted_trainer(tiny_index, tiny_questions, tiny_model_dir):
    """``scripted_trainer(run_dir, script, policy_for=None, **grpo)``: see ``_scripted_trainer``."""

    def build(run_dir, script, policy_for=None, **grpo):
        return _scripted_trainer(
            tiny_index, tiny_questions, tiny_model_dir, run_dir, script, policy_for, **grpo
        )

    return build
