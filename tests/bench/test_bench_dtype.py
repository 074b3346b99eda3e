"""The dtype benchmark and the warning for bfloat16 on a CPU that emulates it."""

from __future__ import annotations

import logging

import pytest
import torch

from grasp import models
from grasp.bench.dtype import METRICS, run_benchmark, table
from grasp.config import BenchDtypeConfig
from grasp.models import ModelConfig, load_policy_model, native_bfloat16, warn_if_emulated_bfloat16


@pytest.fixture
def cpu_without_bf16(monkeypatch):
    """This CPU as one without AVX512-BF16 or AMX; the once-per-process warning reset."""
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False)
    models._warn_emulated_bfloat16.cache_clear()
    yield
    models._warn_emulated_bfloat16.cache_clear()


@pytest.mark.parametrize(
    ("avx512_bf16", "amx", "native"),
    [(False, False, False), (True, False, True), (False, True, True), (True, True, True)],
)
def test_native_bfloat16_is_either_instruction_set(monkeypatch, avx512_bf16, amx, native):
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: avx512_bf16)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx)
    assert native_bfloat16() is native


def test_a_torch_that_cannot_tell_counts_as_native(monkeypatch):
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False)
    monkeypatch.delattr(torch.cpu, "_is_amx_tile_supported")
    assert native_bfloat16() is True


def test_emulated_bfloat16_warns_once_and_names_the_override(cpu_without_bf16, caplog):
    with caplog.at_level(logging.WARNING, logger="grasp.models"):
        assert warn_if_emulated_bfloat16("bfloat16", "cpu", "The encoder", "enc.dtype=float32")
        assert warn_if_emulated_bfloat16("bfloat16", "cpu", "The encoder", "enc.dtype=float32")
        assert not warn_if_emulated_bfloat16("float32", "cpu", "The policy", "p.dtype=float32")
        assert not warn_if_emulated_bfloat16("bfloat16", "cuda:0", "The policy", "p.dtype=float32")
    messages = [record.getMessage() for record in caplog.records]
    assert len(messages) == 1
    assert messages[0].startswith("The encoder runs in bfloat16 on a CPU without native bfloat16")
    assert "Pass enc.dtype=float32 to run in float32" in messages[0]


def test_no_warning_where_bfloat16_is_native(monkeypatch, caplog):
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: True)
    models._warn_emulated_bfloat16.cache_clear()
    with caplog.at_level(logging.WARNING, logger="grasp.models"):
        assert not warn_if_emulated_bfloat16("bfloat16", "cpu", "The encoder", "x=float32")
    assert caplog.records == []


def test_loading_the_policy_in_bfloat16_warns_and_keeps_the_dtype(
    cpu_without_bf16, tiny_model_dir, caplog
):
    with caplog.at_level(logging.WARNING, logger="grasp.models"):
        loaded = load_policy_model(ModelConfig(name=str(tiny_model_dir), dtype="bfloat16"))
        load_policy_model(ModelConfig(name=str(tiny_model_dir), dtype="float32"))
    assert loaded.model.dtype == torch.bfloat16  # warned, not changed
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "policy.model.dtype=float32" in warnings[0]


def test_the_sentence_encoder_in_bfloat16_warns_with_its_own_override(cpu_without_bf16, caplog):
    from grasp.corpus.encoder import DenseEncoder, EncoderConfig

    with caplog.at_level(logging.WARNING, logger="grasp.models"):
        encoder = DenseEncoder(EncoderConfig(dtype="bfloat16"))
    assert next(encoder.model.parameters()).dtype == torch.bfloat16
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "Pass index.encoder.dtype=float32" in warnings[0]


@pytest.mark.parametrize(("native", "dtype"), [(True, "bfloat16"), (False, "float32")])
def test_the_cpu_defaults_are_bfloat16_only_where_it_is_native(monkeypatch, native, dtype):
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from grasp.config import TrainConfig, register_configs, to_dataclass
    from grasp.corpus.encoder import EncoderConfig
    from grasp.paths import REPO_ROOT

    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: native)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False)
    assert ModelConfig().dtype == EncoderConfig().dtype == dtype
    register_configs()
    with initialize_config_dir(config_dir=str(REPO_ROOT / "configs"), version_base=None):
        cfg = compose("train", overrides=["experiment=cpu_grasp"])
        paper = compose("train", overrides=["experiment=grasp_qwen2.5_3b"])
        evaluate = compose("evaluate")
    resolved = OmegaConf.to_container(cfg, resolve=True)  # what config.json records
    assert resolved["model"]["dtype"] == resolved["index"]["encoder"]["dtype"] == dtype
    assert resolved["grpo"]["bf16"] is native
    config = to_dataclass(cfg, TrainConfig)
    assert (config.model.dtype, config.grpo.bf16) == (dtype, native)
    assert OmegaConf.to_container(evaluate, resolve=True)["policy"]["model"]["dtype"] == dtype
    gpu = to_dataclass(paper, TrainConfig)  # the GPU run says what it computes in
    assert (gpu.model.dtype, gpu.grpo.bf16) == ("bfloat16", True)


def test_the_benchmark_has_a_row_per_dtype_relative_to_the_first(tiny_model_dir):
    config = BenchDtypeConfig(
        seconds=0.01, matmul_size=32, model=str(tiny_model_dir), generate_rows=2, new_tokens=3
    )
    report = run_benchmark(config)
    assert [row["dtype"] for row in report["rows"]] == ["float32", "bfloat16"]
    assert report["reference_dtype"] == "float32"
    assert report["native_bfloat16"] is native_bfloat16()
    first, second = report["rows"]
    for key, _, _ in METRICS:
        assert first[key] > 0 and second[key] > 0
        assert first["vs_reference"][key] == 1.0
        assert second["vs_reference"][key] == pytest.approx(second[key] / first[key])
    printed = table(report).splitlines()
    assert printed[0].startswith(f"native bfloat16: {report['native_bfloat16']}")
    assert printed[-2].startswith("| float32 |") and printed[-1].startswith("| bfloat16 |")
    assert printed[-1].count("|") == 2 + 2 * len(METRICS)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"dtypes": ["float8"]}, "dtypes: 'float8' is not one of"),
        ({"dtypes": []}, "dtypes must name at least one dtype"),
        ({"new_tokens": 0}, "new_tokens"),
    ],
)
def test_bad_settings_are_named(overrides, message):
    with pytest.raises(ValueError, match=message):
        BenchDtypeConfig(**overrides)
