"""The retrieval service seen as an index, and the one place that picks local or remote search.

``open_index(config, directory, questions)`` returns a ``CorpusIndex`` loaded in this process,
or, when ``config.remote_url`` is set, a ``RemoteIndex`` over a running
``scripts/serve_retrieval.py``. Both give the environment what it uses: ``search`` (the same
``Hit`` lists) and ``corpus``.

The corpus (sentence texts, paragraph ids, each question's paragraphs: a few MB for a dev
split, a few hundred for a pooled train split) is what the environment reads on every turn:
gold paragraph ids, per-question scopes, read_paragraph, id checks. ``RemoteIndex`` therefore
fetches its three Parquet files from the service once, checks them against the manifest's
checksums and holds them here; only searches travel, so the training node needs neither the
index files nor a shared file system, and it never loads the encoder, FAISS or BM25.

Requests time out after ``timeout_s`` and are retried with exponential backoff when the
service is unreachable or answers 5xx (it restarts, it is busy); a 4xx is the caller's
mistake and is raised at once with the service's message, which names the field.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

import numpy as np
import requests

from grasp.corpus.bm25 import BM25Config
from grasp.corpus.build import IndexConfig, build_index
from grasp.corpus.corpus import CORPUS_FILES, SentenceCorpus
from grasp.corpus.dense import DenseIndexConfig
from grasp.corpus.encoder import EncoderConfig
from grasp.corpus.index import CorpusIndex, Scope, SearchIndex, check_search
from grasp.corpus.manifest import IndexCorruptError, IndexMismatchError, Manifest
from grasp.serve.config import PROTOCOL_VERSION
from grasp.types import Granularity, Hit, Question, Retriever

log = logging.getLogger(__name__)

MAX_BACKOFF_S = 10.0
"""Longest wait between two attempts."""
REQUEST_OVERHEAD_BYTES = 1024
"""Room kept in a search body for everything but its queries and scopes (keys, k, ...)."""
SEARCH_FIELDS = (
    "encoder.query_prefix",
    "encoder.query_prompt_name",
    "dense.hnsw_ef_search",
    "dense.ivf_nprobe",
    "fusion.method",
    "fusion.depth",
    "fusion.rrf_k",
    "fusion.dense_weight",
    "fusion.bm25_weight",
)
"""Search-time settings that change results: the client's and the service's must agree."""


class RetrievalServiceError(RuntimeError):
    """Base class of the retrieval client's errors."""


class ServiceUnavailableError(RetrievalServiceError):
    """The service could not be reached, or kept failing (5xx), through every retry."""


class ServiceIndexChangedError(RetrievalServiceError, IndexMismatchError):
    """The service answered from another index than the one this client connected to.

    A service restarted over another index directory on the same address would otherwise
    answer with paragraph ids of another corpus than the client's copy: gold matching,
    reads and rewards would be silently wrong.
    """


class ServiceRequestError(RetrievalServiceError, ValueError):
    """The service refused a request (4xx); the message names the field at fault."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class RemoteParagraph:
    """A paragraph as ``read_paragraph`` shows it."""

    paragraph_id: int
    title: str
    sentences: tuple[str, ...]
    first_sentence_id: int
    """Sentence ids run from here, one per sentence."""


class ServiceConnection:
    """HTTP to one service: JSON calls with a timeout, retries and backoff; thread-safe."""

    def __init__(
        self, url: str, timeout_s: float = 60.0, retries: int = 5, backoff_s: float = 0.5
    ) -> None:
        if retries < 0:
            raise ValueError(f"retries must be >= 0, got {retries}")
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_s = backoff_s
        self._local = threading.local()
        self._sessions: list[requests.Session] = []
        self._lock = threading.Lock()

    def _session(self) -> requests.Session:
        # requests.Session is not documented thread-safe: one per thread.
        session = getattr(self._local, "session", None)
        if session is None:
            session = requests.Session()
            self._local.session = session
            with self._lock:
                self._sessions.append(session)
        return session

    def close(self) -> None:
        with self._lock:
            for session in self._sessions:
                session.close()
            self._sessions.clear()
        self._local = threading.local()

    def request(
        self, method: str, path: str, payload: Any = None, stream: bool = False
    ) -> requests.Response:
        """A successful response; retries connection errors, timeouts and 5xx answers."""
        url = self.url + path
        attempts = self.retries + 1
        problem = ""
        for attempt in range(attempts):
            if attempt:
                delay = min(self.backoff_s * 2 ** (attempt - 1), MAX_BACKOFF_S)
                log.warning(
                    "%s %s: %s; retry %d/%d in %.2fs",
                    method,
                    url,
                    problem,
                    attempt,
                    self.retries,
                    delay,
                )
                time.sleep(delay)
            try:
                response = self._session().request(
                    method, url, json=payload, timeout=self.timeout_s, stream=stream
                )
            except (requests.ConnectionError, requests.Timeout) as error:
                problem = f"{type(error).__name__}: {error}"
                continue
            if response.status_code >= 500:
                problem = f"HTTP {response.status_code}: {_detail(response)}"
                response.close()
                continue
            if response.status_code >= 400:
                raise ServiceRequestError(
                    f"retrieval service at {url} refused the request "
                    f"(HTTP {response.status_code}): {_detail(response)}",
                    response.status_code,
                )
            return response
        raise ServiceUnavailableError(
            f"retrieval service at {url} failed after {attempts} attempts ({problem}). "
            "Is it running? Start it with: python scripts/serve_retrieval.py index_dir=..., "
            "or correct index.remote_url"
        )

    def get(self, path: str) -> Any:
        return self.request("GET", path).json()

    def post(self, path: str, payload: Any) -> Any:
        return self.request("POST", path, payload).json()

    def download(self, path: str, destination: Path) -> str:
        """Write the response body of ``GET path`` to ``destination``; returns its SHA-256."""
        digest = hashlib.sha256()
        with self.request("GET", path, stream=True) as response, destination.open("wb") as out:
            for block in response.iter_content(chunk_size=1 << 20):
                digest.update(block)
                out.write(block)
        return digest.hexdigest()


class ServiceHealth(TypedDict):
    """The service's ``GET /health`` (``grasp.serve.protocol.HealthResponse``, as JSON)."""

    status: str
    index_dir: str
    build_key: str
    corpus_fingerprint: str
    manifest_sha256: str
    num_sentences: int
    num_paragraphs: int
    num_questions: int
    granularities: list[str]
    dimension: int
    encoder: str
    uptime_s: float
    stats: dict[str, int]
    """``grasp.serve.protocol.ServiceStats``: counters since the service started."""


class RemoteIndex:
    """A running retrieval service, with the search API and attributes of ``CorpusIndex``.

    Connect with ``RemoteIndex.connect(url, config)``. ``search`` returns the same ``Hit``
    lists as ``CorpusIndex.search`` on the service's index; lists longer than the service's
    ``max_queries_per_request`` are sent in several requests.
    """

    def __init__(
        self,
        connection: ServiceConnection,
        manifest: Manifest,
        config: IndexConfig,
        limits: dict[str, Any],
        corpus: SentenceCorpus,
        directory: str,
    ) -> None:
        self.connection = connection
        self.url = connection.url
        self.manifest = manifest
        self.config = config
        """The service's index config (search-time settings included)."""
        self.limits = limits
        """The service's ``ServiceConfig``, as a dict."""
        self.corpus = corpus
        self.directory = directory
        """The index directory on the service's machine."""
        self.granularities = [Granularity(g) for g in manifest.config["granularities"]]

    @classmethod
    def connect(
        cls,
        url: str,
        config: IndexConfig | None = None,
        timeout_s: float = 60.0,
        retries: int = 5,
        backoff_s: float = 0.5,
    ) -> RemoteIndex:
        """Connect, check the service's index against ``config``, and fetch the corpus.

        Raises ServiceUnavailableError when the service cannot be reached, IndexMismatchError
        naming the field when the service's index was built or is searched differently from
        ``config``, and IndexCorruptError when a fetched corpus file differs from the manifest.
        """
        connection = ServiceConnection(url, timeout_s, retries, backoff_s)
        info = connection.get("/info")
        if info.get("protocol_version") != PROTOCOL_VERSION:
            raise RetrievalServiceError(
                f"retrieval service at {connection.url} speaks protocol "
                f"{info.get('protocol_version')}, this client {PROTOCOL_VERSION}: "
                "run the same grasp version on both sides"
            )
        manifest = Manifest(**info["manifest"])
        served = index_config_from_dict(info["config"])
        if config is not None:
            _check_same_index(connection.url, manifest, served, config)
        corpus = fetch_corpus(connection, manifest)
        health = connection.get("/health")
        check_build_key(connection.url, "/health", manifest.build_key, health)
        log.info(
            "retrieval service %s: %s (%d sentences, %d paragraphs)",
            connection.url,
            health["index_dir"],
            corpus.num_sentences,
            corpus.num_paragraphs,
        )
        return cls(connection, manifest, served, info["limits"], corpus, health["index_dir"])

    def search(
        self,
        queries: Sequence[str],
        retriever: Retriever,
        k: int = 5,
        granularity: Granularity = Granularity.SENTENCE,
        scopes: Sequence[Scope] | None = None,
    ) -> list[list[Hit]]:
        """Top-``k`` hits for each query, best first, searched by the service.

        Same arguments, checks and results as ``CorpusIndex.search``.
        """
        check_search(self.url, self.granularities, queries, k, granularity, scopes)
        if not queries:
            return []
        queries = list(queries)
        listed = None
        if scopes is not None:
            listed = [None if s is None else np.asarray(s).tolist() for s in scopes]
        hits: list[list[Hit]] = []
        for start, end in self._request_spans(queries, listed):
            payload: dict[str, Any] = {
                "queries": queries[start:end],
                "retriever": str(retriever),
                "k": k,
                "granularity": str(granularity),
            }
            if listed is not None:
                payload["scopes"] = listed[start:end]
            reply = self.connection.post("/search", payload)
            check_build_key(self.url, "/search", self.manifest.build_key, reply)
            hits += [[_hit(record) for record in row] for row in reply["hits"]]
        return hits

    def _request_spans(
        self, queries: list[str], scopes: list[list[int] | None] | None
    ) -> list[tuple[int, int]]:
        """(start, end) of the queries each request carries: at most the service's
        ``max_queries_per_request``, and a JSON body under its ``max_request_bytes``."""
        step = int(self.limits["max_queries_per_request"])
        budget = int(self.limits.get("max_request_bytes", 0)) - REQUEST_OVERHEAD_BYTES
        spans, start, size = [], 0, 0
        for end, query in enumerate(queries):
            item = len(json.dumps(query)) + 2
            if scopes is not None:
                item += len(json.dumps(scopes[end])) + 2
            if end > start and (end - start == step or (budget > 0 and size + item > budget)):
                spans.append((start, end))
                start, size = end, 0
            size += item
        spans.append((start, len(queries)))
        return spans

    def read_paragraphs(self, paragraph_ids: Sequence[int]) -> list[RemoteParagraph]:
        """Title, sentences and first sentence id of each paragraph, from the service."""
        ids = [int(p) for p in paragraph_ids]
        step = int(self.limits["max_paragraphs_per_request"])
        records: list[RemoteParagraph] = []
        for start in range(0, len(ids), step):
            data = self.connection.post("/paragraphs", {"paragraph_ids": ids[start : start + step]})
            check_build_key(self.url, "/paragraphs", self.manifest.build_key, data)
            records += [
                RemoteParagraph(
                    paragraph_id=r["paragraph_id"],
                    title=r["title"],
                    sentences=tuple(r["sentences"]),
                    first_sentence_id=r["first_sentence_id"],
                )
                for r in data["paragraphs"]
            ]
        return records

    def health(self) -> ServiceHealth:
        """The service's ``GET /health``: index, sizes and batching counters."""
        return self.connection.get("/health")

    def warm_up(self) -> RemoteIndex:
        """Nothing to load here: the service warms its encoder up when it starts."""
        return self

    def close(self) -> None:
        self.connection.close()


def open_index(
    config: IndexConfig,
    directory: Path,
    questions: Sequence[Question] | None = None,
    source: dict[str, Any] | None = None,
) -> SearchIndex:
    """The index a configuration asks for: local ``CorpusIndex`` or ``RemoteIndex``.

    Without ``config.remote_url``: build (or reuse) the index of ``questions`` in
    ``directory`` when questions are given, then load it. With it: connect to the service
    and, when questions are given, check that it serves exactly their pooled corpus
    (IndexMismatchError otherwise); ``directory`` is then unused.
    """
    if not config.remote_url:
        if questions is not None:
            build_index(questions, config, directory, source=source)
        return CorpusIndex.load(directory, config)
    index = RemoteIndex.connect(
        config.remote_url, config, timeout_s=config.remote_timeout_s, retries=config.remote_retries
    )
    if questions is not None:
        expected = SentenceCorpus.from_questions(questions).fingerprint()
        served = index.manifest.corpus["fingerprint"]
        if served != expected:
            raise IndexMismatchError(
                f"the retrieval service at {index.url} serves {index.directory} (corpus "
                f"{served}, source {index.manifest.corpus.get('source')}), not the pooled "
                f"corpus of these questions ({expected}): point index.remote_url at a "
                "service over the matching index"
            )
    return index


def check_build_key(url: str, path: str, expected: str, reply: Any) -> None:
    """Raise ServiceIndexChangedError unless ``reply`` names the build key ``expected``."""
    served = reply.get("build_key") if isinstance(reply, dict) else None
    if served != expected:
        raise ServiceIndexChangedError(
            f"retrieval service at {url}{path} answered from index {served!r}, not from "
            f"{expected!r}, the index this client connected to (the service was restarted "
            "over another index directory?): its paragraph ids would name other paragraphs "
            "than this client's corpus. Restart the service over the index it served, or "
            "start this run again to connect to the new one"
        )


def fetch_corpus(connection: ServiceConnection, manifest: Manifest) -> SentenceCorpus:
    """Download the service's corpus files, check them against ``manifest``, and load them."""
    with tempfile.TemporaryDirectory(prefix="grasp-corpus-") as tmp:
        folder = Path(tmp)
        for name in CORPUS_FILES:
            expected = manifest.files.get(f"corpus/{name}")
            if expected is None:
                raise IndexCorruptError(f"{connection.url}: the manifest lists no corpus/{name}")
            path = folder / name
            digest = connection.download(f"/corpus/{name}", path)
            if path.stat().st_size != expected["bytes"] or digest != expected["sha256"]:
                raise IndexCorruptError(
                    f"{connection.url}/corpus/{name} does not match the manifest's size and "
                    "checksum (changed on the service since it started?)"
                )
        corpus = SentenceCorpus.load(folder)
    if corpus.fingerprint() != manifest.corpus["fingerprint"]:
        raise IndexCorruptError(f"{connection.url}: the corpus differs from its manifest")
    return corpus


def index_config_from_dict(data: dict[str, Any]) -> IndexConfig:
    """An ``IndexConfig`` from ``dataclasses.asdict`` output (unknown keys ignored)."""
    nested = {"encoder": EncoderConfig, "dense": DenseIndexConfig, "bm25": BM25Config}
    values: dict[str, Any] = {}
    for item in dataclasses.fields(IndexConfig):
        if item.name not in data:
            continue
        if item.name in nested:
            values[item.name] = _known_fields(nested[item.name], data[item.name])
        else:
            values[item.name] = data[item.name]
    return IndexConfig(**values)


def _known_fields(cls: type, data: dict[str, Any]) -> Any:
    names = {item.name for item in dataclasses.fields(cls)}
    return cls(**{key: value for key, value in data.items() if key in names})


def _check_same_index(
    url: str, manifest: Manifest, served: IndexConfig, config: IndexConfig
) -> None:
    try:
        manifest.check_config(config.build_fields())
    except IndexMismatchError as error:
        raise IndexMismatchError(f"retrieval service at {url}: {error}") from None
    for name in SEARCH_FIELDS:
        group, field_name = name.split(".")
        ours = getattr(getattr(config, group), field_name)
        theirs = getattr(getattr(served, group), field_name)
        if ours != theirs:
            raise IndexMismatchError(
                f"retrieval service at {url} searches with index.{name}={theirs!r} but the "
                f"configuration asks for index.{name}={ours!r}; start the service with the "
                "same index config"
            )


def _hit(record: dict[str, Any]) -> Hit:
    return Hit(
        paragraph_id=record["paragraph_id"],
        sentence_id=record["sentence_id"],
        title=record["title"],
        text=record["text"],
        score=float(record["score"]),
        retriever=Retriever(record["retriever"]),
        rank=record["rank"],
    )


def _detail(response: requests.Response) -> str:
    """The service's error message: FastAPI's ``detail``, fields named ``a.b: message``."""
    try:
        data = response.json()
    except ValueError:
        return response.text[:500] or response.reason
    detail = data.get("detail") if isinstance(data, dict) else data
    if isinstance(detail, list):
        parts = []
        for error in detail:
            loc = [str(p) for p in error.get("loc", [])[1:]]  # drop "body"
            parts.append(f"{'.'.join(loc) or 'request'}: {error.get('msg')}")
        return "; ".join(parts)
    return str(detail)
