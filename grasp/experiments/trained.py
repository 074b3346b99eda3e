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
from grasp.models import MODEL_CONFIG_FILE
from grasp.rollout.adapters import ADAPTER_CONFIG
from grasp.rollout.factory import PolicyConfig
from grasp.train.config import TrainConfig
from grasp.train.run_folder import CONFIG_FILE, FINAL_DIR, WARM_START_DIR, RunFolder
from grasp.train.warm_start import ADAPTER_DIR, MODEL_DIR

RunConfig = TypeVar("RunConfig", bound=PolicyRunConfig)
"""The config of an entry point that plays a policy (EvaluateConfig, RobustnessConfig)."""
RUN_OWNED = ("env", "rollout", "index", "policy", "baseline")
"""Config groups a trained run fixes; an override of any of them beside run_dir= is refused."""
FINAL = FINAL_DIR
"""The stage of the trained policy: the run's final/."""
WARM_START = WARM_START_DIR
"""The stage of the warm-started policy GRPO began from: the run's warm_start/."""


def load_train_config(run_dir: Path) -> TrainConfig:
    """The run's training configuration, from its ``config.json``."""
    path = RunFolder(run_dir).config_file
    if not path.is_file():
        raise FileNotFoundError(f"run_dir={run_dir}: no {CONFIG_FILE} (is it a training run?)")
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
            f"from its {CONFIG_FILE}): drop them, or evaluate the model as an ordinary policy"
        )


def stage_policy(run_dir: Path, stage: str, train: TrainConfig, base: PolicyConfig) -> PolicyConfig:
    """The hf policy of one stage of the run: the model and the adapters to apply to it."""
    folder = RunFolder(run_dir)
    model = train.model
    adapters: list[str] = []
    if train.warm_start.enabled:
        warm = folder.warm_start_dir
        if (warm / ADAPTER_DIR / ADAPTER_CONFIG).is_file():
            adapters.append(str(warm / ADAPTER_DIR))
        elif (warm / MODEL_DIR / MODEL_CONFIG_FILE).is_file():
            model = replace(model, name=str(warm / MODEL_DIR))
        else:
            raise FileNotFoundError(f"{warm} holds neither the warm start's adapter nor its model")
    elif stage == WARM_START:
        raise ValueError(f"stage=warm_start: the run in {run_dir} has no warm start")
    if stage != WARM_START:
        weights = folder.final_dir if stage == FINAL else folder.checkpoints_dir / stage
        if not weights.is_dir():
            raise FileNotFoundError(f"stage={stage}: {weights} does not exist")
        if train.grpo.lora.enabled:
            adapters.append(str(weights))
        else:
            model, adapters = replace(model, name=str(weights)), []
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
