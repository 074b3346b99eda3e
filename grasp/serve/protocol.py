"""The retrieval service's wire format: pydantic models of every request and response.

The field names are those of ``grasp.types.Hit`` and ``SentenceCorpus``; the client
(``grasp.serve.client``) reads the same JSON with the standard library, so training nodes
need neither FastAPI nor pydantic.

Endpoints (``grasp.serve.app``):

- ``POST /search``: ``SearchRequest`` -> ``SearchResponse``
- ``POST /paragraphs``: ``ReadRequest`` -> ``ReadResponse``
- ``GET /health``: ``HealthResponse``
- ``GET /info``: ``InfoResponse`` (manifest, index config, limits)
- ``GET /corpus/{file}``: one of the corpus Parquet files, as built
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from grasp.serve.config import PROTOCOL_VERSION
from grasp.types import Granularity, Retriever

__all__ = [
    "PROTOCOL_VERSION",
    "HealthResponse",
    "HitRecord",
    "InfoResponse",
    "ParagraphRecord",
    "ReadRequest",
    "ReadResponse",
    "SearchRequest",
    "SearchResponse",
    "ServiceStats",
]


class SearchRequest(BaseModel):
    """A batch of queries searched with one retriever, k and granularity."""

    queries: list[str]
    retriever: Retriever
    k: int = 5
    granularity: Granularity = Granularity.SENTENCE
    scopes: list[list[int] | None] | None = Field(
        default=None,
        description="Per query: the paragraph ids it may see, or null for the whole corpus.",
    )


class HitRecord(BaseModel):
    """One ``grasp.types.Hit``."""

    paragraph_id: int
    sentence_id: int | None
    title: str
    text: str
    score: float
    retriever: Retriever
    rank: int


class SearchResponse(BaseModel):
    hits: list[list[HitRecord]]
    """One list per query, best first."""
    build_key: str
    """The served index's build key: a client checks that the service still serves the index
    whose corpus it holds (a service restarted over another index must not answer)."""


class ReadRequest(BaseModel):
    paragraph_ids: list[int]


class ParagraphRecord(BaseModel):
    """What ``read_paragraph`` shows of a paragraph."""

    paragraph_id: int
    title: str
    sentences: list[str]
    first_sentence_id: int
    """Sentence ids run from here, one per sentence, in order."""


class ReadResponse(BaseModel):
    paragraphs: list[ParagraphRecord]
    build_key: str
    """As in ``SearchResponse``."""


class ServiceStats(BaseModel):
    """Counters since the service started."""

    search_requests: int
    queries: int
    batches: int
    """Calls to ``CorpusIndex.search``: fewer than requests when requests were merged."""
    largest_batch: int
    """Most queries searched in one call."""
    pending_queries: int


class HealthResponse(BaseModel):
    status: str
    index_dir: str
    build_key: str
    corpus_fingerprint: str
    manifest_sha256: str
    num_sentences: int
    num_paragraphs: int
    num_questions: int
    granularities: list[Granularity]
    dimension: int
    encoder: str
    uptime_s: float
    stats: ServiceStats


class InfoResponse(BaseModel):
    protocol_version: int
    manifest: dict[str, Any]
    """``manifest.json`` as built (the client checks it against its own index config)."""
    config: dict[str, Any]
    """The service's ``IndexConfig``, search-time settings included."""
    limits: dict[str, Any]
    """The service's ``ServiceConfig``."""
