"""The retrieval service on a loopback port, for the tests: the real app under uvicorn.

``serve`` runs uvicorn in a background thread of the test process, on a socket bound to a free
port before the thread starts, and stops it when the block ends.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn

from grasp.corpus import CorpusIndex
from grasp.serve.app import create_app
from grasp.serve.config import ServiceConfig

TEST_LIMITS = ServiceConfig(
    max_queries_per_request=8,
    max_query_chars=300,
    max_k=10,
    max_scope_paragraphs=6,
    max_paragraphs_per_request=4,
    max_request_bytes=64 * 1024,
)
"""Small bounds, so that the tests reach them (and the client's splitting) with few queries."""


def bound_socket(port: int = 0) -> socket.socket:
    """A socket bound to loopback ``port`` (0: a free one), not yet listening.

    SO_REUSEADDR lets a test start a second service on the port of one it just stopped.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    return sock


@contextmanager
def serve(
    index: CorpusIndex, config: ServiceConfig, sock: socket.socket | None = None
) -> Iterator[str]:
    """Run the service over ``index`` until the block ends; yields its URL."""
    sock = sock or bound_socket()
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(index, config), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 600  # a bound for a loaded machine, not a measured time
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test service did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()
