"""The ingestion side's spans: the HTTP request, and each row's publish.

Called only while `gateway.tracing.ENABLED`; the endpoints and publishers check it
first, so with tracing off none of this runs.

A provider's own `traceparent` header is somebody else's trace: it becomes the
request's parent only with `[tracing] trust_incoming = true`, and only once the request
is verified; otherwise the request starts a new trace and keeps the provider's span as a
link. An event whose trace is not sampled gets no span anywhere: it carries a
`traceparent` with flags `00`, which the publish forwards and the worker honours.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import replace

from gateway import tracing
from gateway.adapters.jetstream.broker import PublishResult
from gateway.adapters.postgres.webhooks import StoredEvent
from gateway.core.model import Event
from gateway.core.trace_context import HEADER, parse_traceparent, request_parent
from gateway.errors import BrokerUnavailable, PayloadTooLarge

log = logging.getLogger("gateway.ingest.relay")

_HEADER = HEADER.encode()
WEBHOOK_ROUTE = "POST /webhooks/{provider}"
EVENTS_ROUTE = "POST /v1/events"


class RequestTrace:
    """One ingestion request's trace, while tracing is on: its server span once the
    sampling is decided (`span`), or nothing but the unsampled context its event carries.

    The decision is made before any SDK call: a new trace is drawn at `sample_ratio`
    as the request arrives; a sender's `traceparent` with `trust_incoming` waits for the
    request's verification (its span is then started back-dated to the arrival), since
    an unauthenticated client must not be able to choose to be recorded. An unverified
    request's header is ignored, and the request draws like any other."""

    __slots__ = ("_arrived_ns", "_incoming", "_label", "_route", "_token", "_trust",
                 "_waiting", "carried", "span")  # fmt: skip

    def __init__(
        self, headers: Sequence[tuple[bytes, bytes]], label: str, route: str, trust: bool
    ) -> None:
        incoming = None
        for name, value in headers:
            if name == _HEADER:
                incoming = parse_traceparent(value.decode("latin-1"))
        self._incoming, self._trust, self._label, self._route = incoming, trust, label, route
        self.span: tracing.Span | None = None
        self.carried: str | None = None  # an unsampled request's traceparent (flags 00)
        self._token: object = None
        self._arrived_ns: int | None = None
        self._waiting = incoming is not None and trust
        if self._waiting:
            self._arrived_ns = time.time_ns()  # decided once the request is verified
        else:
            self._decide(verified=False)

    def _decide(self, verified: bool) -> None:
        self._waiting = False
        incoming = self._incoming
        joined = request_parent(incoming, self._trust, verified)
        context = tracing.new_trace() if joined is None else joined
        if not context.sampled:
            # No span: the event carries the decision so its publish and settlement
            # skip the SDK too (in the sender's trace, under a span id of ours).
            self.carried = str(context if joined is None else tracing.unsampled(joined.trace_id))
            return
        attributes = {
            "http.request.method": "POST",
            "http.route": self._route,
            "gateway.provider": self._label,
        }
        if joined is not None:
            self.span = tracing.start(self._route, kind="server", attributes=attributes,
                                      parent=joined, start_ns=self._arrived_ns)  # fmt: skip
        else:  # untrusted, the sender's span is only a link; unverified, not even that
            links = (incoming,) if incoming is not None and not self._trust else ()
            self.span = tracing.start_root(self._route, kind="server", attributes=attributes,
                                           links=links, start_ns=self._arrived_ns)  # fmt: skip
        self._token = tracing.activate(self.span)  # log lines of the request carry its ids

    def shaped(self, event: Event) -> Event:
        """The request is verified and shaped into `event`: a trusted sender's trace is
        joined now. Name the event on the request's span; the event (and so its row)
        carries the span's `traceparent` (or the unsampled one), so its publish joins
        this trace, or skips it, whoever publishes it."""
        if self._waiting:
            self._decide(verified=True)
        span = self.span
        if span is None:
            return replace(event, traceparent=self.carried)
        span.set_attribute("gateway.provider", event.provider)
        span.set_attribute("gateway.event_id", event.event_id)
        if event.event_type is not None:
            span.set_attribute("gateway.event_type", event.event_type)
        if event.subject is not None:
            span.set_attribute("gateway.subject", event.subject)
        return replace(event, traceparent=tracing.traceparent(span))

    def done(self, outcome: str, status: int | None, error_class: str | None) -> None:
        """The request's outcome (accepted, duplicate, a rejection, unavailable), its
        HTTP status, and the error class of a rejection or of an event parked on
        arrival. A request never verified draws its own sampling now."""
        if self._waiting:
            self._decide(verified=False)
        span = self.span
        if span is None:
            return
        span.set_attribute("gateway.outcome", outcome)
        if status is not None:
            span.set_attribute("http.response.status_code", status)
        if error_class is not None:
            tracing.failed(span, error_class)
        tracing.deactivate(self._token)
        span.end()


def publish_spans(
    batch: Sequence[StoredEvent], path: str
) -> tuple[list[StoredEvent], list[tracing.Span | None]]:
    """A producer span per row of a sampled trace, a child of the request that recorded
    it (the row's stored `traceparent`; a row recorded while tracing was off draws a new
    trace at `sample_ratio`); and the rows as they are to be sent, each carrying its
    publish span's `traceparent`, or the unsampled one (flags 00) with no span (None)."""
    sent: list[StoredEvent] = []
    spans: list[tracing.Span | None] = []
    for stored in batch:
        event = stored.event
        parent = parse_traceparent(event.traceparent)
        drawn = parent is None  # recorded while tracing was off: decided here
        if parent is None:
            parent = tracing.new_trace()
            if not parent.sampled:  # carried on, so that the worker skips it too
                stored = replace(stored, event=replace(event, traceparent=str(parent)))
        if not parent.sampled:
            spans.append(None)
            sent.append(stored)
            continue
        attributes = {
            "messaging.system": "nats",
            "messaging.destination.name": event.subject or "",
            "gateway.provider": event.provider,
            "gateway.event_id": event.event_id,
            "gateway.publish.path": path,
        }
        if drawn:
            span = tracing.start_root("publish", kind="producer", attributes=attributes)
        else:
            span = tracing.start("publish", kind="producer", attributes=attributes, parent=parent)
        spans.append(span)
        sent.append(replace(stored, event=replace(event, traceparent=tracing.traceparent(span))))
    return sent, spans


def publish_done(
    batch: Sequence[StoredEvent],
    spans: Sequence[tracing.Span | None],
    result: PublishResult,
    path: str,
) -> None:
    """End each row's publish span: published (PubAck), parked (too large), or left to
    the relay (unconfirmed; a later publish is a span of its own). With `--log-level
    debug`, one `event published` line per published row, written inside its span so it
    carries the trace id (the relay's logs join the trace as serve's and settle's do)."""
    acked, too_large = set(result.acked), set(result.too_large)
    debug = log.isEnabledFor(logging.DEBUG)
    for stored, span in zip(batch, spans, strict=True):
        if span is None:  # not sampled
            continue
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
