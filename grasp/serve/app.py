"""The retrieval service: a FastAPI app over one loaded ``CorpusIndex``.

Run it with ``python scripts/serve_retrieval.py index_dir=indexes/hotpotqa-dev``; the
endpoints and their JSON are described in ``grasp.serve.protocol``. Searches go through the
``MicroBatcher``, so concurrent requests share encoder passes. Every bound of a request is
checked before it is queued, and a request outside them is answered 422 with a message that
names the field (FastAPI's own format: ``{"detail": [{"loc": ["body", field], "msg": ...}]}``).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, TypedDict

import numpy as np
from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse

from grasp.corpus.corpus import CORPUS_FILES
from grasp.corpus.index import CorpusIndex
from grasp.corpus.manifest import MANIFEST_FILE, file_sha256
from grasp.serve.batcher import MicroBatcher, ServiceBusyError
from grasp.serve.body_limit import BodyLimit
from grasp.serve.config import ServiceConfig
from grasp.serve.protocol import (
    PROTOCOL_VERSION,
    HealthResponse,
    InfoResponse,
    ReadRequest,
    ReadResponse,
    SearchRequest,
    SearchResponse,
)
from grasp.types import Hit

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


@dataclass
class _Service:
    index: CorpusIndex
    config: ServiceConfig
    batcher: MicroBatcher
    manifest_sha256: str
    started: float


def create_app(index: CorpusIndex, config: ServiceConfig | None = None) -> FastAPI:
    """The service over ``index``; the batcher starts and stops with the app's lifespan."""
    config = config or ServiceConfig()
    service = _Service(
        index=index,
        config=config,
        batcher=MicroBatcher(
            index,
            max_batch_queries=config.max_batch_queries,
            max_wait_ms=config.max_wait_ms,
            max_pending_queries=config.max_pending_queries,
            merge_requests=config.merge_requests,
        ),
        manifest_sha256=file_sha256(index.directory / MANIFEST_FILE),
        started=time.monotonic(),
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await service.batcher.start()
        yield
        await service.batcher.close()

    app = FastAPI(title="grasp retrieval service", lifespan=lifespan)
    app.add_middleware(BodyLimit, max_bytes=config.max_request_bytes)

    @app.exception_handler(Exception)
    async def internal_error(request: Request, error: Exception) -> JSONResponse:
        # The message travels to the client, which names it in the error it raises.
        return JSONResponse({"detail": f"{type(error).__name__}: {error}"}, status_code=500)

    @app.post("/search", response_model=SearchResponse)
    async def search(request: SearchRequest) -> dict[str, Any]:
        """Top-k hits per query, exactly as ``CorpusIndex.search`` returns them."""
        scopes = None
        if request.scopes is not None:
            scopes = _scope_arrays(request.scopes, service.index.corpus.num_paragraphs)
        _raise_invalid(_search_errors(request, scopes, service))
        try:
            hits = await service.batcher.search(
                request.queries, request.retriever, request.k, request.granularity, scopes
            )
        except ServiceBusyError as error:
            raise HTTPException(status_code=503, detail=str(error)) from error
        return {
            "hits": [[_hit_record(hit) for hit in row] for row in hits],
            "build_key": service.index.manifest.build_key,
        }

    @app.post("/paragraphs", response_model=ReadResponse)
    async def paragraphs(request: ReadRequest) -> dict[str, Any]:
        """Title, sentences and first sentence id of each paragraph (what read_paragraph shows)."""
        _raise_invalid(_read_errors(request, service))
        corpus = service.index.corpus
        records = []
        for paragraph_id in request.paragraph_ids:
            records.append(
                {
                    "paragraph_id": paragraph_id,
                    "title": corpus.title(paragraph_id),
                    "sentences": corpus.paragraph_sentences(paragraph_id),
                    "first_sentence_id": corpus.sentence_ids(paragraph_id).start,
                }
            )
        return {"paragraphs": records, "build_key": service.index.manifest.build_key}

    @app.get("/health", response_model=HealthResponse)
    async def health() -> dict[str, Any]:
        """Which index is served, its sizes, and the batcher's counters."""
        manifest = service.index.manifest
        return {
            "status": "ok",
            "index_dir": str(service.index.directory),
            "build_key": manifest.build_key,
            "corpus_fingerprint": manifest.corpus["fingerprint"],
            "manifest_sha256": service.manifest_sha256,
            "num_sentences": manifest.corpus["num_sentences"],
            "num_paragraphs": manifest.corpus["num_paragraphs"],
            "num_questions": manifest.corpus["num_questions"],
            "granularities": service.index.granularities,
            "dimension": manifest.dimension,
            "encoder": service.index.config.encoder.model,
            "uptime_s": time.monotonic() - service.started,
            "stats": dataclasses.asdict(service.batcher.stats),
        }

    @app.get("/info", response_model=InfoResponse)
    async def info() -> dict[str, Any]:
        """The manifest, the index config and the limits: what a client checks on connecting."""
        return {
            "protocol_version": PROTOCOL_VERSION,
            "manifest": dataclasses.asdict(service.index.manifest),
            "config": dataclasses.asdict(service.index.config),
            "limits": dataclasses.asdict(service.config),
        }

    @app.get("/corpus/{name}")
    async def corpus_file(name: str) -> FileResponse:
        """One corpus Parquet file as built; the client checks it against the manifest."""
        if name not in CORPUS_FILES:
            raise HTTPException(
                status_code=404, detail=f"no corpus file {name!r}; the files are {CORPUS_FILES}"
            )
        return FileResponse(service.index.directory / "corpus" / name)

    return app


def _hit_record(hit: Hit) -> dict[str, Any]:
    return {
        "paragraph_id": hit.paragraph_id,
        "sentence_id": hit.sentence_id,
        "title": hit.title,
        "text": hit.text,
        "score": hit.score,
        "retriever": hit.retriever,
        "rank": hit.rank,
    }


class FieldError(TypedDict):
    """One error of a request, as FastAPI reports a validation error."""

    type: str
    loc: tuple[str | int, ...]
    """``body``, then the field's path."""
    msg: str


def _error(field: str | tuple[str | int, ...], message: str) -> FieldError:
    loc = (field,) if isinstance(field, str) else field
    return {"type": "value_error", "loc": ("body", *loc), "msg": message}


def _raise_invalid(errors: list[FieldError]) -> None:
    if errors:
        raise RequestValidationError(errors)


def _search_errors(
    request: SearchRequest, scopes: list[np.ndarray | None] | None, service: _Service
) -> list[FieldError]:
    """Every bound of a search request the service enforces, as FastAPI-style errors."""
    limits, index = service.config, service.index
    errors = []
    n = len(request.queries)
    if n == 0:
        errors.append(_error("queries", "no queries; send at least one"))
    if n > limits.max_queries_per_request:
        errors.append(
            _error(
                "queries",
                f"{n} queries, at most {limits.max_queries_per_request} per request "
                "(service.max_queries_per_request); split the list",
            )
        )
    for i, query in enumerate(request.queries):
        if len(query) > limits.max_query_chars:
            errors.append(
                _error(
                    ("queries", i),
                    f"{len(query)} characters, at most {limits.max_query_chars} "
                    "(service.max_query_chars)",
                )
            )
            break
    if not 1 <= request.k <= limits.max_k:
        errors.append(
            _error("k", f"must be between 1 and {limits.max_k} (service.max_k), got {request.k}")
        )
    if request.granularity not in index.granularities:
        built = ", ".join(str(g) for g in index.granularities)
        errors.append(
            _error(
                "granularity",
                f"{str(request.granularity)!r} is not built in this index (built: {built})",
            )
        )
    if scopes is not None:
        errors += _scope_errors(scopes, n, limits, index.corpus.num_paragraphs)
    return errors


def _scope_arrays(scopes: list[list[int] | None], num_paragraphs: int) -> list[np.ndarray | None]:
    """Each scope as int64 ids; an id no int64 holds is refused (422) naming its place."""
    arrays: list[np.ndarray | None] = []
    for i, scope in enumerate(scopes):
        if scope is None:
            arrays.append(None)
            continue
        try:
            arrays.append(np.asarray(scope, dtype=np.int64))
        except OverflowError:
            j = next(j for j, p in enumerate(scope) if not _INT64_MIN <= p <= _INT64_MAX)
            raise RequestValidationError(
                [_error(("scopes", i, j), _out_of_range(scope[j], num_paragraphs))]
            ) from None
    return arrays


def _out_of_range(paragraph_id: int, num_paragraphs: int) -> str:
    return (
        f"paragraph id {clip_number(paragraph_id)} out of range "
        f"(the index has {num_paragraphs} paragraphs)"
    )


def clip_number(value: int, digits: int = 24) -> str:
    """``value`` in decimal, its middle cut when longer than ``digits`` (a 5,000-digit id
    must not become a 5,000-character message)."""
    text = str(value)
    if len(text) <= digits:
        return text
    return f"{text[: digits // 2]}...{text[-digits // 2 :]} ({len(text.lstrip('-'))} digits)"


def _scope_errors(
    scopes: list[np.ndarray | None], num_queries: int, limits: ServiceConfig, num_paragraphs: int
) -> list[FieldError]:
    if len(scopes) != num_queries:
        return [_error("scopes", f"{len(scopes)} scopes for {num_queries} queries")]
    for i, scope in enumerate(scopes):
        if scope is None:
            continue
        if len(scope) > limits.max_scope_paragraphs:
            return [
                _error(
                    ("scopes", i),
                    f"{len(scope)} paragraph ids, at most {limits.max_scope_paragraphs} "
                    "(service.max_scope_paragraphs)",
                )
            ]
        outside = (scope < 0) | (scope >= num_paragraphs)
        if outside.any():
            j = int(np.argmax(outside))
            return [_error(("scopes", i, j), _out_of_range(int(scope[j]), num_paragraphs))]
    return []


def _read_errors(request: ReadRequest, service: _Service) -> list[FieldError]:
    limits = service.config
    num_paragraphs = service.index.corpus.num_paragraphs
    n = len(request.paragraph_ids)
    if n > limits.max_paragraphs_per_request:
        return [
            _error(
                "paragraph_ids",
                f"{n} paragraph ids, at most {limits.max_paragraphs_per_request} per request "
                "(service.max_paragraphs_per_request)",
            )
        ]
    for i, paragraph_id in enumerate(request.paragraph_ids):
        if not 0 <= paragraph_id < num_paragraphs:
            return [_error(("paragraph_ids", i), _out_of_range(paragraph_id, num_paragraphs))]
    return []
