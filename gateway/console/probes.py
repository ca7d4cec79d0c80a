"""`/livez` and `/readyz` on the console's own port (it has no metrics port), answered
before the console's middlewares: a probe carries no credentials, needs no session and
must not be written to the audit trail.

Both answer JSON with no configuration text: `/readyz` says which dependency does not
answer by a short code (`core.health.readiness`), never its address, since this is the
console's public port.
"""

from __future__ import annotations

import orjson
from starlette.types import ASGIApp, Receive, Scope, Send

from gateway.core.health.readiness import Readiness, liveness

PROBE_PATHS = frozenset({"/livez", "/readyz"})


class Probes:
    """The console's app with `/livez` and `/readyz` in front of it."""

    def __init__(self, app: ASGIApp, readiness: Readiness) -> None:
        self._app = app
        self._readiness = readiness

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] not in PROBE_PATHS:
            await self._app(scope, receive, send)
            return
        if scope["method"] not in ("GET", "HEAD"):
            await _answer(send, 405, {"error": "method_not_allowed"}, head=False)
            return
        if scope["path"] == "/livez":
            status, body = liveness()
        else:
            status, body = await self._readiness.ready()
        await _answer(send, status, body, head=scope["method"] == "HEAD")


async def _answer(send: Send, status: int, body: dict[str, object], *, head: bool) -> None:
    content = orjson.dumps(body)
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(content)).encode()),
        (b"cache-control", b"no-store"),
    ]
    if status == 405:
        headers.append((b"allow", b"GET, HEAD"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if head else content})
