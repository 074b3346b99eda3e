"""Which process of a run writes the run directory, and how the others wait for it.

Under ``accelerate launch`` every process runs ``run_training``. The run directory is written
once, by the main process: config.json, the warm start, eval_before/, eval_after/,
results.json and curves.png (TRL's trainer gates its checkpoints and our metrics.jsonl
callback itself). The other processes wait at each of those points (``wait_for_everyone``)
and go on from what the main process wrote (``MainWrites``). Tests inject a ``RunProcess`` of
their own.

A wait that can last long (the main process building the local index, or evaluating before
and after training) goes through ``timed_barrier`` instead: a barrier with a timeout of its
own (``main_wait_s``) that, when it expires, names what it waited for, rather than the
process group's 30-minute default and a bare collective error.

What a training process needs from its environment is set here, by the entry point
(``set_process_environment``, scripts/train.py), not by the library code it calls.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, Protocol, TypeVar

from grasp.types import StrEnum


class WandbMode(StrEnum):
    """Whether a run also logs to Weights & Biases (metrics.jsonl is always written)."""

    DISABLED = "disabled"
    OFFLINE = "offline"
    """Written under the run directory, synced later (``wandb sync``)."""
    ONLINE = "online"


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


_TIMED_GROUPS: dict[float, Any] = {}
"""The gloo process groups of ``timed_barrier``, one per timeout (created on first use, by
every process at the same barrier, as ``new_group`` requires)."""


def timed_barrier(process: RunProcess, what: str, timeout_s: float) -> None:
    """Wait until every process of the launch is here, at most ``timeout_s`` seconds.

    On a launch (torch.distributed initialised), a barrier on a gloo group created with that
    timeout: gloo runs on the CPU whatever the training backend, and its barrier raises when
    the timeout expires; that error is raised again as a ``TimeoutError`` naming ``what`` (the
    thing waited for). A single process returns at once; a stand-in process of the tests
    (torch.distributed not initialised) waits with its own ``wait_for_everyone``."""
    if process.num_processes == 1:
        return
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_initialized():
        process.wait_for_everyone()
        return
    try:
        # Creating the group connects the processes, with the same timeout: inside the try.
        group = _TIMED_GROUPS.get(timeout_s)
        if group is None:
            group = dist.new_group(backend="gloo", timeout=timedelta(seconds=timeout_s))
            _TIMED_GROUPS[timeout_s] = group
        dist.barrier(group=group)
    except RuntimeError as error:
        raise TimeoutError(
            f"waited {timeout_s:g} s for {what}, and not every process arrived: {error}"
        ) from error


T = TypeVar("T")


@dataclass
class MainWrites:
    """A run's writes to its folder, as a launch of several processes makes them: the main
    process writes, and every process then waits for it (``timed_barrier``, at most
    ``wait_s``), so that the others go on from what it wrote."""

    process: RunProcess
    wait_s: float
    """The longest wait for one write (``main_wait_s``)."""

    @property
    def main(self) -> bool:
        return self.process.is_main_process

    def then_everyone(self, what: str, write: Callable[[], T]) -> T | None:
        """``write()`` on the main process, then every process waits for it, naming ``what``
        if the wait times out; what ``write`` returned on the main process, None on the
        others."""
        written = write() if self.main else None
        timed_barrier(self.process, what, self.wait_s)
        return written


def set_process_environment(wandb: WandbMode, run_dir: Path) -> None:
    """Environment variables the libraries of a training process read, set before they do:
    TRL's warning about the experimental ``rollout_func`` silenced, and wandb's mode and
    folder (its files go in ``run_dir``). Values
    already in the environment are kept."""
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    if wandb is not WandbMode.DISABLED:
        os.environ.setdefault("WANDB_MODE", wandb.value)
        os.environ.setdefault("WANDB_DIR", str(run_dir))
