"""Settings of the retrieval service (request bounds, cross-request batching), and its protocol version.

Kept apart from the FastAPI app so that configs (``grasp.config``) can name them without
importing the web stack.
"""

from __future__ import annotations

from dataclasses import dataclass

PROTOCOL_VERSION = 2
"""Version of the service's JSON protocol; bumped whenever a request or response changes.
2: every search and read reply names the build key of the index that answered it."""


@dataclass
class ServiceConfig:
    """What one request may ask of the retrieval service, and how requests are batched."""

    max_queries_per_request: int = 1024
    """Queries one search request may carry (the client splits longer lists)."""
    max_query_chars: int = 4096
    """Characters one query may have."""
    max_k: int = 100
    """Largest k a search may ask for."""
    max_scope_paragraphs: int = 10_000
    """Paragraph ids one query's scope may list."""
    max_paragraphs_per_request: int = 1024
    """Paragraph ids one read request may ask for."""
    max_request_bytes: int = 8 * 1024 * 1024
    """Bytes one request body may have; a larger body is refused (413) before it is read.
    The client splits its searches to stay under it."""
    max_batch_queries: int = 512
    """A batch closes once it holds this many queries (a request is never split)."""
    max_wait_ms: float = 2.0
    """How long the first request of a batch waits for others to join it."""
    max_pending_queries: int = 65_536
    """Queries waiting for a batch beyond which new requests are answered 503 (busy)."""
    merge_requests: bool = True
    """Search the requests of a batch with one call per (retriever, k, granularity). False:
    one call per request, so that every answer is bitwise the in-process answer of that
    request's queries (a bf16 encoder's vectors shift in the last bit with the batch)."""

    def __post_init__(self) -> None:
        # Checked when the config is built, as every config dataclass checks its own fields:
        # a bad bound fails when the command line is composed, not when the app starts.
        for name in (
            "max_queries_per_request",
            "max_query_chars",
            "max_k",
            "max_scope_paragraphs",
            "max_paragraphs_per_request",
            "max_request_bytes",
            "max_batch_queries",
            "max_pending_queries",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"service.{name} must be at least 1, got {getattr(self, name)}")
        if self.max_wait_ms < 0:
            raise ValueError(f"service.max_wait_ms must be >= 0, got {self.max_wait_ms}")
