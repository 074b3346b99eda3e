"""Training fixtures: the tiny corpus's questions as a file, and a scripted GRPO trainer on the
tiny model (``tiny_model_dir``, tests/conftest.py)."""

from __future__ import annotations

import pytest

from grasp.models import ModelConfig


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
    from grasp.train.trainer import TrainerInputs, TrainingData, TrainingSetup, build_grpo_trainer

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
    setup = TrainingSetup(data, env, env, loaded, chat)
    return build_grpo_trainer(TrainerInputs(config, setup, policy_for=policy_for))


@pytest.fixture(scope="session")
def scripted_trainer(tiny_index, tiny_questions, tiny_model_dir):
    """``scripted_trainer(run_dir, script, policy_for=None, **grpo)``: see ``_scripted_trainer``."""

    def build(run_dir, script, policy_for=None, **grpo):
        return _scripted_trainer(
            tiny_index, tiny_questions, tiny_model_dir, run_dir, script, policy_for, **grpo
        )

    return build
