"""The console's bound on request bodies, for every route: the ASGI server sets none,
and a body read whole before its size is known costs its size in memory (twice, while
its chunks are joined).

Two middlewares hold it, around the authentication middleware:

- `DeclaredBody`, outermost: a body whose Content-Length is past `web.body_cap` is
  refused (413) before any of it is read, before authentication;
- `CountedBody`, innermost: any other body is counted as the route reads it, and the
  read past the cap raises `Refused(413)`, which the app's handler answers; a chunked
  body costs at most the cap and one chunk, never the whole body. It sits inside the
  authentication middleware because that one reads on the route's behalf in a task
  group, which would hand the route the refusal wrapped in an exception group.

Routes read bodies through `web.read_body`, which checks the same cap; these hold it
for any read that would not.
"""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.console.auth import SECURITY_HEADERS
from gateway.console.web import body_cap, problem, too_large

__all__ = ["CountedBody", "DeclaredBody"]

#: On a refusal: the rest of the body is not read, so the connection cannot carry
#: another request, and closing it spares the server draining it.
CLOSE = (b"connection", b"close")


def _declared(headers: Headers) -> int | None:
    """The Content-Length, or None without a usable one (`CountedBody` then holds the
    cap)."""
    value = headers.get("content-length", "").strip()
    return int(value) if value.isascii() and value.isdigit() else None


class DeclaredBody:
    """Refuse a body whose Content-Length is past the cap, unread and at once."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            max_bytes = body_cap(scope["method"], scope["path"])
            declared = _declared(Headers(scope=scope))
            if declared is not None and declared > max_bytes:
                # Outside the authentication middleware: its headers are added here.
                headers = {**SECURITY_HEADERS, "Connection": "close"}
                detail = too_large(max_bytes).detail
                await problem(413, "Payload Too Large", detail, headers=headers)(
                    scope, receive, send
                )
                return
        await self.app(scope, receive, send)


class CountedBody:
    """Count a body as it is read; the read past the cap raises `Refused(413)`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        max_bytes = body_cap(scope["method"], scope["path"])
        size = 0
        refused = False

        async def counted() -> Message:
            nonlocal size, refused
            message = await receive()
            if message["type"] == "http.request":
                size += len(message.get("body", b""))
                if size > max_bytes:
                    refused = True
                    raise too_large(max_bytes)
            return message

        async def closing(message: Message) -> None:
            if refused and message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), CLOSE]}
            await send(message)

        await self.app(scope, counted, closing)
