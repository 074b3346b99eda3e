"""Trajectory samples of evaluation questions are played where evaluations run.

With ``train_source=bundled`` the training index pools the train questions only, and the
evaluation questions' gold paragraphs are in the dev set's own index, not in it: the samples
written every ``trajectories_every`` steps must search that index (cpu_grasp ended at step 10
in a KeyError when they searched the training one).
"""

from __future__ import annotations

import json

import pytest

from grasp.corpus import CorpusIndex, IndexConfig, build_index
from grasp.env.environment import EnvConfig, RetrievalEnvironment
from grasp.models import ModelConfig, load_policy_model
from grasp.rollout.chat import ChatTokenizer
from grasp.rollout.scripted import ScriptedPolicy, tool_call_text
from grasp.train.config import GRPOSettings, LoraSettings, TrainConfig
from grasp.train.trainer import TrainerInputs, TrainingData, TrainingSetup, build_grpo_trainer


def search_then_answer(request):
    if not any(m["role"] == "assistant" for m in request.messages):
        return tool_call_text("semantic_search", query="first ascent of Mount Everest")
    return tool_call_text("answer", answer="Auckland")


def test_trajectory_samples_search_the_evaluation_index(
    tmp_path, tiny_questions, tiny_index, tiny_model_dir
):
    curie, hillary, _ = tiny_questions
    train_index_dir = tmp_path / "train-index"
    build_index([curie], IndexConfig(), train_index_dir)  # hillary's gold is not in it
    config = TrainConfig(
        env=EnvConfig(turn_budget=3, top_k=2),
        model=ModelConfig(name=str(tiny_model_dir), dtype="float32", chat_template="model"),
        grpo=GRPOSettings(
            bf16=False,
            lora=LoraSettings(enabled=False),
            num_generations=2,
            questions_per_step=1,
            max_steps=1,
        ),
        trajectories_every=1,
        trajectory_questions=1,
        save_every=100,
        run_dir=str(tmp_path / "run"),
    )
    env = RetrievalEnvironment(CorpusIndex.load(train_index_dir), config.env)
    with pytest.raises(KeyError, match="is not in this corpus"):
        env.reset(hillary)
    eval_env = RetrievalEnvironment(tiny_index, config.env)
    loaded = load_policy_model(config.model)
    chat = ChatTokenizer(loaded.tokenizer, env.prompt_tool_schemas)
    data = TrainingData([curie], [hillary], [curie], "tiny", eval_pooled=list(tiny_questions))
    policy = ScriptedPolicy(search_then_answer)
    setup = TrainingSetup(data, env, eval_env, loaded, chat)
    trainer = build_grpo_trainer(TrainerInputs(config, setup, policy_for=lambda _: policy))
    trainer.train()
    lines = (tmp_path / "run" / "trajectories" / "step_000001.jsonl").read_text().splitlines()
    [sample] = [json.loads(line) for line in lines]
    assert sample["question_id"] == "q-hillary"
    gold = sorted(tiny_index.corpus.gold_paragraph_ids(hillary))
    assert sample["gold_paragraph_ids"] == gold and len(gold) == 2
    assert sample["reward"]["answer/em"] == 1.0
