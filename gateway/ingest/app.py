"""The HTTP surface: provider webhooks and internal publishing (gateway.ingest.endpoints),
health, readiness, metrics, and the OpenAPI document that describes them all
(`gateway/ingest/openapi.json`, served at `/openapi.json`).

The application does not open anything itself: its lifespan runs the context manager it
is given (`gateway.wiring.ingest.running_gateway` in production, fakes in unit tests).
"""

from __future__ import annotations

import contextlib
import importlib.resources
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from gateway.edge import REFUSALS_STATE_KEY, edge_options
from gateway.ingest.admin import readiness, serve_admin
from gateway.ingest.callbacks import CALLBACKS_PREFIX, callback, callback_urls
from gateway.ingest.deadlines import Deadlines
from gateway.ingest.endpoints import (
    EVENTS_PATH,
    WEBHOOKS_PREFIX,
    echoed,
    ingest,
    send_json,
    service_gate,
    webhook_gate,
)
from gateway.ingest.parts import IngestParts
from gateway.metrics import METRICS_TYPE
from gateway.settings import HttpSettings, Settings

#: Opens the running parts for the application's lifespan and closes them after it.
RunParts = Callable[[Settings], AbstractAsyncContextManager[IngestParts]]

log = logging.getLogger(__name__)

#: The checked-in OpenAPI 3.1 document of this HTTP API, shipped as package data beside
#: this module; tests/{unit,integration}/ingest/test_openapi*.py hold it and the app together.
OPENAPI_RESOURCE = "openapi.json"

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


def server_options(http: HttpSettings) -> dict[str, Any]:
    """`SERVER_OPTIONS` with the `[http]` edge limits (`gateway.edge`) in force."""
    return {**SERVER_OPTIONS, **edge_options(http)}


def openapi_document() -> bytes:
    """The OpenAPI document as served: the packaged file, byte for byte."""
    return importlib.resources.files("gateway.ingest").joinpath(OPENAPI_RESOURCE).read_bytes()


def _json(status: int, doc: dict[str, object], headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(doc), status, headers, media_type="application/json")


def _parts(request: Request) -> IngestParts:
    parts: IngestParts = request.app.state.parts
    return parts


async def healthz(request: Request) -> Response:
    """The process is alive and serving."""
    return _json(200, {"status": "ok"})


async def readyz(request: Request) -> Response:
    """Ready when the database answers and NATS is connected with the stream in place."""
    status, doc = await readiness(_parts(request))
    return _json(status, doc)


async def metrics(request: Request) -> Response:
    """Prometheus text exposition."""
    return Response(_parts(request).metrics.render(), media_type=METRICS_TYPE)


class GatewayApp:
    """The ASGI application: the ingestion endpoints directly, Starlette for the rest."""

    # The whole `Settings`, not a section: they are handed on to `run_parts` (the
    # composition root opens the parts from them), and the app itself reads `[http]`,
    # the providers, the services, `[ordering]` and `[settlement]`.
    def __init__(self, settings: Settings, run_parts: RunParts) -> None:
        self.settings = settings
        self.parts: IngestParts | None = None  # set while the lifespan runs
        self.deadlines = Deadlines()
        self.events_gate = service_gate(settings.services, settings.ordering, settings.settlement)
        # Built once per configured provider; any other name gets its 404 from a fresh gate.
        self.webhook_gates = {
            name: webhook_gate(settings.providers, settings.ordering, settings.settlement, name)
            for name in settings.providers
        }
        self.return_urls = callback_urls(settings.providers)

        http = settings.http
        document = openapi_document()  # read once; every answer sends the same bytes

        async def openapi(request: Request) -> Response:
            return Response(document, media_type="application/json")

        @contextlib.asynccontextmanager
        async def lifespan(app: Starlette) -> AsyncIterator[Mapping[str, Any]]:
            async with run_parts(settings) as parts:
                app.state.parts = self.parts = parts
                self.deadlines.start()
                admin = None
                try:
                    if http.admin_port:
                        admin = await serve_admin(parts, http.admin_host, http.admin_port)
                    # The lifespan state reaches the server's protocol (`app_state`): the
                    # edge counts what it refuses there.
                    yield {REFUSALS_STATE_KEY: parts.metrics.http_refused_total}
                finally:
                    if admin is not None:
                        admin.close()
                        await admin.wait_closed()
                    self.parts = None
                    await self.deadlines.stop()

        # With an admin listener, /readyz and /metrics are served there only (404 here).
        admin_routes = [] if http.admin_port else [
            Route("/readyz", readyz, methods=["GET"]),
            Route("/metrics", metrics, methods=["GET"]),
        ]  # fmt: skip
        routes = [
            Route("/healthz", healthz, methods=["GET"]),
            Route("/openapi.json", openapi, methods=["GET"]),
            *admin_routes,
            # Listed so that other methods get Starlette's 405; POSTs never reach these.
            Route("/webhooks/{provider}", _not_served, methods=["POST"]),
            Route(EVENTS_PATH, _not_served, methods=["POST"]),
            Route(CALLBACKS_PREFIX + "{provider}", _not_served, methods=["GET"]),
        ]
        self.starlette = Starlette(routes=routes, lifespan=lifespan)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        parts = self.parts
        if parts is not None and scope["type"] == "http" and scope["method"] == "POST":
            path: str = scope["path"]
            if path.startswith(WEBHOOKS_PREFIX):
                name = path[len(WEBHOOKS_PREFIX) :]
                gate = self.webhook_gates.get(name)
                label = name
                if gate is None:  # answered 404; metrics label every such name alike
                    s = self.settings
                    gate = webhook_gate(s.providers, s.ordering, s.settlement, name)
                    label = "unknown"
                await ingest(parts, self.deadlines, scope, receive, send, label, gate)
                return
            if path == EVENTS_PATH:
                await ingest(
                    parts, self.deadlines, scope, receive, send, "internal", self.events_gate
                )
                return
        elif parts is not None and _is_callback(scope):
            await self._callback(parts, scope, send, scope["path"][len(CALLBACKS_PREFIX) :])
            return
        await self.starlette(scope, receive, send)

    async def _callback(self, parts: IngestParts, scope: Scope, send: Send, name: str) -> None:
        """A payer's browser back from a callback provider (`ingest.callbacks`)."""
        return_url = self.return_urls.get(name)
        if return_url is None:  # no such provider, or one that takes webhooks
            detail = f"no callback provider named {echoed(name)} is configured"
            await send_json(send, 404, {"error": "unknown_provider", "detail": detail})
            return
        gate = self.webhook_gates[name]
        await callback(parts, self.deadlines, scope, send, name, gate, return_url)


def _is_callback(scope: Scope) -> bool:
    """A GET of `/callbacks/NAME` (`ingest.callbacks`)."""
    path: str = scope["path"]
    return (
        scope["type"] == "http" and scope["method"] == "GET" and path.startswith(CALLBACKS_PREFIX)
    )


async def _not_served(request: Request) -> Response:
    """Reached only before start-up completes: the gateway cannot take events yet."""
    return _json(503, {"error": "unavailable", "detail": "starting up"}, {"Retry-After": "1"})
