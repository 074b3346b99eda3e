"""The thread benchmark: torch's thread count with and without a busy neighbour process.

``run_benchmark(config)`` times a matmul and MiniLM encoding per thread count and condition;
``table(report)`` is its printed table. ``scripts/bench_threads.py`` is the entry point.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from typing import TypedDict

from grasp.bench.config import BenchThreadsConfig
from grasp.bench.report import Machine, machine
from grasp.threads import available_cores, set_threads

log = logging.getLogger("bench_threads")

SPIN = "while True: pass"


def timed_rate(work, seconds: float) -> float:
    """Calls of ``work`` per second over at least ``seconds`` (after one warm-up call)."""
    work()
    calls, started = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - started) < seconds or calls < 3:
        work()
        calls += 1
    return calls / elapsed


class ThreadsRow(TypedDict):
    """One thread count, idle or beside a busy neighbour."""

    threads: int
    busy_neighbour: bool
    matmul_ms: float
    encoder_sentences_per_s: float


class ThreadsReport(TypedDict):
    """The benchmark's JSON report."""

    rows: list[ThreadsRow]
    environment: Machine
    cores: int


def measure(threads: int, seconds: float, sentences: list[str], encoder) -> dict[str, float]:
    """At ``threads`` torch threads: ms per 1024 x 1024 matmul, encoder sentences per second."""
    import torch

    set_threads(threads)
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    matmul_s = 1.0 / timed_rate(lambda: a @ b, seconds)
    encode = lambda: encoder.encode(sentences, batch_size=len(sentences))  # noqa: E731
    return {
        "matmul_ms": matmul_s * 1000,
        "encoder_sentences_per_s": timed_rate(encode, seconds) * len(sentences),
    }


def run_benchmark(config: BenchThreadsConfig) -> ThreadsReport:
    """A row per thread count, idle and then beside a spinning neighbour; the JSON report."""
    import torch
    from sentence_transformers import SentenceTransformer

    from grasp.corpus.encoder import resolve_model_path

    load_before = os.getloadavg()
    encoder = SentenceTransformer(resolve_model_path(config.encoder), device="cpu")
    encoder = encoder.to(torch.bfloat16)
    sentences = [f"Sentence number {i} of the benchmark, about a canal in Ohio." for i in range(64)]
    rows: list[ThreadsRow] = []
    for neighbour in (False, True):
        spinner = None
        if neighbour:
            spinner = subprocess.Popen(["nice", "-n", "19", sys.executable, "-c", SPIN])
            time.sleep(0.5)
        try:
            for threads in config.thread_counts:
                timing = measure(threads, config.seconds, sentences, encoder)
                row: ThreadsRow = {
                    "threads": threads,
                    "busy_neighbour": neighbour,
                    "matmul_ms": timing["matmul_ms"],
                    "encoder_sentences_per_s": timing["encoder_sentences_per_s"],
                }
                rows.append(row)
                log.info("%s", row)
        finally:
            if spinner is not None:
                spinner.kill()
                spinner.wait()
    return {"rows": rows, "environment": machine(load_before), "cores": available_cores()}


def table(report: ThreadsReport) -> str:
    """The rows as a Markdown table, matmul also relative to one idle thread."""
    lines = [
        "| neighbour | threads | matmul ms | x idle 1-thread | encoder sentences/s |",
        "|---|---|---|---|---|",
    ]
    idle_one = next(r for r in report["rows"] if not r["busy_neighbour"])["matmul_ms"]
    for r in report["rows"]:
        lines.append(
            f"| {'busy' if r['busy_neighbour'] else 'idle'} | {r['threads']} | "
            f"{r['matmul_ms']:.1f} | {r['matmul_ms'] / idle_one:.2f} | "
            f"{r['encoder_sentences_per_s']:.0f} |"
        )
    return "\n".join(lines)
