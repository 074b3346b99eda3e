"""Dynamic sampling in the rollout function: zero-spread groups are replaced before the update."""

from __future__ import annotations

import json

import pytest

from grasp.rollout.scripted import tool_call_text
from grasp.train.dynamic_sampling import (
    DynamicSamplingSettings,
    has_spread,
    replacement_ids,
    select_groups,
)
from grasp.train.rollout_stats import REPORT_KEY

ANSWERS = {"q-curie": "polonium and radium", "q-hillary": "Auckland", "q-python": "Google"}


@pytest.mark.parametrize(
    ("groups", "needed", "kept", "with_spread"),
    [
        ([[1, 0], [0, 0], [0.5, 0.2]], 2, [0, 2], 2),  # spread groups, in roll-out order
        ([[0, 0], [1, 1], [0, 1]], 2, [2, 0], 1),  # one with spread, then a flat filler
        ([[0, 0], [1, 1]], 2, [0, 1], 0),  # nothing to choose: the first flat groups
        ([[0.3, 0.3 + 1e-12], [0, 1]], 1, [1], 1),  # 1e-12 is no spread
    ],
)
def test_select_groups_keeps_spread_first(groups, needed, kept, with_spread):
    selection = select_groups(groups, needed)
    assert selection.kept == kept
    assert selection.with_spread == with_spread


def test_select_groups_refuses_too_few_groups():
    with pytest.raises(ValueError, match="1 groups rolled out, 2 needed"):
        select_groups([[0, 1]], 2)


def test_replacements_are_fresh_and_reproducible():
    pool = [f"q{i}" for i in range(20)]
    first = replacement_ids(pool, {"q0", "q1"}, 3, seed=0, step=4, round_=1)
    assert first == replacement_ids(pool, {"q0", "q1"}, 3, seed=0, step=4, round_=1)
    assert len(set(first)) == 3 and not {"q0", "q1"} & set(first)
    assert first != replacement_ids(pool, {"q0", "q1"}, 3, seed=0, step=5, round_=1)
    assert replacement_ids(pool, set(pool) - {"q7"}, 3, 0, 0, 1) == ["q7"]


def test_max_rounds_is_validated():
    with pytest.raises(ValueError, match="grpo.dynamic_sampling.max_rounds"):
        DynamicSamplingSettings(enabled=True, max_rounds=0)


def known_rewards(request):
    """q-python: every sample answers wrong (a zero-spread group). The others: sample 0 answers
    right, the rest wrong (spread)."""
    question_id, sample = request.request_id.split("#")
    right = question_id != "q-python" and sample == "0"
    return tool_call_text("answer", answer=ANSWERS[question_id] if right else "no idea")


@pytest.fixture(scope="module")
def sampled_run(scripted_trainer, tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("dynamic-sampling")
    trainer = scripted_trainer(
        run_dir,
        known_rewards,
        num_generations=2,
        questions_per_step=1,
        max_steps=6,
        learning_rate=1e-3,
        beta=0.0,
        dynamic_sampling=DynamicSamplingSettings(enabled=True, max_rounds=2),
    )
    asked, returned = [], []
    rollout = trainer.rollout_func

    def capture(prompts, t):
        asked.append(rollout.prompts.question_id(prompts[0]))
        out = rollout(prompts, t)
        returned.append(list(out[REPORT_KEY].trajectories))
        return out

    trainer.rollout_func = capture
    trainer.train()
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return asked, returned, [m for m in metrics if "sampling/dropped_group_share" in m]


def test_zero_spread_groups_are_replaced_and_logged(sampled_run):
    asked, returned, logged = sampled_run
    assert len(asked) == len(returned) == len(logged) == 6
    assert "q-python" in asked, "the seeded data order asks for the zero-spread question"
    for question, trajectories, metrics in zip(asked, returned, logged, strict=True):
        assert len(trajectories) == 2 and {t.group_id for t in trajectories} == {0}
        assert len({t.question_id for t in trajectories}) == 1
        rewards = [t.reward.total for t in trajectories]
        assert has_spread(rewards), "every returned group can teach"
        replaced = question == "q-python"
        assert trajectories[0].question_id != "q-python"
        assert metrics["sampling/groups_rolled_out"] == (2.0 if replaced else 1.0)
        assert metrics["sampling/dropped_group_share"] == (0.5 if replaced else 0.0)
        assert metrics["sampling/extra_rollouts"] == (2.0 if replaced else 0.0)
        assert metrics["sampling/rounds"] == (1.0 if replaced else 0.0)
        assert metrics["sampling/kept_zero_spread_share"] == 0.0
        assert metrics["groups/zero_reward_spread"] == 0.0
