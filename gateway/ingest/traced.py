"""The ingestion side's spans: the HTTP request, and each row's publish.

With tracing off a request gets `UNTRACED` (`request_trace` reads the flag once per
request) and a published batch never gets here (`relay.publish_batch` reads it once per
batch): the two hot paths, where skipping this module was measured.

A provider's own `traceparent` header is somebody else's trace: it becomes the
request's parent only with `[tracing] trust_incoming = true`, and only for a verified
request whose event is newly accepted (a replay answered `duplicate` never is);
otherwise the request starts a new trace and keeps the provider's span as a link. An
event whose trace is not sampled gets no span anywhere: it carries a `traceparent` with
flags `00`, which the publish forwards and the worker honours.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import NamedTuple

from gateway import tracing
from gateway.adapters.jetstream.broker import PublishResult
from gateway.adapters.postgres.webhooks import StoredEvent
from gateway.core.events.model import Event, Outcome
from gateway.core.trace_context import (
    HEADER,
    SAMPLED,
    TraceParent,
    parse_traceparent,
    request_parent,
)
from gateway.errors import BrokerUnavailable, PayloadTooLarge

log = logging.getLogger(__name__)

_HEADER = HEADER.encode()
WEBHOOK_ROUTE = "POST /webhooks/{provider}"
EVENTS_ROUTE = "POST /v1/events"


def request_trace(
    headers: Sequence[tuple[bytes, bytes]], label: str, trust: bool
) -> RequestTrace | Untraced:
    """The trace of one ingestion request (`label` "internal": `POST /v1/events`).

    The flag is read here, once per request, and off the request gets `UNTRACED`: no
    header scan, no sampling draw, no `traceparent` string, no objects (a `RequestTrace`
    at `sample_ratio = 0`, built and finished, costs about 10 µs a request; the flag read
    and `UNTRACED`'s three calls about 0.4 µs)."""
    if not tracing.ENABLED:
        return UNTRACED
    route = EVENTS_ROUTE if label == "internal" else WEBHOOK_ROUTE
    return RequestTrace(headers, label, route, trust)


class Untraced:
    """A request's trace while tracing is off: each step does nothing."""

    __slots__ = ()

    def shaped(self, event: Event) -> Event:
        return event

    def commit_wait(self) -> contextlib.AbstractContextManager[object]:
        return _NOTHING

    def done(self, outcome: str, status: int | None, error_class: str | None) -> None:
        return None


UNTRACED = Untraced()
_NOTHING = contextlib.nullcontext()


class _Joining(NamedTuple):
    """A trusted sender's request waiting for its outcome: the sender's span, the
    context its event carries meanwhile, and that event."""

    incoming: TraceParent
    provisional: TraceParent
    event: Event


class RequestTrace:
    """One ingestion request's trace, while tracing is on: its server span once the
    sampling is decided (`span`), or nothing but the unsampled context its event carries.

    The decision is made before any SDK call: a new trace is drawn at `sample_ratio`
    as the request arrives. A sender's `traceparent` with `trust_incoming` waits for the
    request's verification, then for its outcome: only a newly accepted event joins the
    sender's trace (`core.trace_context.request_parent`), since neither an
    unauthenticated client nor anyone replaying a captured delivery (answered
    `duplicate`) may choose to be recorded. Until the outcome is known nothing is
    started: the event carries the span id its request's span will have (provisional),
    and that span and its commit wait are recorded, back-dated, when the request is done
    (its log lines then carry no trace ids). Any other outcome draws at `sample_ratio`,
    the sender's span kept as a link."""

    __slots__ = ("_arrived_ns", "_commit_ns", "_incoming", "_joining", "_label", "_route",
                 "_token", "_trust", "_waiting", "carried", "span")  # fmt: skip

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
        self._joining: _Joining | None = None
        self._token: object = None
        self._arrived_ns: int | None = None
        self._commit_ns: tuple[int, int] | None = None  # the commit wait, recorded later
        self._waiting = incoming is not None and trust
        if self._waiting:
            self._arrived_ns = time.time_ns()  # decided once the request is done
        else:  # untrusted, the sender's span is only a link
            self._draw(links=() if incoming is None else (incoming,), now=True)

    def _attributes(self) -> dict[str, str | int | float | bool]:
        return {
            "http.request.method": "POST",
            "http.route": self._route,
            "gateway.provider": self._label,
        }

    def _draw(self, links: tuple[TraceParent, ...], now: bool) -> None:
        """A trace of our own at `sample_ratio`; `now`: while the request runs (its log
        lines join the span), else as it ends."""
        self._waiting = False
        context = tracing.new_trace()
        if not context.sampled:
            # No span: the event carries the decision so its publish and settlement
            # skip the SDK too.
            self.carried = str(context)
            return
        self.span = tracing.start_root(self._route, kind="server", attributes=self._attributes(),
                                       links=links, start_ns=self._arrived_ns)  # fmt: skip
        if now:
            self._token = tracing.activate(self.span)  # log lines of the request carry its ids

    def shaped(self, event: Event) -> Event:
        """The request is verified and shaped into `event`: a trusted sender's request
        now waits for its outcome, its event carrying the provisional `traceparent`.
        Otherwise name the event on the request's span; the event (and so its row)
        carries the span's `traceparent` (or the unsampled one), so its publish joins
        this trace, or skips it, whoever publishes it."""
        incoming = self._incoming
        if self._waiting and incoming is not None:
            self._waiting = False
            flags = SAMPLED if incoming.sampled else 0
            provisional = TraceParent(incoming.trace_id, tracing.new_span_id(), flags)
            self._joining = _Joining(incoming, provisional, event)
            return replace(event, traceparent=str(provisional))
        _name(self.span, event)
        return replace(event, traceparent=tracing.traceparent(self.span) or self.carried)

    def commit_wait(self) -> contextlib.AbstractContextManager[object]:
        """`with trace.commit_wait():` around the group commit: a child span when the
        request is sampled, its times when the request still waits for its outcome."""
        if self._joining is not None:
            return _Timed(self)
        return tracing.child(self.span, "commit.wait")

    def done(self, outcome: str, status: int | None, error_class: str | None) -> None:
        """The request's outcome (accepted, duplicate, a rejection, unavailable), its
        HTTP status, and the error class of a rejection or of an event parked on
        arrival. A request never verified draws its own sampling now, and so does a
        trusted sender's whose event was not newly accepted."""
        if self._waiting:
            self._draw(links=(), now=False)  # unverified: the sender's span not even a link
        elif self._joining is not None:
            self._join_or_draw(self._joining, outcome == Outcome.ACCEPTED.value)
        span = self.span
        attributes: dict[str, str | int | float | bool] = {"gateway.outcome": outcome}
        if status is not None:
            attributes["http.response.status_code"] = status
        tracing.set_attributes(span, attributes)
        if error_class is not None:
            tracing.failed(span, error_class)
        tracing.deactivate(self._token)
        tracing.end(span)

    def _join_or_draw(self, joining: _Joining, accepted: bool) -> None:
        incoming, provisional = joining.incoming, joining.provisional
        joined = request_parent(incoming, self._trust, verified=True, accepted=accepted)
        if joined is None:
            self._draw(links=(incoming,), now=False)
        elif provisional.sampled:  # the span id the row already carries
            self.span = tracing.start(self._route, kind="server", attributes=self._attributes(),
                                      parent=joined, start_ns=self._arrived_ns,
                                      span_id=provisional.span_id)  # fmt: skip
        _name(self.span, joining.event)
        if self._commit_ns is not None:  # the request got as far as its commit
            started_ns, ended_ns = self._commit_ns
            wait = tracing.start_child(self.span, "commit.wait", start_ns=started_ns)
            tracing.end(wait, ended_ns)


def _name(span: tracing.Span | None, event: Event) -> None:
    attributes: dict[str, str | int | float | bool] = {
        "gateway.provider": event.provider,
        "gateway.event_id": event.event_id,
    }
    if event.event_type is not None:
        attributes["gateway.event_type"] = event.event_type
    if event.subject is not None:
        attributes["gateway.subject"] = event.subject
    tracing.set_attributes(span, attributes)


class _Timed:
    """The commit wait of a request whose span is not started yet: its times only."""

    __slots__ = ("_started_ns", "_trace")

    def __init__(self, trace: RequestTrace) -> None:
        self._trace = trace
        self._started_ns = 0

    def __enter__(self) -> None:
        self._started_ns = time.time_ns()

    def __exit__(self, *exc: object) -> None:
        self._trace._commit_ns = (self._started_ns, time.time_ns())


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
        if span is None:  # not sampled: no span to end, and no line (as with tracing off)
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
