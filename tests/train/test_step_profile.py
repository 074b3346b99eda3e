"""The step profiler on real GRPO steps: every part is timed, tokens match the trajectories."""

from __future__ import annotations

import pytest

from grasp.rollout.scripted import tool_call_text
from grasp.train.step_profile import PARTS, StepProfiler, mean_timing


def search_then_answer(request):
    question_id, sample = request.request_id.split("#")
    if not any(m["role"] == "assistant" for m in request.messages):
        return tool_call_text("semantic_search", query="Everest first ascent")
    return tool_call_text("answer", answer="Auckland" if sample == "0" else "no idea")


@pytest.fixture(scope="module")
def profiled(scripted_trainer, tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("profile")
    # beta > 0: a reference pass, so logprobs_no_grad must be timed.
    trainer = scripted_trainer(
        run_dir, search_then_answer, num_generations=2, questions_per_step=2, max_steps=2, beta=0.1
    )
    profiler = StepProfiler().attach(trainer)
    trainer.train()
    return profiler


def test_every_step_is_split_into_its_parts(profiled):
    assert [s.step for s in profiled.steps] == [1, 2]
    for step in profiled.steps:
        assert set(step.parts) == set(PARTS)
        for part in ("generation", "environment", "logprobs_no_grad", "forward", "backward"):
            assert step.parts[part] > 0, part
        assert step.parts["optimizer"] > 0
        assert sum(step.parts.values()) <= step.wall


def test_tokens_are_those_of_the_step_trajectories(profiled):
    last = profiled.steps[-1].tokens
    traces = profiled.last_batch.traces
    assert last.trajectories == len(traces) == 4
    assert last.turns == 2  # search, then answer
    assert last.prompt == sum(len(t.prompt_ids) for t in traces)
    assert last.generated == sum(sum(t.env_mask) for t in traces)
    completion = sum(len(t.completion_ids) for t in traces)
    assert last.generated + last.inserted == completion
    assert last.sequence == last.prompt + completion
    assert last.prefilled == 0  # a scripted policy runs no model


def test_mean_timing_reports_samples_per_minute(profiled):
    summary = mean_timing(profiled.steps)
    wall = sum(s.wall for s in profiled.steps) / 2
    assert summary["steps"] == 2
    assert summary["samples_per_minute"] == pytest.approx(60 * 4 / wall)
    with pytest.raises(ValueError, match="no step"):
        mean_timing([])
