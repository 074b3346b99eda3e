"""Dynamic sampling (DAPO) inside the rollout function: keep the groups that can teach.

A group whose G samples all earn the same reward has zero advantage: it costs a rollout and
an update and moves nothing. DAPO (Yu et al., 2025) over-samples and keeps only groups with
reward spread; TRL's GRPOTrainer does not, but our ``rollout_func`` owns the trajectories it
returns, so it can. ``GraspRollout`` rolls out the B questions TRL asked for; then, for
every zero-spread group, it rolls out a replacement question drawn from the training set
(seeded by the step, so a resumed run draws the same ones), for up to ``max_rounds`` extra
rounds; ``select_groups`` keeps B groups, those with spread first. When too few groups have
spread after the last round, zero-spread groups fill the batch, so TRL always receives
exactly the B x G trajectories it asked for.

Off by default (and in the paper's configuration); each step logs the share of rolled-out
groups that were dropped and the extra rollouts it cost (``sampling/*``).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

SPREAD_EPS = 1e-9
"""Rewards closer than this count as equal."""


@dataclass
class DynamicSamplingSettings:
    """Replace zero-spread groups with fresh questions before the update (DAPO)."""

    enabled: bool = False
    """Re-sample zero-spread groups (off: every group TRL asked for is trained on)."""
    max_rounds: int = 2
    """Extra rollout rounds per step at most; each rolls out one replacement question per
    group still missing."""

    def __post_init__(self) -> None:
        if self.max_rounds < 1:
            raise ValueError(f"grpo.dynamic_sampling.max_rounds={self.max_rounds} must be >= 1")


def has_spread(rewards: Sequence[float]) -> bool:
    """Whether a group's rewards differ, i.e. whether its advantages are not all zero."""
    return max(rewards) - min(rewards) > SPREAD_EPS


@dataclass
class Selection:
    """Which rolled-out groups a step keeps, in the order they are returned."""

    kept: list[int]
    """Indices into the rolled-out groups: those with spread first (in roll-out order),
    then zero-spread groups when needed to fill the batch."""
    with_spread: int
    """How many of the kept groups have reward spread."""


def select_groups(group_rewards: Sequence[Sequence[float]], needed: int) -> Selection:
    """Choose ``needed`` groups of ``group_rewards`` (each group's total rewards)."""
    if len(group_rewards) < needed:
        raise ValueError(f"{len(group_rewards)} groups rolled out, {needed} needed")
    spread = [i for i, rewards in enumerate(group_rewards) if has_spread(rewards)]
    flat = [i for i, rewards in enumerate(group_rewards) if not has_spread(rewards)]
    return Selection(kept=(spread + flat)[:needed], with_spread=min(len(spread), needed))


def replacement_ids(
    pool: Sequence[str], exclude: set[str], count: int, seed: int, step: int, round_: int
) -> list[str]:
    """``count`` question ids from ``pool`` not in ``exclude``, drawn reproducibly per step."""
    candidates = sorted(set(pool) - exclude)
    rng = random.Random(f"dynamic-sampling:{seed}:{step}:{round_}")
    return rng.sample(candidates, min(count, len(candidates)))
