"""The micro-batcher: concurrent requests become one search per (retriever, k, granularity).

Requests are submitted with ``asyncio.gather``, so all of them are queued before the
collector runs: the number of ``index.search`` calls is then exact, not a matter of timing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import numpy as np
import pytest

from grasp.corpus import CorpusIndex
from grasp.serve.batcher import MicroBatcher, ServiceBusyError
from grasp.types import Granularity, Retriever


class RecordingIndex:
    """The real tiny index, recording the size and kind of every search call."""

    def __init__(self, index: CorpusIndex) -> None:
        self.index = index
        self.corpus = index.corpus
        self.granularities = index.granularities
        self.calls: list[tuple[int, Retriever, int, Granularity]] = []

    def search(self, queries, retriever, k=5, granularity=Granularity.SENTENCE, scopes=None):
        self.calls.append((len(queries), retriever, k, granularity))
        return self.index.search(queries, retriever, k, granularity, scopes)

    def warm_up(self) -> RecordingIndex:
        return self


Request = tuple[list[str], Retriever, int, Granularity, Sequence | None]


def run_concurrently(batcher: MicroBatcher, requests: list[Request]) -> list:
    async def main() -> list:
        await batcher.start()
        try:
            return await asyncio.gather(
                *(batcher.search(*request) for request in requests), return_exceptions=True
            )
        finally:
            await batcher.close()

    return asyncio.run(main())


def test_concurrent_requests_share_one_search_per_kind(service_index):
    index = RecordingIndex(service_index)
    dense = [(["capital of Poland", "Nobel Prize"], Retriever.DENSE, 3, Granularity.SENTENCE, None)]
    dense += [(["Everest summit"], Retriever.DENSE, 3, Granularity.SENTENCE, None)]
    keyword = [([q], Retriever.BM25, 2, Granularity.PARAGRAPH, None) for q in ("river", "Google")]
    requests = [dense[0], keyword[0], dense[1], keyword[1]]
    results = run_concurrently(MicroBatcher(index, max_wait_ms=1), requests)
    assert sorted(index.calls) == sorted(
        [
            (3, Retriever.DENSE, 3, Granularity.SENTENCE),
            (2, Retriever.BM25, 2, Granularity.PARAGRAPH),
        ]
    )
    merged = service_index.search(
        ["capital of Poland", "Nobel Prize", "Everest summit"], Retriever.DENSE, 3
    )
    assert results[0] == merged[:2] and results[2] == merged[2:]  # split back in order
    assert results[1] == service_index.search(["river"], Retriever.BM25, 2, Granularity.PARAGRAPH)
    assert results[3] == service_index.search(["Google"], Retriever.BM25, 2, Granularity.PARAGRAPH)


def test_a_batch_closes_at_max_batch_queries_without_splitting_a_request(service_index):
    index = RecordingIndex(service_index)
    requests = [
        ([f"q{i}a", f"q{i}b"], Retriever.BM25, 2, Granularity.SENTENCE, None) for i in range(5)
    ]
    batcher = MicroBatcher(index, max_batch_queries=4, max_wait_ms=1)
    results = run_concurrently(batcher, requests)
    assert [call[0] for call in index.calls] == [4, 4, 2]
    assert batcher.stats.batches == 3 and batcher.stats.largest_batch == 4
    assert batcher.stats.search_requests == 5 and batcher.stats.queries == 10
    assert batcher.stats.pending_queries == 0
    assert all(len(r) == 2 for r in results)


def test_without_merging_every_request_is_its_own_search(service_index):
    index = RecordingIndex(service_index)
    requests = [([q], Retriever.DENSE, 2, Granularity.SENTENCE, None) for q in ("a", "b", "c")]
    results = run_concurrently(MicroBatcher(index, merge_requests=False, max_wait_ms=1), requests)
    assert [call[0] for call in index.calls] == [1, 1, 1]
    for (queries, *_), found in zip(requests, results, strict=True):
        assert found == service_index.search(queries, Retriever.DENSE, 2)  # bitwise


def test_scoped_and_unscoped_requests_merge(service_index):
    index = RecordingIndex(service_index)
    scope = service_index.corpus.question_scope("q-python")
    requests = [
        (["Who worked at Google?"], Retriever.DENSE, 2, Granularity.SENTENCE, [scope]),
        (["Who worked at Google?"], Retriever.DENSE, 2, Granularity.SENTENCE, None),
    ]
    results = run_concurrently(MicroBatcher(index, max_wait_ms=1), requests)
    assert len(index.calls) == 1
    expected = service_index.search(
        ["Who worked at Google?"] * 2, Retriever.DENSE, 2, scopes=[scope, None]
    )
    assert results == [expected[:1], expected[1:]]


def test_a_failing_request_fails_alone(service_index):
    index = RecordingIndex(service_index)
    bad_scope = np.array([10_000])  # beyond the corpus: the index raises IndexError
    requests = [
        (["capital of Poland"], Retriever.BM25, 2, Granularity.SENTENCE, None),
        (["capital of Poland"], Retriever.BM25, 2, Granularity.SENTENCE, [bad_scope]),
        (["Nobel Prize"], Retriever.BM25, 2, Granularity.SENTENCE, None),
    ]
    results = run_concurrently(MicroBatcher(index, max_wait_ms=1), requests)
    assert isinstance(results[1], IndexError)
    assert results[0] == service_index.search(["capital of Poland"], Retriever.BM25, 2)
    assert results[2] == service_index.search(["Nobel Prize"], Retriever.BM25, 2)
    assert [call[0] for call in index.calls] == [3, 1, 1, 1]  # merged try, then one by one


def test_too_many_pending_queries_are_refused(service_index):
    batcher = MicroBatcher(RecordingIndex(service_index), max_pending_queries=2)
    results = run_concurrently(
        batcher,
        [
            (["a", "b"], Retriever.BM25, 1, Granularity.SENTENCE, None),
            (["c"], Retriever.BM25, 1, Granularity.SENTENCE, None),
        ],
    )
    assert len(results[0]) == 2
    assert isinstance(results[1], ServiceBusyError)
    assert "2 queries pending (service.max_pending_queries=2)" in str(results[1])


def test_search_before_start_is_an_error(service_index):
    batcher = MicroBatcher(RecordingIndex(service_index))
    with pytest.raises(RuntimeError, match="before start"):
        asyncio.run(batcher.search(["x"], Retriever.BM25, 1, Granularity.SENTENCE))
