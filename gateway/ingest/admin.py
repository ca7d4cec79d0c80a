"""The admin listener (`[http] admin_port`): `/metrics` and `/readyz` on an address of
their own, so what they reveal (traffic per provider, which dependency is down) and what
they cost (two probes per `/readyz`) stay off the public port that takes webhooks.

A few lines of HTTP/1.0-style serving (read the head, answer, close) rather than a
second uvicorn server: uvicorn's `Server.serve` takes over the process's signal
handlers, which belong to the public server. Scrapers and probes send one GET per
connection, which is all this needs to understand.
"""

from __future__ import annotations

import asyncio
import http

import orjson

from gateway.ingest.parts import IngestParts

#: The Prometheus text exposition's content type.
METRICS_TYPE = "text/plain; version=0.0.4"
_JSON_TYPE = "application/json"
#: A request head must arrive within this long; an idle connection is closed after it.
HEAD_TIMEOUT_S = 5.0


async def readiness(parts: IngestParts) -> tuple[int, dict[str, object]]:
    """`/readyz`: 200 when the database answers and NATS is connected, else 503."""
    database = await parts.database.ping()
    nats_ok = await parts.broker.ping()
    status = 200 if database and nats_ok else 503
    state = "ready" if status == 200 else "not_ready"
    return status, {"status": state, "database": database, "nats": nats_ok}


async def admin_answer(parts: IngestParts, method: str, path: str) -> tuple[int, str, bytes]:
    """Status, content type and body for one admin request."""
    if path not in ("/metrics", "/readyz"):
        return 404, _JSON_TYPE, orjson.dumps({"error": "not_found"})
    if method != "GET":
        return 405, _JSON_TYPE, orjson.dumps({"error": "method_not_allowed"})
    if path == "/metrics":
        return 200, METRICS_TYPE, parts.metrics.render().encode()
    status, doc = await readiness(parts)
    return status, _JSON_TYPE, orjson.dumps(doc)


async def serve_admin(parts: IngestParts, host: str, port: int) -> asyncio.Server:
    """Listen on host:port until the returned server is closed.

    `reuse_port` lets every worker of `gateway serve --workers N` listen on the same
    port (the kernel spreads connections among them), as on the public port.
    """

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT_S)
            method, _, rest = head.decode("latin-1").partition(" ")
            path = rest.partition(" ")[0].partition("?")[0]
            status, content_type, body = await admin_answer(parts, method, path)
            writer.write(
                f"HTTP/1.1 {status} {http.HTTPStatus(status).phrase}\r\n"
                f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
                "Connection: close\r\n\r\n".encode("latin-1")
                + body
            )
            await writer.drain()
        except (OSError, TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass  # the client left, stalled or sent more head than a GET needs
        finally:
            writer.close()

    return await asyncio.start_server(answer, host, port, reuse_port=True)
