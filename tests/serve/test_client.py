"""The client's retries, backoff and errors, against a loopback stub and a late real service.

The stub answers from a script of (status, body) pairs and counts the requests it got: the
subject here is the client's retry logic, not the service.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from service_fixture import TEST_LIMITS, bound_socket, serve

from grasp.corpus import IndexConfig
from grasp.serve.client import (
    RemoteIndex,
    ServiceConnection,
    ServiceRequestError,
    ServiceUnavailableError,
    open_index,
)
from grasp.types import Retriever


class StubService:
    """Answers each request with the next scripted (status, JSON body); the last repeats."""

    def __init__(self, script: list[tuple[int, object]]) -> None:
        self.script = script
        self.requests: list[str] = []


@contextmanager
def stub(script: list[tuple[int, object]]) -> Iterator[tuple[str, StubService]]:
    state = StubService(script)

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            state.requests.append(f"{self.command} {self.path}")
            status, body = state.script[min(len(state.requests), len(state.script)) - 1]
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._answer()

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self._answer()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", state
    finally:
        server.shutdown()
        server.server_close()


def test_a_503_is_retried_and_the_second_answer_returned():
    script = [(503, {"detail": "retrieval service busy"}), (200, {"hits": [[]]})]
    with stub(script) as (url, state):
        connection = ServiceConnection(url, retries=3, backoff_s=0.01)
        assert connection.post("/search", {"queries": ["x"]}) == {"hits": [[]]}
    assert state.requests == ["POST /search", "POST /search"]


def test_a_service_that_keeps_failing_is_reported_with_its_url_and_last_error():
    with stub([(500, {"detail": "RuntimeError: boom"})]) as (url, state):
        connection = ServiceConnection(url, retries=2, backoff_s=0.01)
        with pytest.raises(ServiceUnavailableError) as caught:
            connection.get("/health")
    assert len(state.requests) == 3
    message = str(caught.value)
    assert f"{url}/health failed after 3 attempts" in message
    assert "HTTP 500: RuntimeError: boom" in message


def test_a_4xx_is_not_retried():
    detail = [{"loc": ["body", "k"], "msg": "must be between 1 and 100", "type": "value_error"}]
    with stub([(422, {"detail": detail})]) as (url, state):
        connection = ServiceConnection(url, retries=5, backoff_s=0.01)
        with pytest.raises(ServiceRequestError, match=r"HTTP 422\): k: must be between 1 and 100"):
            connection.post("/search", {})
    assert state.requests == ["POST /search"]


def test_an_unreachable_service_names_the_url():
    sock = bound_socket()  # bound, never listening: every connection is refused
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    try:
        with pytest.raises(ServiceUnavailableError, match="failed after 2 attempts") as caught:
            RemoteIndex.connect(url, IndexConfig(), retries=1, backoff_s=0.01)
    finally:
        sock.close()
    message = str(caught.value)
    assert f"retrieval service at {url}/info" in message
    assert "ConnectionError" in message and "index.remote_url" in message


def test_open_index_fails_on_a_wrong_remote_url():
    sock = bound_socket()
    config = IndexConfig(remote_url=f"http://127.0.0.1:{sock.getsockname()[1]}", remote_retries=0)
    try:
        with pytest.raises(ServiceUnavailableError, match=config.remote_url):
            open_index(config, directory=None)  # type: ignore[arg-type]  # unused when remote
    finally:
        sock.close()


def test_the_client_waits_for_a_service_that_comes_up_late(service_index, tiny_index):
    sock = bound_socket()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    ready = threading.Event()
    stop = threading.Event()

    def start_later() -> None:
        ready.wait()
        with serve(service_index, TEST_LIMITS, sock):
            stop.wait()

    starter = threading.Thread(target=start_later, daemon=True)
    starter.start()
    connection = ServiceConnection(url, retries=0)
    with pytest.raises(ServiceUnavailableError):
        connection.get("/health")  # nothing listens yet
    ready.set()  # the service starts now; the client's retries must reach it
    try:
        remote = RemoteIndex.connect(url, IndexConfig(), retries=10, backoff_s=0.05)
        hits = remote.search(["capital of Poland"], Retriever.BM25, k=2)
        assert hits == tiny_index.search(["capital of Poland"], Retriever.BM25, k=2)
        remote.close()
    finally:
        stop.set()
        starter.join(timeout=60)
