"""Trainer callbacks: metrics.jsonl, step-time split, and periodic trajectory samples."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from transformers import TrainerCallback

from grasp.eval.jsonl import end_last_line
from grasp.reward import TERM_NAMES
from grasp.train.metrics_log import drop_records_after
from grasp.train.rollout_stats import ROLLOUT_SECONDS_KEY
from grasp.train.run_folder import RunFolder

LEFT_OUT = frozenset(f"rewards/{name}/mean" for name in TERM_NAMES)
"""TRL's keys that metrics.jsonl leaves out: each term's mean is there as ``reward/R_A``...
(the rollout's own, the key plots and reports read)."""


class MetricsFileCallback(TrainerCallback):
    """Appends every logged dict to ``metrics.jsonl`` with the step and the time split.

    TRL logs the loss, KL, each reward term's std (``rewards/R_A/std``...) and the rollout
    statistics the rollout reports (``grasp.train.trl_bridge.GraspRollout``) (``reward/R_A``, ``tools/...``, ``stop/...``,
    ``time/rollout_s``); TRL's copies of the terms' means (``rewards/R_A/mean``) are left out
    (``LEFT_OUT``). This adds ``time/step_s`` and ``time/update_s`` (the step minus its rollout)
    and, on a GPU, ``memory/peak_gib`` (the step's peak of allocated memory, this process).
    """

    def __init__(self, run_dir: Path) -> None:
        self.path = RunFolder(run_dir).metrics_file
        self._opened = False
        self._step_started = 0.0
        self._last_step_s = 0.0

    def on_train_begin(self, args, state, control, **kwargs):
        """A resumed run starts at its checkpoint's step: the records of later steps (played
        by the killed attempt after that checkpoint) are dropped, since those steps are played
        again, so that each step is logged once."""
        if state.is_world_process_zero and state.global_step > 0:
            drop_records_after(self.path, state.global_step)

    def on_step_begin(self, args, state, control, **kwargs):
        self._step_started = time.perf_counter()
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.reset_peak_memory_stats()

    def on_step_end(self, args, state, control, **kwargs):
        self._last_step_s = time.perf_counter() - self._step_started

    def on_log(self, args, state, control, logs: dict[str, Any] | None = None, **kwargs):
        if not logs or not state.is_world_process_zero:
            return
        record = {"step": state.global_step}
        record.update((k, v) for k, v in logs.items() if k not in LEFT_OUT)
        if self._last_step_s:
            # A step that reused an earlier generation (TRL's steps_per_generation) rolled out
            # nothing: all of it was the update.
            rollout_s = float(logs.get(ROLLOUT_SECONDS_KEY) or 0.0)
            record["time/step_s"] = self._last_step_s
            record[ROLLOUT_SECONDS_KEY] = rollout_s
            record["time/update_s"] = max(self._last_step_s - rollout_s, 0.0)
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            record["memory/peak_gib"] = torch.cuda.max_memory_allocated() / 2**30  # this step
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if not self._opened:
            # A run killed mid-write left a torn last line: end it, so that the next record
            # starts a line of its own instead of merging into it (main process only).
            end_last_line(self.path)
            self._opened = True
        with self.path.open("a") as handle:
            handle.write(json.dumps(record, default=float) + "\n")


class TrajectorySampleCallback(TrainerCallback):
    """Every ``every`` steps, roll out a fixed question sample and save the trajectories."""

    def __init__(self, every: int, sample: Callable[[int], None]) -> None:
        self.every = every
        self.sample = sample

    def on_step_end(self, args, state, control, **kwargs):
        if self.every > 0 and state.global_step % self.every == 0 and state.is_world_process_zero:
            self.sample(state.global_step)
