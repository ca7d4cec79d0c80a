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
from typing import Protocol, runtime_checkable

import orjson

from gateway.core.health.durability import Durability, DurabilityReason, DurabilityState
from gateway.ingest.parts import IngestParts
from gateway.metrics import METRICS_TYPE, serve_plain_http

_JSON_TYPE = "application/json"
#: What `/readyz` says of durability where nothing reads it (a probe without a watcher).
_NOT_READ = Durability(
    DurabilityState.UNKNOWN, DurabilityReason.NOT_READ, "not read by this process"
)


@runtime_checkable
class DurabilitySource(Protocol):
    """A database probe that also knows the durability it read last."""

    def durability(self) -> Durability: ...


async def readiness(parts: IngestParts) -> tuple[int, dict[str, object]]:
    """`/readyz`: 200 when the database answers and NATS is connected, else 503; with
    the database's durability as last read (no query of its own).

    The durability is its state and a fixed reason code, never the reading's line: that
    describes the server's replication settings, and `/readyz` is served on the public
    port when no admin port is set (and the admin listener has no credentials either).
    The line is in the log, where the reading is announced.
    """
    database = await parts.database.ping()
    nats_ok = await parts.broker.ping()
    # Durability is a detail, never a reason for 503: after a failover the new primary
    # usually has no standby yet, and a balancer that took every gateway out of service
    # for it would turn a risk into an outage. The warning, the metric and its alert
    # say it instead.
    status = 200 if database and nats_ok else 503
    state = "ready" if status == 200 else "not_ready"
    source = parts.database
    durability = source.durability() if isinstance(source, DurabilitySource) else _NOT_READ
    return status, {
        "status": state,
        "database": database,
        "nats": nats_ok,
        "durability": durability.to_json(),
    }


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

    async def answer(method: str, path: str) -> tuple[int, str, bytes]:
        return await admin_answer(parts, method, path)

    return await serve_plain_http(answer, host, port, setting="http.admin_port", reuse_port=True)
