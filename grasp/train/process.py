"""Which process of a run writes the run directory, and how the others wait for it.

Under ``accelerate launch`` every process runs ``run_training``. The run directory is written
once, by the main process: config.json, the warm start, eval_before/, eval_after/,
results.json and curves.png (TRL's trainer gates its checkpoints and our metrics.jsonl
callback itself). The other processes wait at each of those points (``wait_for_everyone``)
and go on from what the main process wrote. Tests inject a ``RunProcess`` of their own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


class RunProcess(Protocol):
    """This process's part in a run of several: accelerate's ``PartialState`` is one."""

    is_main_process: bool

    def wait_for_everyone(self) -> None: ...


@dataclass
class SingleProcess:
    """A run of one process: it writes everything and waits for nobody."""

    is_main_process: bool = True

    def wait_for_everyone(self) -> None:
        return None


def run_process(cpu: bool) -> Any:
    """accelerate's ``PartialState`` of this process (the same one the trainer uses; ``cpu``
    as the trainer's ``use_cpu``, so that both initialise it alike)."""
    from accelerate import PartialState

    return PartialState(cpu=cpu)
