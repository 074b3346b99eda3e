"""Multi-GPU launch plans resolve and validate on a CPU machine, and bad plans fail early."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from grasp.launch import launch_commands, load_plan, validate_plan
from grasp.paths import REPO_ROOT

PLANS = sorted((REPO_ROOT / "configs" / "launch").glob("*.yaml"))
ACCELERATE = sorted((REPO_ROOT / "configs" / "accelerate").glob("*.yaml"))
ABLATIONS = sorted(p.stem for p in (REPO_ROOT / "configs" / "ablation").glob("*.yaml"))


def visible_devices(command: str) -> set[int]:
    value = command.split("CUDA_VISIBLE_DEVICES=", 1)[1].split()[0]
    return {int(g) for g in value.split(",")}


CASES = [(path, "none") for path in PLANS] + [
    (REPO_ROOT / "configs" / "launch" / "h100x8.yaml", ablation)
    for ablation in ABLATIONS
    if ablation != "none"
]


@pytest.mark.parametrize(("path", "ablation"), CASES, ids=lambda v: getattr(v, "stem", v))
def test_plans_and_ablations_validate(path: Path, ablation: str):
    plan = load_plan(path)
    checked = validate_plan(plan, [f"ablation={ablation}"])
    commands = launch_commands(checked)
    train = commands[-1]
    assert f"--num_processes {len(plan.train_gpus)} " in train
    assert f"--config_file {plan.accelerate_config} " in train
    assert f"ablation={ablation}" in train and f"experiment={plan.experiment}" in train
    # Each process on this node sees only its own GPUs, and no GPU is shared.
    started = [c for c in commands if c.startswith("CUDA_VISIBLE_DEVICES=")]
    devices = [visible_devices(c) for c in started]
    assert sum(len(d) for d in devices) == len(set().union(*devices))
    assert set().union(*devices) <= set(range(plan.gpus))
    if plan.vllm_gpus:
        # One engine, tensor parallel: TRL 1.16 says vllm-serve data parallelism errors out.
        assert f"--tensor-parallel-size {len(plan.vllm_gpus)} " in commands[-2]
        assert "--data-parallel-size" not in commands[-2]
        assert "grpo.vllm_mode=server" in train


def test_every_accelerate_config_is_used_by_a_plan():
    used = {load_plan(p).accelerate_config for p in PLANS}
    assert {str(p.relative_to(REPO_ROOT)) for p in ACCELERATE} <= used


def test_the_paper_setup_is_two_processes_of_four_sequences():
    checked = validate_plan(load_plan(REPO_ROOT / "configs" / "launch" / "a100x2.yaml"))
    # 64 questions x 5 samples = 320 = 2 processes x 40 accumulation steps x 4 sequences
    assert (checked.per_device_batch, checked.distributed_type) == (4, "DEEPSPEED")


def plan_file(tmp_path: Path, **changes) -> Path:
    raw = yaml.safe_load((REPO_ROOT / "configs" / "launch" / "h100x8.yaml").read_text())
    raw.update(changes)
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"vllm_gpus": [3, 4]}, r"GPUs \[3\] are given to more than one"),
        ({"retrieval_gpu": 8}, r"GPUs \[8\] outside 0\.\.7"),
        ({"train_gpus": []}, "train_gpus is empty"),
        ({"train_overrides": ["grpo.gradient_accumulation_steps=7"]}, "must split evenly over 4"),
        ({"train_overrides": ["grpo.vllm_mode=colocate"]}, "vllm_gpus set but"),
        ({"train_overrides": ["env.tools=[answer]"]}, "search"),
        ({"accelerate_config": "configs/accelerate/nope.yaml"}, "accelerate_config"),
        # B x G = 248 splits into 4 processes x 2 steps x 31, but 62 questions do not split
        # into 4 processes: a group of 4 samples would straddle two of them.
        (
            {
                "train_overrides": [
                    "grpo.num_generations=4",
                    "grpo.questions_per_step=62",
                    "grpo.gradient_accumulation_steps=2",
                ]
            },
            r"grpo\.questions_per_step=62 does not split over 4 training processes",
        ),
    ],
)
def test_bad_plans_fail_naming_the_field(tmp_path, changes, message):
    with pytest.raises((ValueError, FileNotFoundError), match=message):
        validate_plan(load_plan(plan_file(tmp_path, **changes)))


def test_unknown_plan_key_is_refused(tmp_path):
    with pytest.raises(Exception, match="num_gpus"):
        load_plan(plan_file(tmp_path, num_gpus=8))


def test_unknown_accelerate_key_is_refused(tmp_path):
    raw = yaml.safe_load((REPO_ROOT / "configs" / "accelerate" / "zero2.yaml").read_text())
    raw["zero_stage"] = 2  # belongs under deepspeed_config
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(raw))
    plan = replace(load_plan(PLANS[0]), accelerate_config=str(bad))
    with pytest.raises(ValueError, match="unknown keys"):
        validate_plan(plan)


def test_fsdp_must_wrap_the_model_decoder_layer(tmp_path):
    raw = yaml.safe_load((REPO_ROOT / "configs" / "accelerate" / "fsdp.yaml").read_text())
    raw["fsdp_config"]["fsdp_transformer_layer_cls_to_wrap"] = "LlamaDecoderLayer"
    bad = tmp_path / "fsdp.yaml"
    bad.write_text(yaml.safe_dump(raw))
    plan = replace(load_plan(REPO_ROOT / "configs" / "launch" / "a100x2_fsdp.yaml"))
    plan.accelerate_config = str(bad)
    with pytest.raises(ValueError, match="Qwen2DecoderLayer"):
        validate_plan(plan)


def test_launch_script_prints_the_commands(capsys):
    import runpy
    import sys

    argv = sys.argv
    sys.argv = ["launch.py", "h100x8", "ablation=no_rs"]
    try:
        with pytest.raises(SystemExit) as stop:
            runpy.run_path(str(REPO_ROOT / "scripts" / "launch.py"), run_name="__main__")
    finally:
        sys.argv = argv
    assert stop.value.code == 0
    out = capsys.readouterr().out
    assert "trl vllm-serve --model Qwen/Qwen2.5-3B-Instruct" in out
    assert "ablation=no_rs" in out and "serve_retrieval.py" in out


def accelerate_file(tmp_path: Path, name: str, section: str, **changes) -> str:
    raw = yaml.safe_load((REPO_ROOT / "configs" / "accelerate" / name).read_text())
    raw[section].update(changes)
    path = tmp_path / name
    path.write_text(yaml.safe_dump(raw))
    return str(path)


def test_fsdp_must_save_a_full_state_dict(tmp_path):
    plan = load_plan(REPO_ROOT / "configs" / "launch" / "a100x2_fsdp.yaml")
    assert validate_plan(plan).distributed_type == "FSDP"
    plan.accelerate_config = accelerate_file(
        tmp_path, "fsdp.yaml", "fsdp_config", fsdp_state_dict_type="SHARDED_STATE_DICT"
    )
    with pytest.raises(ValueError, match=r"fsdp_state_dict_type='SHARDED_STATE_DICT'.*FULL_STATE"):
        validate_plan(plan)


def test_zero3_must_gather_the_16bit_model_on_save(tmp_path):
    plan = load_plan(REPO_ROOT / "configs" / "launch" / "h100x8_zero3.yaml")
    plan.accelerate_config = accelerate_file(
        tmp_path, "zero3.yaml", "deepspeed_config", zero3_save_16bit_model=False
    )
    with pytest.raises(ValueError, match=r"zero3_save_16bit_model must be true"):
        validate_plan(plan)


def test_lora_with_fsdp_and_vllm_is_refused():
    plan = load_plan(REPO_ROOT / "configs" / "launch" / "a100x2_fsdp.yaml")
    with pytest.raises(ValueError, match=r"grpo\.lora\.enabled=true with grpo\.use_vllm=true"):
        validate_plan(plan, ["grpo.lora.enabled=true"])
    # vLLM with full fine-tuning is fine; LoRA with transformers rollouts is refused too under
    # FSDP, as every transformers rollout on sharded parameters is (issue 14 finding 8).
    validate_plan(plan)
    with pytest.raises(ValueError, match=r"grpo\.use_vllm=false under FSDP"):
        validate_plan(plan, ["grpo.lora.enabled=true", "grpo.use_vllm=false"])


@pytest.mark.parametrize(
    ("plan_name", "fields"),
    [
        ("a100x2_fsdp", r"FSDP \(configs/accelerate/fsdp\.yaml: distributed_type\)"),
        (
            "h100x8_zero3",
            r"ZeRO-3 \(configs/accelerate/zero3\.yaml: deepspeed_config\.zero_stage=3\)",
        ),
    ],
)
def test_transformers_rollouts_on_sharded_parameters_are_refused(plan_name, fields):
    plan = load_plan(REPO_ROOT / "configs" / "launch" / f"{plan_name}.yaml")
    with pytest.raises(ValueError, match=rf"grpo\.use_vllm=false under {fields}"):
        validate_plan(plan, ["grpo.use_vllm=false"])
    validate_plan(plan)  # the plan as written generates with vLLM


def test_transformers_rollouts_under_zero2_are_allowed():
    plan = load_plan(REPO_ROOT / "configs" / "launch" / "a100x2.yaml")
    validate_plan(plan, ["grpo.use_vllm=false"])  # ZeRO-2 keeps whole parameters per process


@pytest.mark.parametrize(
    ("environ", "refused"),
    [
        ({"ACCELERATE_USE_FSDP": "true"}, True),
        ({"ACCELERATE_USE_DEEPSPEED": "true", "ACCELERATE_DEEPSPEED_ZERO_STAGE": "3"}, True),
        ({"ACCELERATE_USE_DEEPSPEED": "true", "ACCELERATE_DEEPSPEED_ZERO_STAGE": "2"}, False),
        ({}, False),
    ],
)
def test_the_trainer_refuses_transformers_rollouts_under_a_sharding_launch(
    environ, refused, monkeypatch
):
    from grasp.train.config import GRPOSettings, TrainConfig
    from grasp.train.setup import validate_config

    for name in (
        "ACCELERATE_USE_FSDP",
        "ACCELERATE_USE_DEEPSPEED",
        "ACCELERATE_DEEPSPEED_ZERO_STAGE",
    ):
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    config = TrainConfig(grpo=GRPOSettings(use_vllm=False))
    if refused:
        with pytest.raises(ValueError, match=r"grpo\.use_vllm=false under this accelerate"):
            validate_config(config)
    else:
        validate_config(config)
    validate_config(TrainConfig(grpo=GRPOSettings(use_vllm=True)))  # vLLM: allowed either way


def test_vllm_tensor_parallel_size_must_divide_the_attention_heads(tmp_path):
    # A local copy of Qwen2.5-3B's published config: 16 attention heads.
    model_dir = tmp_path / "qwen2.5-3b"
    model_dir.mkdir()
    config = REPO_ROOT / "configs" / "gpu_check" / "qwen2.5_3b_config.json"
    (model_dir / "config.json").write_text(config.read_text())
    plan = load_plan(plan_file(tmp_path, vllm_gpus=[4, 5, 6], retrieval_gpu=7))
    with pytest.raises(ValueError, match=r"3 GPUs.*does not divide the 16 attention heads"):
        validate_plan(plan, [f"model.name={model_dir}"])
    plan.vllm_gpus = [4, 5, 6, 7]
    plan.retrieval_gpu = None
    plan.retrieval_url = "http://retrieval-node:8001"
    assert (
        "--tensor-parallel-size 4 "
        in launch_commands(validate_plan(plan, [f"model.name={model_dir}"]))[-2]
    )
