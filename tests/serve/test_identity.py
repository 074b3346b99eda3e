"""The client notices when the service on its address stops being the index it connected to."""

from __future__ import annotations

from pathlib import Path

import pytest
from service_fixture import TEST_LIMITS, bound_socket, serve

from grasp.corpus import CorpusIndex, IndexConfig, IndexMismatchError, build_index
from grasp.serve.client import RemoteIndex, ServiceIndexChangedError
from grasp.types import Retriever


def test_a_service_restarted_over_another_index_is_refused(
    service_index, tiny_questions, tmp_path: Path
):
    """Issue 18 §5 item 1: a connected client must not take hits from another index."""
    other_dir = tmp_path / "other"
    build_index(tiny_questions[:2], IndexConfig(), other_dir)
    other = CorpusIndex.load(other_dir)
    assert other.manifest.build_key != service_index.manifest.build_key
    first = bound_socket()
    port = first.getsockname()[1]
    with serve(service_index, TEST_LIMITS, first) as url:
        remote = RemoteIndex.connect(url, IndexConfig(), retries=2, backoff_s=0.01)
        before = remote.search(["capital of Poland"], Retriever.BM25, k=2)
        assert before == service_index.search(["capital of Poland"], Retriever.BM25, k=2)
        assert remote.read_paragraphs([0])[0].paragraph_id == 0
    remote.connection.retries = 20  # the new service may take a moment to listen
    with serve(other, TEST_LIMITS, bound_socket(port)):
        with pytest.raises(ServiceIndexChangedError, match="answered from index") as caught:
            remote.search(["capital of Poland"], Retriever.BM25, k=2)
        assert isinstance(caught.value, IndexMismatchError)
        message = str(caught.value)
        assert other.manifest.build_key in message
        assert service_index.manifest.build_key in message
        assert f"127.0.0.1:{port}/search" in message
        with pytest.raises(ServiceIndexChangedError, match="/paragraphs"):
            remote.read_paragraphs([0])
    remote.close()
