"""What every entry point sets before its first third-party import, and its GPU memory log.

bm25s, which grasp.corpus imports, runs ``jax.lax.top_k`` on a dummy array at import time
whenever JAX is importable (``bm25s/selection.py``). That initialises JAX's default backend:
on a machine with JAX's CUDA plugin, the GPU, where XLA preallocates 75% of the memory (107,925
of an H200's 143,771 MiB) for a process whose PyTorch needs about 1 GiB. So each script starts

    from grasp.startup import process_environment

    os.environ.update(process_environment())  # before any other import

(``os.environ.update`` rather than a plain call keeps ruff's E402 quiet about the imports below
it) and so keeps JAX on the CPU, without preallocation should something still put it on a GPU,
and switches off the JAX, Flax and TensorFlow paths of transformers and datasets. A value
already in the environment wins: ``JAX_PLATFORMS=cuda python scripts/...`` is honoured.

Each Hydra entry point's ``main`` is also decorated with ``one_line_errors`` (below
``@hydra.main``, which unwraps it to find the script's configs): an expected error, a bad
path, config or data file, ends in one line naming it instead of Hydra's traceback.

This module imports nothing beyond the standard library (torch only inside
``log_gpu_memory``), so importing it initialises nothing.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable
from typing import Any, TypedDict, TypeVar

log = logging.getLogger(__name__)

PROCESS_ENVIRONMENT = {
    "JAX_PLATFORMS": "cpu",
    "XLA_PYTHON_CLIENT_PREALLOCATE": "false",
    "USE_JAX": "0",
    "USE_FLAX": "0",
    "USE_TF": "0",
}
"""The settings and their defaults: JAX's platforms and XLA's preallocation (read when JAX
initialises a backend), then the framework switches of transformers and datasets (read when
they are imported)."""

OUTSIDE_TORCH_WARNING = 0.10
"""Share of a GPU held outside this process's torch at start above which the log warns. CUDA's
own context is about 0.5 GiB, well under it."""

_GIB = 1 << 30

EXPECTED_ERRORS: tuple[type[BaseException], ...] = (OSError, ValueError)
"""What a user's input causes, and grasp raises naming it: a path (missing, not a folder, a
symlink loop, locked by another process: OSError) or a value (a config field, a data file's
content: ValueError). Any other exception is a bug, and keeps its traceback."""

FULL_ERROR_VARIABLE = "HYDRA_FULL_ERROR"
"""Set to 1, every error keeps its traceback (Hydra's own switch for its stack traces)."""

Main = TypeVar("Main", bound=Callable[..., Any])


def one_line_errors(main: Main) -> Main:
    """``main`` ending an ``EXPECTED_ERRORS`` in one line on stderr, ``error: <Type>: <what>``,
    and exit status 1, where Hydra would print its traceback (``HYDRA_FULL_ERROR=1`` keeps it).

    Goes below ``@hydra.main``: Hydra finds the script's config folder through
    ``__wrapped__``."""

    @functools.wraps(main)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return main(*args, **kwargs)
        except EXPECTED_ERRORS as error:
            if os.environ.get(FULL_ERROR_VARIABLE) == "1":
                raise
            raise SystemExit(error_line(error)) from None

    return run  # type: ignore[return-value]


def error_line(error: BaseException) -> str:
    """``error`` as one line: ``error: <Type>: <message>``, its lines joined by spaces."""
    lines = [line.strip() for line in str(error).splitlines()]
    message = " ".join(line for line in lines if line) or "(no message)"
    return f"error: {type(error).__name__}: {message}"


def process_environment() -> dict[str, str]:
    """``PROCESS_ENVIRONMENT`` with any value already in the environment in its place: what
    ``os.environ.update`` should receive before the first third-party import."""
    return {name: os.environ.get(name, default) for name, default in PROCESS_ENVIRONMENT.items()}


class GpuMemory(TypedDict):
    """A GPU's memory at start, in bytes (``log_gpu_memory``)."""

    device: int
    total: int
    free: int
    torch_reserved: int
    outside_torch: int


def log_gpu_memory() -> GpuMemory | None:
    """Log this process's GPU's total and free memory and how much of it is held outside
    torch, warning when that is over ``OUTSIDE_TORCH_WARNING`` of the GPU; None without CUDA.

    Outside torch is total - free - torch's reserved memory: other processes, another
    framework in this one (JAX/XLA's preallocation), and CUDA's context. The GPU is
    ``cuda:<LOCAL_RANK>`` under a launcher, else the current device. Measuring initialises CUDA
    in this process (vLLM then starts its workers with spawn rather than fork).
    """
    import torch

    if not torch.cuda.is_available():
        return None
    rank = os.environ.get("LOCAL_RANK")
    device = int(rank) if rank is not None else torch.cuda.current_device()
    if device >= torch.cuda.device_count():  # one GPU per process (CUDA_VISIBLE_DEVICES)
        device = torch.cuda.current_device()
    free, total = torch.cuda.mem_get_info(device)
    reserved = torch.cuda.memory_reserved(device)
    outside = max(total - free - reserved, 0)
    log.info(
        "GPU %d at start: %.1f GiB total, %.1f GiB free, %.1f GiB reserved by torch, "
        "%.1f GiB held outside torch",
        device,
        total / _GIB,
        free / _GIB,
        reserved / _GIB,
        outside / _GIB,
    )
    if outside > OUTSIDE_TORCH_WARNING * total:
        log.warning(
            "GPU %d: %.1f GiB (%.0f%%) is held outside torch at start: another process, or "
            "another framework in this one (JAX/XLA preallocates 75%% of a GPU; see "
            "grasp/startup.py)",
            device,
            outside / _GIB,
            100 * outside / total,
        )
    return {
        "device": device,
        "total": total,
        "free": free,
        "torch_reserved": reserved,
        "outside_torch": outside,
    }
