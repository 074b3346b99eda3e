"""Hydra structured configs: a composed config becomes its dataclass, once, at the entry point."""

from __future__ import annotations

from typing import Any, TypeVar

from omegaconf import DictConfig, OmegaConf

T = TypeVar("T")


def to_dataclass(cfg: DictConfig, schema: type[T]) -> T:
    """Turn a composed Hydra config into its dataclass (once, at the entry point)."""
    obj: Any = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(schema), cfg))
    return obj
