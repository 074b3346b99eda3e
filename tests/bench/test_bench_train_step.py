"""The GRPO step benchmark on the tiny model: each arm of ``reuse_cache`` trained from the same
weights and timed side by side, the continued KV cache prefilling fewer tokens."""

from __future__ import annotations

import dataclasses
import json

import pytest

from grasp.bench.train_step import run_benchmark, table
from grasp.config import BenchTrainStepConfig
from grasp.data import write_normalized
from grasp.env.environment import EnvConfig
from grasp.models import ModelConfig
from grasp.rollout.engine import RolloutConfig
from grasp.rollout.policy import SamplingConfig
from grasp.train.config import GRPOSettings, LoraSettings

pytestmark = pytest.mark.slow


def bench_config(tmp_path, tiny_model_dir, tiny_questions, **fields) -> BenchTrainStepConfig:
    questions = [
        dataclasses.replace(q, question_id=f"{q.question_id}-{copy}")
        for copy in range(2)
        for q in tiny_questions
    ]
    return BenchTrainStepConfig(
        experiment="tiny",
        questions_path=str(write_normalized(questions, tmp_path / "dev.jsonl")),
        index_dir=str(tmp_path / "index"),
        model=ModelConfig(name=str(tiny_model_dir), dtype="float32", chat_template="model"),
        env=EnvConfig(turn_budget=3, top_k=2),
        # The prefix keeps the untrained model's episodes going (text without a tool call
        # would end them after one turn).
        rollout=RolloutConfig(
            sampling=SamplingConfig(temperature=1.0, max_new_tokens=8),
            assistant_prefix='<tool_call>\n{"name": "',
        ),
        grpo=GRPOSettings(
            num_generations=2,
            questions_per_step=1,
            beta=0.04,
            bf16=False,
            lora=LoraSettings(enabled=False),
        ),
        run_dir=str(tmp_path / "run"),
        warmup_steps=0,
        timed_steps=1,
        **fields,
    )


def test_each_arm_is_timed_from_the_same_weights_and_the_cache_prefills_less(
    tmp_path, tiny_model_dir, tiny_questions
):
    config = bench_config(tmp_path, tiny_model_dir, tiny_questions)
    report = json.loads(json.dumps(run_benchmark(config, {"experiment": "tiny"})))
    full, reused = report["arms"]
    assert (full["reuse_cache"], reused["reuse_cache"]) == (False, True)
    for arm in (full, reused):
        assert len(arm["steps"]) == 1 and arm["step"]["samples_per_step"] == 2
        assert arm["step"]["parts_s"]["generation"] > 0
    tokens, reused_tokens = full["step"]["tokens"], reused["step"]["tokens"]
    assert tokens["turns"] >= 2, "the untrained model's episodes run several turns"
    # Without the cache every turn prefills its whole context, so at least the prompts and
    # everything each episode generated or was shown before its last turn.
    assert tokens["prefilled"] > tokens["prompt"]
    assert tokens["prompt"] <= reused_tokens["prefilled"] < tokens["prefilled"]
    assert set(report["raw"]) >= {"generate_s", "forward_s", "backward_s"}
    printed = table(report)
    assert "reuse_cache=false" in printed and "reuse_cache=true" in printed
    assert "x1.00" in printed


def test_no_arm_is_refused():
    with pytest.raises(ValueError, match="reuse_cache lists the arms"):
        BenchTrainStepConfig(reuse_cache=[])
