"""The ingestion side's spans: the HTTP request, and each row's publish.

Called only while `gateway.tracing.ENABLED`; the endpoints and publishers check it
first, so with tracing off none of this runs.

A provider's own `traceparent` header is somebody else's trace: it becomes the
request's parent only with `[tracing] trust_incoming = true`; otherwise the request
starts a new trace and keeps the provider's span as a link.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace

from gateway import tracing
from gateway.adapters.jetstream.broker import PublishResult
from gateway.adapters.postgres.webhooks import StoredEvent
from gateway.core.model import Event
from gateway.core.trace_context import HEADER, parse_traceparent
from gateway.errors import BrokerUnavailable, PayloadTooLarge
from gateway.settings import TracingSettings

log = logging.getLogger("gateway.ingest.relay")

_HEADER = HEADER.encode()
WEBHOOK_ROUTE = "POST /webhooks/{provider}"
EVENTS_ROUTE = "POST /v1/events"


def request_span(
    headers: Sequence[tuple[bytes, bytes]], label: str, route: str, settings: TracingSettings
) -> tracing.Span:
    """The server span of one ingestion request (started before its body is read)."""
    incoming = None
    for name, value in headers:
        if name == _HEADER:
            incoming = parse_traceparent(value.decode("latin-1"))
    attributes = {"http.request.method": "POST", "http.route": route, "gateway.provider": label}
    if incoming is not None and settings.trust_incoming:
        return tracing.start(route, kind="server", attributes=attributes, parent=incoming)
    links = () if incoming is None else (incoming,)
    return tracing.start_root(route, kind="server", attributes=attributes, links=links)


def shaped(span: tracing.Span, event: Event) -> Event:
    """Name the event on its request's span; the event (and so its row) carries the
    span's `traceparent`, so its publish joins this trace whoever publishes it."""
    span.set_attribute("gateway.provider", event.provider)
    span.set_attribute("gateway.event_id", event.event_id)
    if event.event_type is not None:
        span.set_attribute("gateway.event_type", event.event_type)
    if event.subject is not None:
        span.set_attribute("gateway.subject", event.subject)
    return replace(event, traceparent=tracing.traceparent(span))


def request_done(
    span: tracing.Span, token: object, outcome: str, status: int | None, error_class: str | None
) -> None:
    """The request's outcome (accepted, duplicate, a rejection, unavailable), its HTTP
    status, and the error class of a rejection or of an event parked on arrival."""
    span.set_attribute("gateway.outcome", outcome)
    if status is not None:
        span.set_attribute("http.response.status_code", status)
    if error_class is not None:
        tracing.failed(span, error_class)
    tracing.deactivate(token)
    span.end()


def publish_spans(
    batch: Sequence[StoredEvent], path: str
) -> tuple[list[StoredEvent], list[tracing.Span]]:
    """A producer span per row, a child of the request that recorded it (the row's
    stored `traceparent`; a row recorded while tracing was off starts a trace); and the
    rows as they are to be sent, each carrying its publish span's `traceparent`."""
    sent: list[StoredEvent] = []
    spans: list[tracing.Span] = []
    for stored in batch:
        event = stored.event
        attributes = {
            "messaging.system": "nats",
            "messaging.destination.name": event.subject or "",
            "gateway.provider": event.provider,
            "gateway.event_id": event.event_id,
            "gateway.publish.path": path,
        }
        parent = parse_traceparent(event.traceparent)
        if parent is not None:
            span = tracing.start("publish", kind="producer", attributes=attributes, parent=parent)
        else:
            span = tracing.start_root("publish", kind="producer", attributes=attributes)
        spans.append(span)
        sent.append(replace(stored, event=replace(event, traceparent=tracing.traceparent(span))))
    return sent, spans


def publish_done(
    batch: Sequence[StoredEvent], spans: Sequence[tracing.Span], result: PublishResult, path: str
) -> None:
    """End each row's publish span: published (PubAck), parked (too large), or left to
    the relay (unconfirmed; a later publish is a span of its own). With `--log-level
    debug`, one `event published` line per published row, written inside its span so it
    carries the trace id (the relay's logs join the trace as serve's and settle's do)."""
    acked, too_large = set(result.acked), set(result.too_large)
    debug = log.isEnabledFor(logging.DEBUG)
    for stored, span in zip(batch, spans, strict=True):
        if stored.webhook_id in acked:
            span.set_attribute("gateway.outcome", "published")
            if debug:
                with tracing.activated(span):
                    log.debug("event published", extra=_published(stored, path))
        elif stored.webhook_id in too_large:
            span.set_attribute("gateway.outcome", "parked")
            tracing.failed(span, PayloadTooLarge.error_class)
        else:
            span.set_attribute("gateway.outcome", "unconfirmed")
            tracing.failed(span, BrokerUnavailable.error_class)
        span.end()


def _published(stored: StoredEvent, path: str) -> dict[str, str]:
    event = stored.event
    return {
        "provider": event.provider,
        "event_id": event.event_id,
        "subject": event.subject or "",
        "path": path,
    }
