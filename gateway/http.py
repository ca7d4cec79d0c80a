"""The HTTP surface: provider webhooks and internal publishing (gateway.ingest_endpoints),
health, readiness and metrics."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway import logs
from gateway import settings as settings_mod
from gateway.compose import Gateway, running_gateway
from gateway.deadlines import Deadlines
from gateway.ingest_endpoints import (
    EVENTS_PATH,
    WEBHOOKS_PREFIX,
    Receive,
    Scope,
    Send,
    ingest,
    service_gate,
    webhook_gate,
)
from gateway.settings import Settings

log = logging.getLogger("gateway.http")

#: How `gateway serve` runs uvicorn (the benchmark's bare endpoint uses the same).
SERVER_OPTIONS: dict[str, Any] = {
    "loop": "uvloop",
    "http": "httptools",
    "access_log": False,
    "log_config": None,
    "timeout_graceful_shutdown": 30,
    "lifespan": "on",
    # The gateway never reads the client address: parsing X-Forwarded-For for it would
    # cost every request for nothing. No `server` header: it only tells scanners what runs.
    "proxy_headers": False,
    "server_header": False,
}


def _json(status: int, doc: dict[str, object], headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(doc), status, headers, media_type="application/json")


def _gw(request: Request) -> Gateway:
    return request.app.state.gateway  # type: ignore[no-any-return]


async def healthz(request: Request) -> Response:
    """The process is alive and serving."""
    return _json(200, {"status": "ok"})


async def readyz(request: Request) -> Response:
    """Ready when the database answers and NATS is connected with the stream in place."""
    gw = _gw(request)
    database = False
    with contextlib.suppress(Exception):
        async with asyncio.timeout(1.0), gw.pool.acquire() as conn:
            database = await conn.fetchval("SELECT 1") == 1
    nats_ok = await gw.broker.ping()
    status = 200 if database and nats_ok else 503
    return _json(
        status,
        {
            "status": "ready" if status == 200 else "not_ready",
            "database": database,
            "nats": nats_ok,
        },
    )


async def metrics(request: Request) -> Response:
    """Prometheus text exposition."""
    return Response(_gw(request).metrics.render(), media_type="text/plain; version=0.0.4")


class GatewayApp:
    """The ASGI application: the ingestion endpoints directly, Starlette for the rest."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.gateway: Gateway | None = None  # set while the lifespan runs
        self.deadlines = Deadlines()
        self.events_gate = service_gate(settings)
        # Built once per configured provider; any other name gets its 404 from a fresh gate.
        self.webhook_gates = {name: webhook_gate(settings, name) for name in settings.providers}

        @contextlib.asynccontextmanager
        async def lifespan(app: Starlette) -> AsyncIterator[None]:
            async with running_gateway(settings) as gateway:
                app.state.gateway = self.gateway = gateway
                self.deadlines.start()
                try:
                    yield
                finally:
                    self.gateway = None
                    await self.deadlines.stop()

        routes = [
            Route("/healthz", healthz, methods=["GET"]),
            Route("/readyz", readyz, methods=["GET"]),
            Route("/metrics", metrics, methods=["GET"]),
            # Listed so that other methods get Starlette's 405; POSTs never reach these.
            Route("/webhooks/{provider}", _not_served, methods=["POST"]),
            Route(EVENTS_PATH, _not_served, methods=["POST"]),
        ]
        self.starlette = Starlette(routes=routes, lifespan=lifespan)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        gw = self.gateway
        if gw is not None and scope["type"] == "http" and scope["method"] == "POST":
            path: str = scope["path"]
            if path.startswith(WEBHOOKS_PREFIX):
                name = path[len(WEBHOOKS_PREFIX) :]
                gate = self.webhook_gates.get(name)
                label = name
                if gate is None:  # answered 404; metrics label every such name alike
                    gate, label = webhook_gate(self.settings, name), "unknown"
                await ingest(gw, self.deadlines, scope, receive, send, label, gate)
                return
            if path == EVENTS_PATH:
                await ingest(gw, self.deadlines, scope, receive, send, "internal", self.events_gate)
                return
        await self.starlette(scope, receive, send)


async def _not_served(request: Request) -> Response:
    """Reached only before start-up completes: the gateway cannot take events yet."""
    return _json(503, {"error": "unavailable", "detail": "starting up"}, {"Retry-After": "1"})


def create_app(settings: Settings) -> GatewayApp:
    """The application; its lifespan runs the whole gateway."""
    return GatewayApp(settings)


def app_from_env() -> GatewayApp:
    """Factory for `uvicorn --factory` and multi-worker serving: config from the environment.

    Worker processes start fresh, so they set up the JSON logs themselves.
    """
    logs.configure(os.environ.get("GATEWAY_LOG_LEVEL", "INFO"))
    return create_app(settings_mod.load(os.environ.get(settings_mod.CONFIG_ENV)))
