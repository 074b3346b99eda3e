"""Timing helpers and recall against exact search, shared by the benchmarks."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np

T = TypeVar("T")


def time_each(search: Callable[[T], object], items: Sequence[T]) -> list[float]:
    """Seconds taken by ``search(item)``, one call per item."""
    seconds = []
    for item in items:
        start = time.perf_counter()
        search(item)
        seconds.append(time.perf_counter() - start)
    return seconds


def time_batch(call: Callable[[], object], repeats: int) -> float:
    """Median seconds of ``repeats`` calls."""
    return statistics.median(time_each(lambda _: call(), range(max(1, repeats))))


def latency_metrics(name: str, seconds: Sequence[float]) -> dict[str, float]:
    """Mean, p50 and p95 of one-at-a-time latencies, in ms, keyed ``<name>/single_*_ms``."""
    ms = np.asarray(seconds, dtype=np.float64) * 1000
    return {
        f"{name}/single_mean_ms": float(ms.mean()),
        f"{name}/single_p50_ms": float(np.percentile(ms, 50)),
        f"{name}/single_p95_ms": float(np.percentile(ms, 95)),
    }


def recall_at_k(approx_ids: np.ndarray, exact_ids: np.ndarray) -> float:
    """Mean over queries of |approx top-k & exact top-k| / k; both [num_queries, k].

    Slots an approximate index left empty (id -1) count as misses.
    """
    hits = [
        len(set(a[a >= 0].tolist()) & set(e.tolist()))
        for a, e in zip(approx_ids, exact_ids, strict=True)
    ]
    return float(np.mean(hits) / exact_ids.shape[1])
