"""CPU threads: how many torch (and so the sentence encoder) and FAISS may use.

Every entry point sets them once, from its config's ``threads`` field, before any model or
index is loaded::

    threads = set_threads(config.threads)   # 0: the cores this process may run on

On a machine shared with another busy process (a retrieval service, a second run), threads
that outnumber the free cores make torch much slower, not faster (measured by
``scripts/bench_threads.py``): give each process ``threads=`` the cores it can have to itself.
"""

from __future__ import annotations

import logging
import os

log = logging.getLogger(__name__)


def available_cores() -> int:
    """The cores this process may run on (its affinity mask where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def resolve_threads(threads: int) -> int:
    """``threads``, or the available cores when it is 0."""
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 0:
        raise ValueError(f"threads must be 0 (every available core) or more, got {threads!r}")
    return threads or available_cores()


def set_threads(threads: int) -> int:
    """Set torch's intra-op threads (the encoder's too) and FAISS's OpenMP threads; the
    number set."""
    import torch

    count = resolve_threads(threads)
    torch.set_num_threads(count)
    try:
        import faiss
    except ImportError:  # a machine without FAISS (the GPU check's)
        pass
    else:
        faiss.omp_set_num_threads(count)
    log.info("threads: %d (torch intra-op, encoder, FAISS)", count)
    return count
