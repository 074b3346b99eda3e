"""A bound on the size of a request body, enforced before the body is read.

FastAPI reads a whole body before validating it, so a 100 MB request would be buffered (and
parsed) before any bound of ``grasp.serve.app`` could refuse it. ``BodyLimit`` wraps the app:
a ``Content-Length`` over the bound is answered 413 at once, without reading a byte of the
body, and a chunked body is cut off with 413 as soon as it passes the bound.
"""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodyLimit:
    """ASGI middleware: request bodies of at most ``max_bytes`` reach ``app``; larger: 413."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    def message(self, size: str) -> str:
        return (
            f"request body of {size} bytes, at most {self.max_bytes} "
            "(service.max_request_bytes); split the request"
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.max_bytes:
            response = JSONResponse({"detail": self.message(declared.decode())}, status_code=413)
            await response(scope, receive, send)
            return
        received = 0

        async def bounded_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    # FastAPI passes an HTTPException raised while reading the body through
                    # to its handler, which answers with this status and detail.
                    raise HTTPException(413, detail=self.message(f"more than {self.max_bytes}"))
            return message

        await self.app(scope, bounded_receive, send)
