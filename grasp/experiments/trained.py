"""Evaluating a trained run in the environment it was trained in.

``python scripts/evaluate.py run_dir=runs/cpu_grasp`` evaluates the run's final policy;
``stage=warm_start`` the warm-started policy GRPO started from, ``stage=checkpoint-40`` a
checkpoint. The evaluation takes from the run's ``config.json`` everything that shapes an
episode: the tools, top-K, turn budget and scaffolds (``env``), the index settings, the
context budget, tokens per turn and assistant prefix (``rollout``, decoded greedily), and the
model with the run's adapters (``grasp/rollout/adapters.py``), generating as the run did
(``grpo.reuse_cache``). Overriding any of those on the
command line together with ``run_dir=`` is refused, so that nobody evaluates a policy in an
environment it was not trained in by accident. What stays the evaluation's own: the datasets,
n, seed, batching, judge and output folder.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

from omegaconf import OmegaConf

from grasp.eval.config import PolicyRunConfig
from grasp.rollout.adapters import ADAPTER_CONFIG
from grasp.rollout.factory import PolicyConfig
from grasp.train.config import TrainConfig

RunConfig = TypeVar("RunConfig", bound=PolicyRunConfig)
"""The config of an entry point that plays a policy (EvaluateConfig, RobustnessConfig)."""
RUN_OWNED = ("env", "rollout", "index", "policy", "baseline")
"""Config groups a trained run fixes; an override of any of them beside run_dir= is refused."""
FINAL = "final"
WARM_START = "warm_start"


def load_train_config(run_dir: Path) -> TrainConfig:
    """The run's training configuration, from its ``config.json``."""
    path = run_dir / "config.json"
    if not path.is_file():
        raise FileNotFoundError(f"run_dir={run_dir}: no config.json (is it a training run?)")
    try:
        resolved = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise ValueError(
            f"{path} is not valid JSON ({error}); the run folder is damaged"
        ) from error
    merged = OmegaConf.merge(OmegaConf.structured(TrainConfig), OmegaConf.create(resolved))
    train = OmegaConf.to_object(merged)
    if "reuse_cache" not in resolved.get("grpo", {}):
        # Written before grpo.reuse_cache: the run prefilled every turn whole, as its
        # evaluation must, whatever the field's default is now.
        train = replace(train, grpo=replace(train.grpo, reuse_cache=False))
    return train


def fixed_by_run(override: str) -> bool:
    """True when a command-line override sets a config group that a trained run fixes."""
    return override.lstrip("+~").split("=")[0].split(".")[0] in RUN_OWNED


def check_overrides(overrides: Sequence[str]) -> None:
    """Refuse command-line overrides of what the run fixes (see the module docstring)."""
    clashing = [o for o in overrides if fixed_by_run(o)]
    if clashing:
        raise ValueError(
            f"{clashing} would change what the trained run fixes ({', '.join(RUN_OWNED)} come "
            "from its config.json): drop them, or evaluate the model as an ordinary policy"
        )


def stage_policy(run_dir: Path, stage: str, train: TrainConfig, base: PolicyConfig) -> PolicyConfig:
    """The hf policy of one stage of the run: the model and the adapters to apply to it."""
    model = train.model
    adapters: list[str] = []
    if train.warm_start.enabled:
        warm = run_dir / "warm_start"
        if (warm / "adapter" / ADAPTER_CONFIG).is_file():
            adapters.append(str(warm / "adapter"))
        elif (warm / "model" / "config.json").is_file():
            model = replace(model, name=str(warm / "model"))
        else:
            raise FileNotFoundError(f"{warm} holds neither the warm start's adapter nor its model")
    elif stage == WARM_START:
        raise ValueError(f"stage=warm_start: the run in {run_dir} has no warm start")
    if stage != WARM_START:
        folder = run_dir / FINAL if stage == FINAL else run_dir / "checkpoints" / stage
        if not folder.is_dir():
            raise FileNotFoundError(f"stage={stage}: {folder} does not exist")
        if train.grpo.lora.enabled:
            adapters.append(str(folder))
        else:
            model, adapters = replace(model, name=str(folder)), []
    return replace(
        base, kind="hf", model=model, adapters=adapters, reuse_cache=train.grpo.reuse_cache
    )


def for_trained_run(config: RunConfig, overrides: Sequence[str]) -> RunConfig:
    """``config`` (an EvaluateConfig, or a RobustnessConfig, with ``run_dir`` set) with the
    run's env, index, rollout and policy; the output folder defaults to
    ``<run_dir>/evaluate/<stage>``."""
    check_overrides(overrides)
    run_dir = Path(config.run_dir)
    train = load_train_config(run_dir)
    policy = stage_policy(run_dir, config.stage, train, config.policy)
    return replace(
        config,
        env=train.env,
        index=replace(train.index, remote_url=config.index.remote_url),
        rollout=train.rollout.greedy(),
        policy=policy,
        out=config.out or str(run_dir / "evaluate" / config.stage),
    )
