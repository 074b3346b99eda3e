"""Cross-request micro-batching: concurrent search requests become one ``index.search`` call.

A dense search costs one encoder forward pass whatever the batch size (up to a point), so a
service that searched each HTTP request on its own would waste most of its encoder. The
batcher queues requests; a collector task takes the first one, lets others join for up to
``max_wait_ms`` or until ``max_batch_queries`` queries are in, then groups the batch by
(retriever, k, granularity) and runs ONE search per group in a single worker thread (so the
index is never searched from two threads at once, and the event loop stays free to accept
requests meanwhile). Results are split back per request, in order.

When a group's search fails, each of its requests is searched alone, so that a bad request
fails only itself.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from grasp.corpus.index import SearchIndex
from grasp.types import Granularity, Hit, Retriever

log = logging.getLogger(__name__)


class ServiceBusyError(RuntimeError):
    """Too many queries are waiting: the request is refused (HTTP 503) and may be retried."""


@dataclass
class SearchJob:
    """One request's queries, waiting for its batch."""

    queries: list[str]
    retriever: Retriever
    k: int
    granularity: Granularity
    scopes: list[np.ndarray | None] | None
    future: asyncio.Future[list[list[Hit]]]


@dataclass
class BatcherStats:
    """Counters since the batcher started."""

    search_requests: int = 0
    queries: int = 0
    batches: int = 0
    """Calls to ``index.search``."""
    largest_batch: int = 0
    """Most queries searched in one call."""
    pending_queries: int = 0
    """Queries queued or being searched right now."""


@dataclass
class _Outcome:
    job: SearchJob
    hits: list[list[Hit]] | None = None
    error: BaseException | None = None


class MicroBatcher:
    """Merges concurrent searches into batched ``index.search`` calls.

    Use inside a running event loop: ``start()``, then ``await search(...)`` from request
    handlers, then ``close()``.
    """

    def __init__(
        self,
        index: SearchIndex,
        max_batch_queries: int = 512,
        max_wait_ms: float = 2.0,
        max_pending_queries: int = 65_536,
        merge_requests: bool = True,
    ) -> None:
        self.index = index
        self.max_batch_queries = max_batch_queries
        self.max_wait_s = max_wait_ms / 1000.0
        self.max_pending_queries = max_pending_queries
        self.merge_requests = merge_requests
        self.stats = BatcherStats()
        self._queue: asyncio.Queue[SearchJob] | None = None
        self._task: asyncio.Task[None] | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._in_flight: list[SearchJob] = []

    async def start(self) -> None:
        """Start the collector task on the running loop."""
        self._queue = asyncio.Queue()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="grasp-search")
        self._task = asyncio.create_task(self._collect(), name="grasp-batcher")

    async def close(self) -> None:
        """Stop collecting; requests queued or being searched fail with a RuntimeError."""
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        unanswered = list(self._in_flight)
        while self._queue is not None and not self._queue.empty():
            unanswered.append(self._queue.get_nowait())
        for job in unanswered:
            if not job.future.done():
                job.future.set_exception(RuntimeError("the retrieval service is shutting down"))
        if self._executor is not None:
            self._executor.shutdown(wait=True)

    async def search(
        self,
        queries: Sequence[str],
        retriever: Retriever,
        k: int,
        granularity: Granularity,
        scopes: Sequence[np.ndarray | None] | None = None,
    ) -> list[list[Hit]]:
        """The hits of ``index.search(queries, ...)``, searched together with other requests."""
        if self._queue is None:
            raise RuntimeError("MicroBatcher.search before start()")
        if self.stats.pending_queries + len(queries) > self.max_pending_queries:
            raise ServiceBusyError(
                f"retrieval service busy: {self.stats.pending_queries} queries pending "
                f"(service.max_pending_queries={self.max_pending_queries}); retry later"
            )
        future: asyncio.Future[list[list[Hit]]] = asyncio.get_running_loop().create_future()
        job = SearchJob(
            list(queries), retriever, k, granularity, list(scopes) if scopes else None, future
        )
        self.stats.search_requests += 1
        self.stats.queries += len(job.queries)
        self.stats.pending_queries += len(job.queries)
        self._queue.put_nowait(job)
        try:
            return await future
        finally:
            self.stats.pending_queries -= len(job.queries)

    # ------------------------------------------------------------------ collector

    async def _collect(self) -> None:
        assert self._queue is not None
        loop = asyncio.get_running_loop()
        while True:
            jobs = [await self._queue.get()]
            size = self._drain(jobs, len(jobs[0].queries))
            if size < self.max_batch_queries and self.max_wait_s > 0:
                await asyncio.sleep(self.max_wait_s)
                self._drain(jobs, size)
            self._in_flight = jobs
            try:
                outcomes = await loop.run_in_executor(self._executor, self._run_batch, jobs)
            except Exception as error:  # the worker itself failed: fail the batch, keep serving
                log.exception("search batch failed")
                outcomes = [_Outcome(job, error=error) for job in jobs]
            self._in_flight = []
            for outcome in outcomes:
                if outcome.job.future.done():  # the request was cancelled meanwhile
                    continue
                if outcome.error is not None:
                    outcome.job.future.set_exception(outcome.error)
                else:
                    outcome.job.future.set_result(outcome.hits)

    def _drain(self, jobs: list[SearchJob], size: int) -> int:
        """Move queued jobs into ``jobs`` until the batch is full; returns its query count."""
        assert self._queue is not None
        while size < self.max_batch_queries and not self._queue.empty():
            job = self._queue.get_nowait()
            jobs.append(job)
            size += len(job.queries)
        return size

    # ------------------------------------------------------------------ worker thread

    def _run_batch(self, jobs: list[SearchJob]) -> list[_Outcome]:
        groups: dict[object, list[SearchJob]] = {}
        for job in jobs:
            key = (job.retriever, job.k, job.granularity) if self.merge_requests else id(job)
            groups.setdefault(key, []).append(job)
        outcomes: list[_Outcome] = []
        for group in groups.values():
            try:
                outcomes += self._search_group(group)
            except Exception as error:
                if len(group) == 1:
                    outcomes.append(_Outcome(group[0], error=error))
                    continue
                # One bad request must not fail the others: search each alone.
                for job in group:
                    try:
                        outcomes += self._search_group([job])
                    except Exception as job_error:
                        outcomes.append(_Outcome(job, error=job_error))
        return outcomes

    def _search_group(self, jobs: list[SearchJob]) -> list[_Outcome]:
        """ONE ``index.search`` over the queries of ``jobs`` (same retriever, k, granularity)."""
        first = jobs[0]
        queries = [q for job in jobs for q in job.queries]
        scopes: list[np.ndarray | None] | None = None
        if any(job.scopes is not None for job in jobs):
            scopes = []
            for job in jobs:
                scopes += job.scopes if job.scopes is not None else [None] * len(job.queries)
        hits = self.index.search(queries, first.retriever, first.k, first.granularity, scopes)
        self.stats.batches += 1
        self.stats.largest_batch = max(self.stats.largest_batch, len(queries))
        outcomes = []
        start = 0
        for job in jobs:
            stop = start + len(job.queries)
            outcomes.append(_Outcome(job, hits=hits[start:stop]))
            start = stop
        return outcomes
