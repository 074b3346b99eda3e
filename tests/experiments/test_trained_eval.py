"""A trained run evaluated in its own environment, its policy rebuilt from its adapters."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest
import torch

from grasp.config import EvaluateConfig
from grasp.env.environment import EnvConfig
from grasp.experiments.trained import check_overrides, for_trained_run
from grasp.models import ModelConfig
from grasp.rollout.adapters import apply_adapters
from grasp.rollout.engine import RolloutConfig
from grasp.rollout.policy import SamplingConfig
from grasp.train.config import GRPOSettings, LoraSettings, TrainConfig
from grasp.train.warm_start import WarmStartSettings


def _random_adapter(model, folder, seed: int):
    """A LoRA adapter on ``model`` with random (non-zero) weights, saved to ``folder``."""
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(seed)
    config = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])
    wrapped = get_peft_model(model, config)
    with torch.no_grad():
        for name, param in wrapped.named_parameters():
            if "lora_" in name:
                param.normal_(0, 0.5)
    wrapped.save_pretrained(folder)
    return wrapped


def _load(tiny_model_dir):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()


@pytest.fixture
def run_dir(tmp_path, tiny_model_dir):
    """A run folder as a LoRA run with a warm start leaves it: config, two adapters, a model."""
    run = tmp_path / "run"
    warm = _random_adapter(_load(tiny_model_dir), run / "warm_start" / "adapter", seed=1)
    merged = warm.merge_and_unload()
    merged.save_pretrained(run / "warm_start" / "model")
    _random_adapter(merged, run / "final", seed=2)
    config = TrainConfig(
        env=EnvConfig(turn_budget=5, top_k=4, demonstration=False, schemas_in_prompt=False),
        model=ModelConfig(name=str(tiny_model_dir), dtype="float32"),
        rollout=RolloutConfig(
            sampling=SamplingConfig(temperature=1.0, max_new_tokens=48),
            max_context_tokens=1536,
            assistant_prefix="<tool_call>\n",
        ),
        grpo=GRPOSettings(lora=LoraSettings(enabled=True)),
        warm_start=WarmStartSettings(enabled=True),
    )
    (run / "config.json").write_text(json.dumps(asdict(config), default=str))
    return run


def test_adapters_rebuild_the_trained_policy_exactly(run_dir, tiny_model_dir):
    from peft import PeftModel

    ids = torch.tensor([[1, 5, 9, 42, 7, 3]])
    rebuilt = apply_adapters(
        _load(tiny_model_dir), [run_dir / "warm_start" / "adapter", run_dir / "final"]
    )
    saved = PeftModel.from_pretrained(_load(run_dir / "warm_start" / "model"), run_dir / "final")
    base = _load(tiny_model_dir)
    assert not any("lora" in name for name, _ in rebuilt.named_parameters()), "all merged"
    with torch.no_grad():
        expected = saved.eval()(ids).logits
        got = rebuilt(ids).logits
        # Merged weights differ from base + adapter by one float32 rounding per weight.
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
        assert torch.equal(got.argmax(-1), expected.argmax(-1))
        assert not torch.allclose(base(ids).logits, expected, atol=1e-3), "the adapters matter"


def test_a_trained_run_is_evaluated_in_its_own_environment(run_dir):
    config = for_trained_run(EvaluateConfig(run_dir=str(run_dir), n=20), overrides=["n=20"])
    assert config.env.turn_budget == 5 and config.env.top_k == 4
    assert not config.env.demonstration and not config.env.schemas_in_prompt
    assert config.rollout.assistant_prefix == "<tool_call>\n"
    assert config.rollout.max_context_tokens == 1536
    assert config.rollout.sampling.max_new_tokens == 48
    assert config.rollout.sampling.temperature == 0.0 and config.rollout.group_size == 1
    assert config.policy.kind == "hf"
    assert config.policy.adapters == [
        str(run_dir / "warm_start" / "adapter"),
        str(run_dir / "final"),
    ]
    assert config.out == str(run_dir / "evaluate" / "final")
    warm = for_trained_run(EvaluateConfig(run_dir=str(run_dir), stage="warm_start"), [])
    assert warm.policy.adapters == [str(run_dir / "warm_start" / "adapter")]


@pytest.mark.parametrize("reuse_cache", [True, False, None])
def test_the_evaluation_generates_as_the_run_did(run_dir, reuse_cache):
    """grpo.reuse_cache of the run (None: a config.json written before the field existed)."""
    resolved = json.loads((run_dir / "config.json").read_text())
    if reuse_cache is None:
        del resolved["grpo"]["reuse_cache"]
    else:
        resolved["grpo"]["reuse_cache"] = reuse_cache
    (run_dir / "config.json").write_text(json.dumps(resolved))
    config = for_trained_run(EvaluateConfig(run_dir=str(run_dir)), overrides=[])
    assert config.policy.reuse_cache is bool(reuse_cache)


@pytest.mark.parametrize(
    "override", ["env.top_k=3", "rollout.sampling.max_new_tokens=256", "policy=hf", "+baseline=x"]
)
def test_overriding_what_the_run_fixes_is_refused(override):
    with pytest.raises(ValueError, match="trained run fixes"):
        check_overrides(["n=50", override])


def test_a_missing_stage_is_named(run_dir):
    with pytest.raises(FileNotFoundError, match="checkpoint-7"):
        for_trained_run(EvaluateConfig(run_dir=str(run_dir), stage="checkpoint-7"), [])
    with pytest.raises(FileNotFoundError, match="no config.json"):
        for_trained_run(EvaluateConfig(run_dir=str(run_dir / "nope")), [])


def test_an_adapter_kept_without_its_weights_is_named(run_dir):
    (run_dir / "final" / "adapter_model.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match="final holds a LoRA adapter's config but not"):
        apply_adapters(object(), [run_dir / "warm_start" / "adapter", run_dir / "final"])
    (run_dir / "final" / "adapter_config.json").unlink()
    with pytest.raises(FileNotFoundError, match="final holds no LoRA adapter"):
        apply_adapters(object(), [run_dir / "final"])


def test_the_robustness_suite_attacks_a_trained_policy_in_its_own_environment(run_dir):
    from grasp.config import REPO_ROOT, RobustnessConfig
    from grasp.experiments.robustness import trained_policy

    config = trained_policy(RobustnessConfig(run_dir=str(run_dir), n=5), overrides=["n=5"])
    assert (config.env.turn_budget, config.env.top_k) == (5, 4)
    assert config.rollout.assistant_prefix == "<tool_call>\n"
    assert config.rollout.sampling.temperature == 0.0
    assert config.policy.adapters == [
        str(run_dir / "warm_start" / "adapter"),
        str(run_dir / "final"),
    ]
    assert config.out == str(REPO_ROOT / "runs" / "robustness" / "run-final")
    kept = trained_policy(RobustnessConfig(run_dir=str(run_dir), out="/o"), [])
    assert kept.out == "/o"
    with pytest.raises(ValueError, match="trained run fixes"):
        trained_policy(RobustnessConfig(run_dir=str(run_dir)), ["env.top_k=3"])
