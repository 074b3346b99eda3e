"""The service benchmark: the retrieval service on loopback against in-process search, with
every remote answer checked against the in-process one.

``run_benchmark(config, directory, queries)`` starts the service (``running_service``), measures
both modes per retriever and concurrency level and returns the JSON report; ``format_table`` and
``summary`` are what is printed. ``scripts/bench_serve.py`` is the entry point, and its
docstring says what is measured.
"""

from __future__ import annotations

import dataclasses
import logging
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import requests as http

from grasp.bench.config import BenchServeConfig
from grasp.corpus import CorpusIndex, build_index
from grasp.data import load_questions
from grasp.data.config import dataset_path
from grasp.paths import REPO_ROOT, default_index_dir
from grasp.serve.agreement import hits_difference
from grasp.serve.client import RemoteIndex
from grasp.types import Hit, Retriever

log = logging.getLogger("bench_serve")

SERVE_SCRIPT = REPO_ROOT / "scripts" / "serve_retrieval.py"

Search = Callable[[list[str]], list[list[Hit]]]


@dataclass
class Measurement:
    """One mode at one concurrency level: every request's answer and latency."""

    answers: list[list[list[Hit]]]
    latencies_s: list[float]
    wall_s: float

    def row(self, queries: int) -> dict[str, float]:
        p50, p95, p99 = np.percentile(np.asarray(self.latencies_s) * 1000.0, [50, 95, 99])
        return {
            "qps": queries / self.wall_s,
            "p50_ms": float(p50),
            "p95_ms": float(p95),
            "p99_ms": float(p99),
            "wall_s": self.wall_s,
        }


def measure(search: Search, batches: Sequence[list[str]], concurrency: int) -> Measurement:
    """Send ``batches`` through ``search`` from ``concurrency`` threads (closed loop)."""

    def timed(batch: list[str]) -> tuple[list[list[Hit]], float]:
        started = time.perf_counter()
        answer = search(batch)
        return answer, time.perf_counter() - started

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        results = list(pool.map(timed, batches))
    wall = time.perf_counter() - started
    return Measurement([r[0] for r in results], [r[1] for r in results], wall)


def request_batches(queries: Sequence[str], count: int, per_request: int) -> list[list[str]]:
    """``count`` requests of ``per_request`` queries, taken in order (cycling if needed)."""
    return [
        [queries[(i * per_request + j) % len(queries)] for j in range(per_request)]
        for i in range(count)
    ]


@dataclass
class Agreement:
    """How the remote answers of one measurement compare with the in-process ones."""

    mismatches: int = 0
    """Answers that differ beyond score noise (``hits_difference``): must be 0."""
    same_units: int = 0
    """Answers with the same units in the same order (scores may differ in the last bits)."""
    exact: int = 0
    """Answers equal in every field, scores bitwise."""
    examples: list[str] = field(default_factory=list)
    """The first few mismatches, described."""


def compare(remote: Measurement, local: Measurement, tolerance: float) -> Agreement:
    """Check every remote answer against the in-process answer to the same request."""
    agreement = Agreement()
    for request, (found, expected) in enumerate(zip(remote.answers, local.answers, strict=True)):
        if len(found) != len(expected):
            problem = f"{len(found)} answers for {len(expected)} queries"
        else:
            differences = (
                hits_difference(f, e, tolerance) for f, e in zip(found, expected, strict=True)
            )
            problem = next((d for d in differences if d is not None), None)
        if problem is not None:
            agreement.mismatches += 1
            if len(agreement.examples) < 5:
                agreement.examples.append(f"request {request}: {problem}")
        agreement.same_units += _units(found) == _units(expected)
        agreement.exact += found == expected
    return agreement


def _units(answer: list[list[Hit]]) -> list[list[tuple[int, int | None]]]:
    return [[(h.paragraph_id, h.sentence_id) for h in hits] for hits in answer]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def service_command(config: BenchServeConfig, directory: Path, port: int) -> list[str]:
    """The serve_retrieval.py command line: the bench's service settings, then its overrides."""
    service = [f"service.{k}={v}" for k, v in dataclasses.asdict(config.service).items()]
    return [
        sys.executable,
        str(SERVE_SCRIPT),
        f"index_dir={directory}",
        "host=127.0.0.1",
        f"port={port}",
        "log_level=warning",
        *service,
        *config.service_overrides,
    ]


@contextmanager
def running_service(config: BenchServeConfig, directory: Path) -> Iterator[str]:
    """The URL of the service to benchmark: ``service_url``, or one started for the run."""
    if config.service_url:
        yield config.service_url
        return
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryFile(mode="w+") as output:
        process = subprocess.Popen(
            service_command(config, directory, port),
            cwd=REPO_ROOT,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
        try:
            _wait_healthy(url, process, output, config.startup_timeout_s)
            yield url
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _wait_healthy(url: str, process: subprocess.Popen, output: Any, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            output.seek(0)
            tail = output.read()[-3000:]
            raise RuntimeError(f"the retrieval service exited with {process.returncode}:\n{tail}")
        try:
            if http.get(url + "/health", timeout=5).ok:
                return
        except (http.ConnectionError, http.Timeout):
            pass
        time.sleep(0.5)
    raise TimeoutError(f"the retrieval service at {url} was not healthy within {timeout_s}s")


def run_benchmark(config: BenchServeConfig, directory: Path, queries: Sequence[str]) -> dict:
    """Measure in-process and remote search over ``directory``; the JSON report as a dict."""
    local = CorpusIndex.load(directory, config.index).warm_up()
    lock = threading.Lock()
    batches = request_batches(queries, config.requests, config.queries_per_request)
    total_queries = config.requests * config.queries_per_request
    rows: list[dict[str, Any]] = []
    with running_service(config, directory) as url:
        remote = RemoteIndex.connect(url, config.index)
        for retriever in config.retrievers:

            def search_local(batch: list[str], retriever: Retriever = retriever) -> list:
                with lock:
                    return local.search(batch, retriever, config.k, config.granularity)

            def search_remote(batch: list[str], retriever: Retriever = retriever) -> list:
                return remote.search(batch, retriever, config.k, config.granularity)

            search_local(batches[0])  # first calls pay for lazy setup, not measured
            search_remote(batches[0])
            for concurrency in config.concurrency:
                in_process = measure(search_local, batches, concurrency)
                served = measure(search_remote, batches, concurrency)
                agreement = compare(served, in_process, config.score_tolerance)
                row = {
                    "retriever": str(retriever),
                    "concurrency": concurrency,
                    "requests": config.requests,
                    "queries": total_queries,
                    "in_process": in_process.row(total_queries),
                    "remote": served.row(total_queries),
                    "mismatches": agreement.mismatches,
                    "same_units": agreement.same_units,
                    "exact": agreement.exact,
                    "mismatch_examples": agreement.examples,
                }
                rows.append(row)
                log.info("%s", {k: v for k, v in row.items() if k != "mismatch_examples"})
        health = remote.health()
        remote.close()
    return {
        "index_dir": str(directory),
        "service": {"url": url, "index_dir": health["index_dir"], "stats": health["stats"]},
        "corpus": {
            "sentences": local.corpus.num_sentences,
            "paragraphs": local.corpus.num_paragraphs,
        },
        "k": config.k,
        "granularity": str(config.granularity),
        "queries_per_request": config.queries_per_request,
        "score_tolerance": config.score_tolerance,
        "results": rows,
        "mismatches": sum(r["mismatches"] for r in rows),
        "responses_checked": len(rows) * config.requests,
    }


def format_table(report: dict) -> str:
    """Markdown table: one row per retriever and concurrency level."""
    lines = [
        "| retriever | clients | in-process q/s | p50 / p95 / p99 ms | remote q/s "
        "| p50 / p95 / p99 ms | remote / in-process | mismatches | same ids | bitwise |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in report["results"]:
        local, remote = row["in_process"], row["remote"]
        lines.append(
            f"| {row['retriever']} | {row['concurrency']} | {local['qps']:.1f} "
            f"| {local['p50_ms']:.1f} / {local['p95_ms']:.1f} / {local['p99_ms']:.1f} "
            f"| {remote['qps']:.1f} "
            f"| {remote['p50_ms']:.1f} / {remote['p95_ms']:.1f} / {remote['p99_ms']:.1f} "
            f"| {remote['qps'] / local['qps']:.2f}x | {row['mismatches']} "
            f"| {row['same_units']}/{row['requests']} | {row['exact']}/{row['requests']} |"
        )
    return "\n".join(lines)


def prepare_index(config: BenchServeConfig) -> tuple[Path, list[str]]:
    """The index folder (``index_dir``, default the dataset's), built first when missing, and
    the questions of the dataset as queries."""
    name = config.dataset.name
    path = dataset_path(config.dataset, config.split)
    questions = load_questions(name, config.dataset.source, path=path, split=config.split)
    directory = (
        Path(config.index_dir) if config.index_dir else default_index_dir(name, config.split)
    )
    source = {"dataset": str(name), "split": config.split, "path": str(path)}
    build_index(questions, config.index, directory, source=source)
    return directory, [q.question for q in questions]


def summary(report: dict) -> str:
    """The line under the table: answers checked, and how the service batched them."""
    stats = report["service"]["stats"]
    return (
        f"\n{report['responses_checked']} responses checked, {report['mismatches']} mismatches; "
        f"the service ran {stats['search_requests']} search requests as {stats['batches']} "
        f"index searches (largest: {stats['largest_batch']} queries)"
    )
