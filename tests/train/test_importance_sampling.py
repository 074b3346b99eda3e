"""vLLM importance sampling: the mode reaches TRL, and TRL's metrics reach the run directory."""

from __future__ import annotations

import inspect

import pytest

from grasp.train.callbacks import MetricsFileCallback
from grasp.train.config import GRPOSettings, TrainConfig
from grasp.train.grpo_args import grpo_args
from grasp.train.metrics_log import read_metrics
from grasp.train.plots import IMPORTANCE_SAMPLING_METRICS, panels_for, plot_run


class _State:
    is_world_process_zero = True

    def __init__(self, step: int) -> None:
        self.global_step = step


def test_the_metric_names_are_trls():
    from trl.trainer import grpo_trainer

    source = inspect.getsource(grpo_trainer)
    for name in IMPORTANCE_SAMPLING_METRICS:
        assert f'"{name}"' in source, f"TRL no longer logs {name}"


def test_the_mode_and_cap_reach_trl(tmp_path):
    config = TrainConfig(run_dir=str(tmp_path))
    args = grpo_args(config, tmp_path)
    assert args.vllm_importance_sampling_correction is True
    assert args.vllm_importance_sampling_mode == "token_truncate"
    assert args.vllm_importance_sampling_clip_max == 3.0
    other = GRPOSettings(vllm_importance_sampling_mode="sequence_mask")
    assert grpo_args(TrainConfig(grpo=other), tmp_path).vllm_importance_sampling_mode == (
        "sequence_mask"
    )
    with pytest.raises(ValueError, match="vllm_importance_sampling_mode='per_token'"):
        GRPOSettings(vllm_importance_sampling_mode="per_token")


def test_the_metrics_are_written_and_drawn(tmp_path):
    callback = MetricsFileCallback(tmp_path)
    values = dict.fromkeys(IMPORTANCE_SAMPLING_METRICS, 1.0)
    for step in (1, 2):
        callback.on_log(None, _State(step), None, logs={"reward/total": 0.5, **values})
    records = read_metrics(tmp_path)
    assert all(r[name] == 1.0 for r in records for name in IMPORTANCE_SAMPLING_METRICS)
    titles = [title for title, _ in panels_for(records)]
    assert titles[-1] == "vLLM importance sampling"
    assert plot_run(tmp_path) == tmp_path / "curves.png"


def test_without_vllm_no_empty_panel_is_drawn(tmp_path):
    callback = MetricsFileCallback(tmp_path)
    callback.on_log(None, _State(1), None, logs={"reward/total": 0.5, "loss": 0.1})
    titles = [title for title, _ in panels_for(read_metrics(tmp_path))]
    assert "vLLM importance sampling" not in titles and titles == ["reward", "optimization"]
    assert plot_run(tmp_path) == tmp_path / "curves.png"
