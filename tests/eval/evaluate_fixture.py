"""Helpers of the tests that run scripts/evaluate.py: the dataset names and config composition.

The fixtures themselves (the script as a module, the fixture datasets written as dev files,
their index folder and the scripted-policy overrides) are in conftest.py.
"""

from __future__ import annotations

from hydra import compose, initialize_config_dir

from grasp.config import EvaluateConfig, register_configs, to_dataclass
from grasp.paths import REPO_ROOT

register_configs()
DATASETS = ("hotpotqa", "2wikimultihopqa", "musique")


def compose_config(*overrides: str) -> EvaluateConfig:
    """configs/evaluate.yaml with command-line ``overrides``, as the dataclass."""
    with initialize_config_dir(config_dir=str(REPO_ROOT / "configs"), version_base=None):
        return to_dataclass(compose("evaluate", overrides=list(overrides)), EvaluateConfig)
