"""Which process of a run writes the run directory, and how the others wait for it.

Under ``accelerate launch`` every process runs ``run_training``. The run directory is written
once, by the main process: config.json, the warm start, eval_before/, eval_after/,
results.json and curves.png (TRL's trainer gates its checkpoints and our metrics.jsonl
callback itself). The other processes wait at each of those points (``wait_for_everyone``)
and go on from what the main process wrote. Tests inject a ``RunProcess`` of their own.

What a training process needs from its environment is set here, by the entry point
(``set_process_environment``, scripts/train.py), not by the library code it calls.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from grasp.train.config import WandbMode  # grasp.train.config imports this module


class RunProcess(Protocol):
    """This process's part in a run of several: accelerate's ``PartialState`` is one."""

    is_main_process: bool
    num_processes: int
    """The training processes of the launch (accelerate's WORLD_SIZE)."""

    def wait_for_everyone(self) -> None: ...


@dataclass
class SingleProcess:
    """A run of one process: it writes everything and waits for nobody."""

    is_main_process: bool = True
    num_processes: int = 1

    def wait_for_everyone(self) -> None:
        return None


def run_process(cpu: bool) -> Any:
    """accelerate's ``PartialState`` of this process (the same one the trainer uses; ``cpu``
    as the trainer's ``use_cpu``, so that both initialise it alike)."""
    from accelerate import PartialState

    return PartialState(cpu=cpu)


def set_process_environment(wandb: WandbMode, run_dir: Path) -> None:
    """Environment variables the libraries of a training process read, set before they do:
    TRL's warning about the experimental ``rollout_func`` silenced, and wandb's mode and
    folder (its files go in ``run_dir``). Values
    already in the environment are kept."""
    from grasp.train.config import WandbMode

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    if wandb is not WandbMode.DISABLED:
        os.environ.setdefault("WANDB_MODE", wandb.value)
        os.environ.setdefault("WANDB_DIR", str(run_dir))
