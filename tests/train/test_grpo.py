"""GRPO through TRL with our rollout engine: two real optimizer steps on a tiny model."""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import pytest
import torch

from grasp.env.environment import EnvConfig, RetrievalEnvironment
from grasp.models import ModelConfig, load_policy_model
from grasp.reward import compute_reward
from grasp.rollout.chat import ChatTokenizer
from grasp.rollout.scripted import ScriptedPolicy, tool_call_text
from grasp.train.config import GRPOSettings, LoraSettings, TrainConfig
from grasp.train.metrics_log import read_metrics
from grasp.train.rollout_stats import REPORT_KEY
from grasp.train.trainer import TrainerInputs, TrainingData, TrainingSetup, build_grpo_trainer


def scripted_answers(request):
    """Sample 0 of each group searches and answers right; the others answer wrong at once.
    The rewards differ inside every group, so every group has non-zero advantages."""
    sample = int(request.request_id.rsplit("#", 1)[1])
    turn = sum(1 for m in request.messages if m["role"] == "assistant")
    if sample == 0 and turn == 0:
        return tool_call_text("keyword_search", query="Hillary Auckland Everest Curie Python")
    answer = {"q-curie": "polonium and radium", "q-hillary": "Auckland", "q-python": "Google"}
    question_id = request.request_id.split("#")[0]
    return tool_call_text("answer", answer=answer[question_id] if sample == 0 else "no idea")


@pytest.fixture(scope="module")
def trained(tiny_index, tiny_questions, tiny_model_dir, tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("grpo-run")
    config = TrainConfig(
        env=EnvConfig(turn_budget=3, top_k=2),
        model=ModelConfig(name=str(tiny_model_dir), dtype="float32", chat_template="model"),
        grpo=GRPOSettings(
            num_generations=4,
            questions_per_step=3,
            max_steps=2,
            learning_rate=1e-2,
            beta=0.04,
            bf16=False,
            lora=LoraSettings(enabled=False),
        ),
        trajectories_every=0,
        save_every=100,
        run_dir=str(tmp_path),
    )
    env = RetrievalEnvironment(tiny_index, config.env)
    loaded = load_policy_model(config.model)
    chat = ChatTokenizer(loaded.tokenizer, env.prompt_tool_schemas)
    data = TrainingData(list(tiny_questions), list(tiny_questions), list(tiny_questions), "tiny")
    setup = TrainingSetup(data, env, env, loaded, chat)
    policy_for = lambda _: ScriptedPolicy(scripted_answers)  # noqa: E731
    trainer = build_grpo_trainer(TrainerInputs(config, setup, policy_for=policy_for))
    outputs = []
    rollout = trainer.rollout_func

    def capture(prompts, t):
        out = rollout(prompts, t)
        outputs.append((out, list(out[REPORT_KEY].trajectories)))
        return out

    trainer.rollout_func = capture
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}
    result = trainer.train()
    return trainer, result, before, outputs, chat


def test_two_steps_change_every_parameter_with_a_finite_loss(trained):
    trainer, result, before, outputs, _ = trained
    assert trainer.state.global_step == 2
    assert math.isfinite(result.training_loss)
    unchanged = [
        name
        for name, param in trainer.model.named_parameters()
        if param.requires_grad and torch.equal(param.detach(), before[name])
    ]
    assert unchanged == []


def test_group_samples_share_their_question_and_group_id(trained):
    _, _, _, outputs, _ = trained
    for out, trajectories in outputs:
        groups = out["group_id"]
        assert len(groups) == 12
        assert groups == sorted(groups) and all(groups.count(g) == 4 for g in set(groups))
        for start in range(0, 12, 4):
            ids = {t.question_id for t in trajectories[start : start + 4]}
            assert len(ids) == 1, "the G samples of a group are one question"


def test_env_mask_hides_observations_from_the_loss(trained):
    trainer, _, _, outputs, chat = trained
    tokenizer = trainer.processing_class
    for out, trajectories in outputs:
        for ids, mask, trajectory in zip(
            out["completion_ids"], out["env_mask"], trajectories, strict=True
        ):
            generated = tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if m])
            assert "<tool_response>" not in generated
            for turn in trajectory.turns:
                if turn.observation:
                    assert turn.observation.splitlines()[0] not in generated


def test_logged_reward_terms_equal_the_reward_module(trained):
    trainer, _, _, outputs, _ = trained
    logged = [h for h in trainer.state.log_history if "rewards/R_A/mean" in h]
    assert len(logged) == 2
    for record, (_, trajectories) in zip(logged, outputs, strict=True):
        rewards = [compute_reward_from(t) for t in trajectories]
        for term in ("R_A", "R_R", "R_S", "R_E", "R_F", "R_N"):
            expected = sum(r[term] for r in rewards) / len(rewards)
            assert record[f"rewards/{term}/mean"] == pytest.approx(expected, abs=1e-6)
        expected_total = sum(r.total for r in rewards) / len(rewards)
        assert record["reward"] == pytest.approx(expected_total, abs=1e-6)
        assert record["reward/total"] == pytest.approx(expected_total, abs=1e-6)


def test_logged_rollout_statistics_are_exact(trained):
    """Each step: sample 0 of each of the 3 groups searches once by keyword and answers
    right; the other 9 answer wrong at once. Every episode answered, in 15 turns."""
    trainer, _, _, outputs, _ = trained
    logged = [h for h in trainer.state.log_history if "tools/answer_per_episode" in h]
    assert len(logged) == len(outputs) == 2
    expected = {
        "tools/keyword_search_per_episode": 3 / 12,
        "tools/semantic_search_per_episode": 0.0,
        "tools/read_paragraph_per_episode": 0.0,
        "tools/search_per_episode": 0.0,
        "tools/answer_per_episode": 1.0,
        "tools/parse_error_rate": 0.0,
        "tools/invalid_call_rate": 0.0,
        "tools/repaired_call_rate": 0.0,
        "stop/answered": 1.0,
        "stop/turn_budget": 0.0,
        "stop/token_budget": 0.0,
        "stop/no_tool_call": 0.0,
        "stop/generation_error": 0.0,
        "answer/em": 3 / 12,
        "episode/turns": 15 / 12,
        "groups/zero_reward_spread": 0.0,
    }
    for record in logged:
        assert {k: record[k] for k in expected} == pytest.approx(expected, abs=1e-6)
    for _, trajectories in outputs:
        answered_right = [t.sample_index for t in trajectories if t.reward.em == 1.0]
        assert answered_right == [0, 0, 0]


def test_metrics_file_carries_each_reward_term_once(trained):
    trainer, _, _, _, _ = trained
    records = read_metrics(Path(trainer.args.output_dir).parent)
    steps = [r for r in records if "loss" in r]
    assert [r["step"] for r in steps] == [1, 2]
    for record in steps:
        for term in ("R_A", "R_R", "R_S", "R_E", "R_F"):
            assert f"reward/{term}" in record and f"rewards/{term}/std" in record
            assert f"rewards/{term}/mean" not in record
        assert not any(key.startswith("rewards/rollout_log") for key in record)
        assert record["time/rollout_s"] > 0
        assert record["time/update_s"] == pytest.approx(
            max(record["time/step_s"] - record["time/rollout_s"], 0.0)
        )


def compute_reward_from(trajectory):
    """Recompute a trajectory's reward from its recorded evidence with the reward module."""
    return compute_reward(trajectory.evidence())


@pytest.mark.parametrize("enabled", [False, True])
def test_checkpointing_reaches_trl_under_its_current_name(tmp_path, enabled):
    from grasp.train.grpo_args import grpo_args

    config = TrainConfig(grpo=GRPOSettings(gradient_checkpointing=enabled, bf16=False))
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)  # the deprecated alias warns
        args = grpo_args(config, tmp_path)
    assert args.activation_checkpointing is enabled
    assert args.gradient_checkpointing is enabled  # the alias TRL still reads mirrors it
