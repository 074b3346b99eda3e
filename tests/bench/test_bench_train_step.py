"""The GRPO step benchmark on the tiny model: each arm (named training overrides) trained from
the same weights and timed side by side, the continued KV cache prefilling fewer tokens; an
arm's folder, its overrides and its process."""

from __future__ import annotations

import dataclasses
import json

import pytest

from grasp.bench.config import StepArm
from grasp.bench.train_step import ARM_MARKER, arm_config, arm_folder, run_benchmark, table
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
    config = bench_config(tmp_path, tiny_model_dir, tiny_questions, isolate=False)
    report = json.loads(json.dumps(run_benchmark(config, {"experiment": "tiny"})))
    full, reused = report["arms"]
    assert (full["name"], reused["name"]) == ("reuse_cache=false", "reuse_cache=true")
    assert full["overrides"] == ["grpo.reuse_cache=false"]
    for arm in (full, reused):
        assert len(arm["steps"]) == 1 and arm["step"]["samples_per_step"] == 2
        assert arm["step"]["parts_s"]["generation"] > 0
        assert arm["peak_rss_bytes"] > 0
        details = arm["step"]["details_s"]
        # The timer splits generation (prefill and decode forwards, log-probabilities, the
        # rest); the decoder's hook splits each log-probability pass into trunk and head.
        generation = sum(
            details[f"generation_{p}"] for p in ("prefill", "decode", "logprob", "other")
        )
        assert generation == pytest.approx(arm["step"]["parts_s"]["generation"], rel=0.05)
        assert details["generation_prefill"] > 0 and details["generation_decode"] > 0
        for part in ("logprobs_no_grad", "forward"):
            trunk, head = details[f"{part}_trunk"], details[f"{part}_head"]
            assert trunk > 0 and head > 0
            assert trunk + head == pytest.approx(arm["step"]["parts_s"][part])
        [step] = arm["steps"]
        assert len(step["turns"]) == step["tokens"]["turns"]
        assert sum(t["prefilled"] for t in step["turns"]) == step["tokens"]["prefilled"]
        assert all(t["rows"] >= 1 and t["forwards"] >= 2 for t in step["turns"])
    tokens, reused_tokens = full["step"]["tokens"], reused["step"]["tokens"]
    assert tokens["turns"] >= 2, "the untrained model's episodes run several turns"
    # Without the cache every turn prefills its whole context, so at least the prompts and
    # everything each episode generated or was shown before its last turn.
    assert tokens["prefilled"] > tokens["prompt"]
    assert tokens["prompt"] <= reused_tokens["prefilled"] < tokens["prefilled"]
    assert set(report["raw"]) >= {"generate_s", "forward_s", "backward_s"}
    printed = table(report)
    assert "reuse_cache=false" in printed and "reuse_cache=true" in printed
    assert "update speed-up" in printed and "peak RSS (GB)" in printed


def test_an_isolated_arm_runs_in_a_process_of_its_own(tmp_path, tiny_model_dir, tiny_questions):
    config = bench_config(
        tmp_path, tiny_model_dir, tiny_questions, arms=[StepArm("alone")], references=False
    )
    report = run_benchmark(config, {"experiment": "tiny"})
    [arm] = report["arms"]
    assert arm["name"] == "alone" and arm["overrides"] == []
    # Its peak is the child's own: below this process's, which imported and ran more.
    assert 0 < arm["peak_rss_bytes"]
    assert (tmp_path / "run" / "alone" / ARM_MARKER).is_file()
    assert "raw" not in report


def test_a_folder_the_benchmark_did_not_make_is_refused_and_kept(tmp_path):
    mine = arm_folder(tmp_path, "a")
    (mine / "leftover").write_text("x")
    assert not (arm_folder(tmp_path, "a") / "leftover").exists(), "its own folder is cleared"
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "results.json").write_text("{}")
    with pytest.raises(FileExistsError, match="was not made by this benchmark"):
        arm_folder(tmp_path, "b")
    assert (tmp_path / "b" / "results.json").read_text() == "{}"


def test_an_arms_overrides_are_checked_like_the_command_line():
    config = BenchTrainStepConfig()
    arm = arm_config(config, ["grpo.reuse_cache=false", "grpo.gradient_accumulation_steps=2"])
    assert arm.grpo.reuse_cache is False and arm.grpo.gradient_accumulation_steps == 2
    assert arm_config(config, []) is config
    with pytest.raises(Exception, match="reuse_cach"):
        arm_config(config, ["grpo.reuse_cach=false"])


@pytest.mark.parametrize(
    ("arms", "message"),
    [
        (lambda: [], "names the arms"),
        (lambda: [StepArm("a/b")], "not a folder name"),
        (lambda: [StepArm("..")], "not a folder name"),
        (lambda: [StepArm("a"), StepArm("a", ["grpo.beta=0"])], "each name once"),
    ],
)
def test_bad_arms_are_refused(arms, message):
    with pytest.raises(ValueError, match=message):
        BenchTrainStepConfig(arms=arms())


def test_the_fixed_step_replays_one_rollout_through_each_arms_code(
    tmp_path, tiny_model_dir, tiny_questions
):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    # A trained-looking adapter: the policy differs from its reference, so the KL and its
    # gradient are not 0 even where the rewards of a group do not spread.
    lora = LoraSettings(r=4, alpha=8, target_modules=["q_proj", "v_proj"])
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    peft_config = LoraConfig(
        r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False
    )
    get_peft_model(base, peft_config).save_pretrained(tmp_path / "adapter")
    arms = [
        StepArm("full_vocab", ["grpo.loss_logprobs=full_vocab", "grpo.rollout_weights=adapters"]),
        StepArm("rows", ["grpo.gradient_accumulation_steps=2"]),
    ]
    config = bench_config(
        tmp_path,
        tiny_model_dir,
        tiny_questions,
        arms=arms,
        isolate=False,
        fixed_step=True,
        fixed_step_adapter=str(tmp_path / "adapter"),
        references=False,
    )
    grpo = dataclasses.replace(config.grpo, lora=lora)
    config = dataclasses.replace(config, grpo=grpo, timed_steps=2)
    report = run_benchmark(config, {"experiment": "tiny"})
    first, second = (arm["fixed_step"] for arm in report["arms"])
    assert set(first) == {"bfloat16", "float32"}
    for precision in ("bfloat16", "float32"):
        assert len(first[precision]) == 2, "two steps replayed"
        for step in first[precision]:
            assert set(step) == {"loss", "grad_norm", "kl"}
            assert step["grad_norm"] > 0 and step["kl"] > 0
    # The same rollouts, weights and micro-batching: in float32 the two paths agree to rounding.
    for number in range(2):
        for metric in ("loss", "grad_norm", "kl"):
            got, expected = second["float32"][number][metric], first["float32"][number][metric]
            assert got == pytest.approx(expected, rel=1e-4)
    assert "fixed floa 2: grad_norm" in table(report)
