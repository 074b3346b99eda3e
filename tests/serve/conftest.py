"""Fixtures of the service tests: the real app on a loopback port, over the tiny index.

The service gets its own ``CorpusIndex`` (loaded from the same directory as ``tiny_index``),
so that the service's worker thread and the tests' in-process searches never share one
index object.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from service_fixture import TEST_LIMITS, serve

from grasp.corpus import CorpusIndex, IndexConfig
from grasp.serve.client import RemoteIndex


@pytest.fixture(scope="session")
def service_index(tiny_index_dir: Path) -> CorpusIndex:
    return CorpusIndex.load(tiny_index_dir).warm_up()


@pytest.fixture(scope="session")
def service_url(service_index: CorpusIndex) -> Iterator[str]:
    with serve(service_index, TEST_LIMITS) as url:
        yield url


@pytest.fixture(scope="session")
def remote(service_url: str) -> Iterator[RemoteIndex]:
    index = RemoteIndex.connect(service_url, IndexConfig(), retries=2, backoff_s=0.01)
    yield index
    index.close()
