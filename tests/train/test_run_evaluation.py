"""The evaluations of a training run: bounded generate batches, and a loud failure when the
backend fails for most episodes (an out-of-memory evaluation must not read as a score of 0)."""

from __future__ import annotations

import dataclasses

import pytest

from grasp.env.environment import EnvConfig, RetrievalEnvironment
from grasp.eval.policy_eval import GenerationErrorsError
from grasp.models import ModelConfig, load_policy_model
from grasp.rollout.chat import ChatTokenizer
from grasp.rollout.policy import SamplingConfig
from grasp.train.config import TrainConfig
from grasp.train.trainer import TrainingData, TrainingSetup, evaluate_model


@pytest.fixture(scope="module")
def setup(tiny_index, tiny_questions, tiny_model_dir):
    env = RetrievalEnvironment(tiny_index, EnvConfig(turn_budget=2, top_k=2))
    loaded = load_policy_model(
        ModelConfig(name=str(tiny_model_dir), dtype="float32", chat_template="model")
    )
    chat = ChatTokenizer(loaded.tokenizer, env.prompt_tool_schemas)
    questions = list(tiny_questions)
    data = TrainingData(questions, questions, questions, "tiny")
    return TrainingSetup(data, env, env, loaded, chat)


def config_with(**fields) -> TrainConfig:
    config = TrainConfig(**fields)
    sampling = SamplingConfig(temperature=1.0, max_new_tokens=4)
    return dataclasses.replace(
        config, rollout=dataclasses.replace(config.rollout, sampling=sampling)
    )


def test_evaluation_batches_are_bounded(setup, tmp_path, monkeypatch):
    model = setup.loaded.model
    rows = []
    real_generate = model.generate

    def counting(*args, **kwargs):
        rows.append(kwargs["input_ids"].shape[0])
        return real_generate(*args, **kwargs)

    monkeypatch.setattr(model, "generate", counting)
    config = config_with(eval_max_batch_size=2)
    evaluation = evaluate_model(config, setup, model, tmp_path / "eval", {"run": "bounded"})
    assert evaluation.results.questions == len(setup.data.eval) == 3
    assert rows and max(rows) == 2  # 3 episodes per turn: a batch of 2, then 1
    assert rows[:2] == [2, 1]


def test_an_evaluation_that_runs_out_of_memory_fails_loudly(setup, tmp_path, monkeypatch):
    import torch

    def out_of_memory(*args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB (simulated)")

    monkeypatch.setattr(setup.loaded.model, "generate", out_of_memory)
    out_dir = tmp_path / "eval_after"
    with pytest.raises(GenerationErrorsError, match="3 of 3 episodes ended in a generation error"):
        evaluate_model(config_with(), setup, setup.loaded.model, out_dir, {"run": "oom"})
    assert not (out_dir / "results.json").exists()


def test_eval_max_batch_size_is_validated():
    with pytest.raises(ValueError, match="eval_max_batch_size must be at least 1, got 0"):
        TrainConfig(eval_max_batch_size=0)
