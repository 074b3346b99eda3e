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

This module imports nothing beyond the standard library (torch only inside
``log_gpu_memory``), so importing it initialises nothing.
"""

from __future__ import annotations

import logging
import os
from typing import Any

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


def process_environment() -> dict[str, str]:
    """``PROCESS_ENVIRONMENT`` with any value already in the environment in its place: what
    ``os.environ.update`` should receive before the first third-party import."""
    return {name: os.environ.get(name, default) for name, default in PROCESS_ENVIRONMENT.items()}


def log_gpu_memory() -> dict[str, Any] | None:
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
