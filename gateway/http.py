"""The HTTP surface: provider webhooks, internal publishing, health and metrics."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable
from datetime import UTC, datetime

import orjson
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from gateway import logs
from gateway import settings as settings_mod
from gateway.compose import Gateway, running_gateway
from gateway.core.model import Event, Outcome, service_event, webhook_event
from gateway.core.signatures import get_scheme
from gateway.errors import (
    BadRequest,
    BodyTooLarge,
    RequestRejected,
    TransientError,
    Unauthorized,
    UnknownProvider,
)
from gateway.settings import ServiceSettings, Settings

log = logging.getLogger("gateway.http")


def _json(status: int, doc: dict[str, object], headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(doc), status, headers, media_type="application/json")


async def read_body(request: Request, max_bytes: int, timeout_s: float) -> bytes:
    """The body, refused with `BodyTooLarge` as soon as it passes `max_bytes`.

    The limit is checked while reading, so an oversized body is never buffered whole.
    """
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise BodyTooLarge(f"body of {declared} bytes exceeds {max_bytes}")

    async def read() -> bytes:
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > max_bytes:
                raise BodyTooLarge(f"body exceeds {max_bytes} bytes")
            chunks.append(chunk)
        return b"".join(chunks)

    try:
        async with asyncio.timeout(timeout_s):  # no extra task per request, unlike wait_for
            return await read()
    except TimeoutError:
        raise BadRequest("request body not received in time") from None


def _gw(request: Request) -> Gateway:
    return request.app.state.gateway  # type: ignore[no-any-return]


async def _accept(gw: Gateway, event: Event) -> Outcome:
    outcome = await gw.inbox.accept(event)
    if outcome is Outcome.ACCEPTED and event.failure is not None:
        gw.metrics.dlq_total.inc(stage="ingest", error_class=event.failure.error_class)
        log.warning(
            "event accepted and parked in the DLQ",
            extra={
                "provider": event.provider,
                "event_id": event.event_id,
                "error_class": event.failure.error_class,
            },
        )
    return outcome


async def _handle(request: Request, label: str, work: Awaitable[Event]) -> Response:
    """Shape the request into an event (`work`), pass it through the gate, and map the
    exception tree onto HTTP answers and metrics."""
    gw = _gw(request)
    started = time.perf_counter()
    try:
        event = await work
        outcome = (await _accept(gw, event)).value
        response = _json(200, {"status": outcome, "event_id": event.event_id})
    except RequestRejected as exc:
        outcome = exc.error_class.lower()
        log.info(
            "request rejected",
            extra={
                "provider": label,
                "status": exc.status_code,
                "error_class": exc.error_class,
                "reason": str(exc),
            },
        )
        response = _json(exc.status_code, {"error": exc.error_class.lower(), "detail": str(exc)})
    except TransientError as exc:
        outcome = "unavailable"
        log.warning("event not made durable", extra={"provider": label, "error": repr(exc)})
        retry_after = str(gw.settings.http.retry_after_s)
        response = _json(
            503, {"error": "unavailable", "detail": "try again later"}, {"Retry-After": retry_after}
        )
    except ClientDisconnect:
        outcome = "client_disconnect"
        response = _json(400, {"error": "client_disconnect"})
    gw.metrics.webhooks_total.inc(provider=label, outcome=outcome)
    gw.metrics.request_seconds.observe(time.perf_counter() - started)
    return response


async def receive_webhook(request: Request) -> Response:
    """`POST /webhooks/{provider}`: verify, record once, answer after the commit."""
    gw = _gw(request)
    name = request.path_params["provider"]

    async def work() -> Event:
        provider = gw.settings.providers.get(name)
        if provider is None:
            raise UnknownProvider(f"no provider named {name!r} is configured")
        http = gw.settings.http
        body = await read_body(request, http.max_body_bytes, http.request_timeout_s)
        headers = dict(request.headers.items())  # Starlette gives lower-cased names
        scheme = get_scheme(provider.scheme)
        scheme.verify(provider.params, headers, body, time.time())
        event = webhook_event(
            provider.name,
            scheme.id_ref(provider.params),
            scheme.type_ref(provider.params),
            headers,
            body,
            datetime.now(UTC),
        )
        return event

    label = name if name in gw.settings.providers else "unknown"
    return await _handle(request, label, work())


def authenticate(settings: Settings, authorization: str | None) -> ServiceSettings:
    """The service whose bearer token this is; compared in constant time against all."""
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise Unauthorized("a bearer token is required")
    found = None
    for service in settings.services.values():
        if hmac.compare_digest(service.token.encode(), token.strip().encode()):
            found = service
    if found is None:
        raise Unauthorized("unknown token")
    return found


async def publish_event(request: Request) -> Response:
    """`POST /v1/events`: internal publishing through the same gate and outbox."""
    gw = _gw(request)

    async def work() -> Event:
        service = authenticate(gw.settings, request.headers.get("authorization"))
        http = gw.settings.http
        body = await read_body(request, http.max_body_bytes, http.request_timeout_s)
        event = service_event(
            service.name,
            service.subjects,
            request.headers.get("idempotency-key"),
            dict(request.headers.items()),
            body,
            datetime.now(UTC),
        )
        return event

    return await _handle(request, "internal", work())


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


def create_app(settings: Settings) -> Starlette:
    """The Starlette application; its lifespan runs the whole gateway."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with running_gateway(settings) as gateway:
            app.state.gateway = gateway
            yield

    routes = [
        Route("/webhooks/{provider}", receive_webhook, methods=["POST"]),
        Route("/v1/events", publish_event, methods=["POST"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
    ]
    return Starlette(routes=routes, lifespan=lifespan)


def app_from_env() -> Starlette:
    """Factory for `uvicorn --factory` and multi-worker serving: config from the environment.

    Worker processes start fresh, so they set up the JSON logs themselves.
    """
    logs.configure(os.environ.get("GATEWAY_LOG_LEVEL", "INFO"))
    return create_app(settings_mod.load(os.environ.get(settings_mod.CONFIG_ENV)))
