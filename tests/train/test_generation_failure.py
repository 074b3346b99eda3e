"""A rollout whose first turn failed to generate degrades one GRPO step; it does not end the run.

TRL reads the last id of every completion, so an episode that generated nothing must still
reach it with one (masked) id. The failing policy is the transformers backend whose batch
raises (as an out-of-memory error does): HFPolicy turns that into an error on every row.
"""

from __future__ import annotations

import math

import pytest

from grasp.rollout.hf_policy import HFPolicy
from grasp.rollout.scripted import ScriptedPolicy, tool_call_text
from grasp.train.metrics_log import read_metrics


class OutOfMemoryPolicy(HFPolicy):
    """The transformers backend whose every ``model.generate`` call raises."""

    def _run(self, *args, **kwargs):
        raise RuntimeError("CUDA out of memory. Tried to allocate 20.00 GiB (simulated)")


@pytest.fixture(scope="module")
def failed_first_step(scripted_trainer, tmp_path_factory):
    """Two GRPO steps: every episode of step 1 fails at its first turn; step 2 answers."""
    run_dir = tmp_path_factory.mktemp("generation-failure")
    answering = ScriptedPolicy(lambda request: tool_call_text("answer", answer="Auckland"))

    def policy_for(trainer):
        if trainer.state.global_step == 0:
            model = trainer.accelerator.unwrap_model(trainer.model)
            return OutOfMemoryPolicy(model, trainer.processing_class)
        return answering

    trainer = scripted_trainer(
        run_dir,
        None,
        policy_for=policy_for,
        num_generations=2,
        questions_per_step=1,
        max_steps=2,
        beta=0.0,
    )
    returned = []
    rollout = trainer.rollout_func

    def capture(prompts, t):
        out = rollout(prompts, t)
        returned.append(out)
        return out

    trainer.rollout_func = capture
    trainer.train()
    trainer.rollout_func = rollout  # the GraspRollout again, for the tests to read
    return trainer, returned, read_metrics(run_dir)


def test_the_run_survives_a_failed_first_turn(failed_first_step):
    trainer, returned, metrics = failed_first_step
    assert trainer.state.global_step == 2
    steps = [r for r in metrics if "loss" in r and "train_runtime" not in r]
    assert [r["step"] for r in steps] == [1, 2]
    assert steps[0]["stop/generation_error"] == 1.0
    assert steps[1]["stop/generation_error"] == 0.0
    # Nothing carried loss in the failed step: the loss is exactly zero, not NaN.
    assert math.isfinite(steps[0]["loss"]) and steps[0]["loss"] == 0.0


def test_a_failed_episode_reaches_trl_with_one_masked_token(failed_first_step):
    trainer, returned, _ = failed_first_step
    failed = returned[0]
    end_of_turn = trainer.rollout_func.engine.chat.end_of_turn_id
    assert failed["completion_ids"] == [[end_of_turn]] * 2
    assert failed["env_mask"] == [[0]] * 2
    # The step after it trains on real completions (the model's tokens carry the mask 1).
    assert all(len(ids) > 1 for ids in returned[1]["completion_ids"])
    assert all(1 in mask for mask in returned[1]["env_mask"])
