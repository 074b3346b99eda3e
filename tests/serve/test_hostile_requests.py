"""Requests a hostile client sends: ids no int64 holds, and bodies larger than the service takes.

Raw sockets stand in for the client where a well-behaved HTTP library would not send the
request at all (a ``Content-Length`` far larger than what follows).
"""

from __future__ import annotations

import dataclasses
import re
import socket
from urllib.parse import urlparse

import pytest
import requests
from service_fixture import TEST_LIMITS, serve

from grasp.corpus import IndexConfig
from grasp.serve.client import RemoteIndex
from grasp.types import Retriever


def _post(url: str, body: str) -> requests.Response:
    # The body is written by hand: json.dumps refuses integers over 4,300 digits.
    headers = {"Content-Type": "application/json"}
    return requests.post(url, data=body.encode(), headers=headers, timeout=30)


@pytest.mark.parametrize(
    ("scope", "message"),
    [
        ("[0, 9223372036854775808]", "paragraph id 9223372036854775808 out of range (the index"),
        ("[-9223372036854775809]", "paragraph id -9223372036854775809 out of range"),
        (f"[{'9' * 4300}]", "paragraph id 999999999999...999999999999 (4300 digits) out of range"),
    ],
)
def test_a_scope_id_no_int64_holds_is_refused_naming_it(service_url, scope, message):
    """Issue 18 §5 item 10: 422 (the caller's mistake), not 500 (which clients retry)."""
    body = f'{{"queries": ["capital of Poland"], "retriever": "bm25", "k": 3, "scopes": [{scope}]}}'
    response = _post(service_url + "/search", body)
    assert response.status_code == 422
    [error] = response.json()["detail"]
    assert error["loc"] == ["body", "scopes", 0, scope.count(",")]
    assert error["msg"].startswith(message)
    assert len(error["msg"]) < 200


def test_an_integer_json_cannot_hold_is_a_4xx(service_url):
    body = f'{{"queries": ["x"], "retriever": "bm25", "scopes": [[{"9" * 5000}]]}}'
    assert _post(service_url + "/search", body).status_code == 400


def test_a_huge_read_id_is_refused_with_a_short_message(service_url):
    response = _post(service_url + "/paragraphs", f'{{"paragraph_ids": [{"7" * 4300}]}}')
    assert response.status_code == 422
    [error] = response.json()["detail"]
    assert error["msg"] == (
        "paragraph id 777777777777...777777777777 (4300 digits) out of range "
        "(the index has 8 paragraphs)"
    )


def _raw_request(url: str, head: bytes, body: bytes = b"") -> bytes:
    """Send ``head`` and ``body`` on a fresh connection; the answer's status line, headers and
    body (each read bounded by 10 s)."""
    address = urlparse(url)
    with socket.create_connection((address.hostname, address.port), timeout=10) as sock:
        sock.sendall(head + body)
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = sock.recv(65536)
            if not chunk:
                return answer
            answer += chunk
        headers, _, content = answer.partition(b"\r\n\r\n")
        length = int(re.search(rb"content-length: (\d+)", headers.lower()).group(1))
        while len(content) < length:
            chunk = sock.recv(65536)
            if not chunk:
                break
            content += chunk
        return headers + b"\r\n\r\n" + content


def test_a_declared_100_mb_body_is_refused_before_it_is_read(service_url):
    """Issue 18 §5 item 10: the service answers 413 without waiting for the 100 MB."""
    head = (
        b"POST /search HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
        b"Content-Length: 100000000\r\n\r\n"
    )
    answer = _raw_request(service_url, head, b'{"queries": [')  # and nothing more
    assert answer.startswith(b"HTTP/1.1 413 ")
    assert answer.endswith(
        b"request body of 100000000 bytes, at most 65536 "
        b'(service.max_request_bytes); split the request"}'
    )


def test_a_chunked_body_is_cut_off_at_the_bound(service_url):
    limit = TEST_LIMITS.max_request_bytes
    head = (
        b"POST /search HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n"
    )
    chunk = b"x" * 16384
    body = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(limit // len(chunk) + 1))
    answer = _raw_request(service_url, head, body)
    assert answer.startswith(b"HTTP/1.1 413 ")
    assert answer.endswith(
        b'"detail":"request body of more than 65536 bytes, at most 65536 '
        b'(service.max_request_bytes); split the request"}'
    )


def test_the_client_splits_searches_to_fit_the_body_bound(service_index, tiny_index):
    limits = dataclasses.replace(TEST_LIMITS, max_request_bytes=2048)
    queries = [f"{'capital of Poland ' * 16}{i}" for i in range(8)]  # 291 bytes of JSON each
    with serve(service_index, limits) as url:
        remote = RemoteIndex.connect(url, IndexConfig(), retries=0)
        scopes = [tiny_index.corpus.question_scope("q-curie")] * len(queries)
        hits = remote.search(queries, Retriever.BM25, k=2, scopes=scopes)
        assert hits == tiny_index.search(queries, Retriever.BM25, k=2, scopes=scopes)
        # 2048 - 1024 bytes of room; each query takes 291 + 2, its scope 12 + 2: 3 per request.
        assert remote.health()["stats"]["search_requests"] == 3
        remote.close()
