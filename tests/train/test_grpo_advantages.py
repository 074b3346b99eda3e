"""GRPO maths against hand-computed numbers: the group-relative advantages TRL computes from
our five reward terms (weights [1, alpha, beta, gamma, delta]) for a hand-written rollout."""

from __future__ import annotations

import math

import pytest

from grasp.rollout.scripted import tool_call_text
from grasp.train.rollout_stats import REPORT_KEY

ANSWERS = {"q-curie": "polonium and radium", "q-hillary": "Auckland", "q-python": "Google"}
TURN_BUDGET = 3  # tests/train/conftest.py


def script(request):
    """Per group of four: sample 0 searches once, then answers right (2 turns); sample 1
    answers right at once (1 turn); samples 2 and 3 answer wrong. Every sample of q-python
    answers wrong: a group without spread."""
    question_id, sample = request.request_id.split("#")
    turn = sum(1 for m in request.messages if m["role"] == "assistant")
    if question_id != "q-python" and sample == "0" and turn == 0:
        return tool_call_text("keyword_search", query="Hillary Auckland Everest Curie")
    right = question_id != "q-python" and sample in ("0", "1")
    return tool_call_text("answer", answer=ANSWERS[question_id] if right else "no idea")


# R = R_A + 0.7 R_R + 0.15 R_S + 0.15 R_E (delta = 0). No paragraph is read (R_R = 0) and only
# keyword search ran (R_S = 0); a right answer (F1 = 1) earns R_E = (3 - turns) / 3.
# Sample 0: 1 + 0.15 * 1/3 = 1.05; sample 1: 1 + 0.15 * 2/3 = 1.1; samples 2, 3: 0.
TOTALS = [1.05, 1.1, 0.0, 0.0]
# Group mean 2.15 / 4 = 0.5375; deviations 0.5125, 0.5625, -0.5375, -0.5375; squares sum to
# 1.156875; TRL's std is the unbiased one: sqrt(1.156875 / 3) = 0.6209871; advantage =
# deviation / (std + 1e-4).
STD = math.sqrt(1.156875 / 3)
ADVANTAGES = [d / (STD + 1e-4) for d in (0.5125, 0.5625, -0.5375, -0.5375)]
# q-python: every total 0, std 0: (0 - 0) / (0 + 1e-4) = 0 for each sample.
FLAT = [0.0, 0.0, 0.0, 0.0]


@pytest.fixture(scope="module")
def scored(scripted_trainer, tmp_path_factory):
    trainer = scripted_trainer(
        tmp_path_factory.mktemp("advantages"),
        script,
        num_generations=4,
        questions_per_step=3,
        max_steps=1,
        beta=0.0,
        learning_rate=1e-3,
    )
    captured = []
    score = trainer._generate_and_score_completions
    rollout = trainer.rollout_func

    def capture_rollout(prompts, t):
        out = rollout(prompts, t)
        captured.append({"trajectories": out[REPORT_KEY].trajectories})
        return out

    def capture_score(inputs):
        out = score(inputs)
        captured[-1]["advantages"] = out["advantages"].tolist()
        return out

    trainer.rollout_func = capture_rollout
    trainer._generate_and_score_completions = capture_score
    trainer.train()
    [step] = captured
    return trainer, step


def test_the_hand_written_rewards_are_what_the_reward_module_computes(scored):
    _, step = scored
    for start in range(0, 12, 4):
        group = step["trajectories"][start : start + 4]
        expected = FLAT if group[0].question_id == "q-python" else TOTALS
        assert [t.reward.as_dict()["reward/total"] for t in group] == pytest.approx(
            expected, abs=1e-12
        )


def test_trl_advantages_are_group_relative_and_scaled_by_the_group_std(scored):
    _, step = scored
    advantages = step["advantages"]
    assert len(advantages) == 12
    for start in range(0, 12, 4):
        question = step["trajectories"][start].question_id
        expected = FLAT if question == "q-python" else ADVANTAGES
        assert advantages[start : start + 4] == pytest.approx(expected, abs=1e-5), question


def test_the_logged_rewards_match_the_hand_computed_ones(scored):
    trainer, _ = scored
    [record] = [h for h in trainer.state.log_history if "reward" in h and "loss" in h]
    # Two groups of TOTALS and one of zeros.
    assert record["reward"] == pytest.approx(2 * sum(TOTALS) / 12, abs=1e-6)
    assert record["frac_reward_zero_std"] == pytest.approx(1 / 3)
    assert record["groups/zero_reward_spread"] == pytest.approx(1 / 3)
    assert record["rewards/R_E/mean"] == pytest.approx(2 * (1 / 3 + 2 / 3) / 12, abs=1e-6)
    assert record["rewards/R_A/mean"] == pytest.approx(4 / 12, abs=1e-6)
