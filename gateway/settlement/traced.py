"""The settlement side's spans: one per delivery of a message, a child of the publish
that sent it (the message's `traceparent`, written by this gateway's own publisher), so
every attempt of a retried settlement shows in the payment's trace.

Called only while `gateway.tracing.ENABLED`; the worker checks it first. A delivery of
an unsampled trace has no span, and its steps (`tracing.current_child`) none either.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from decimal import Decimal

from gateway import tracing
from gateway.adapters.jetstream.consumer import Delivery
from gateway.core.model import Event
from gateway.core.trace_context import HEADER, parse_traceparent

#: `Settler.rate_from`: a currency and delivery number to (rate, where it came from).
RateLookUp = Callable[[str, int], Awaitable[tuple[Decimal, str]]]


def settle_span(msg: Delivery, event: Event, deliveries: int) -> tracing.Span | None:
    """The consumer span of one delivery, or None (no SDK call) when its trace is not
    sampled: the message's `traceparent` says so (flags 00), or, without a usable one
    (published while tracing was off), a new trace drawn at `sample_ratio` says so."""
    parent = parse_traceparent(msg.headers.get(HEADER))
    drawn = parent is None
    if not (tracing.new_trace() if parent is None else parent).sampled:
        return None
    attributes: dict[str, str | int | float | bool] = {
        "messaging.system": "nats",
        "messaging.destination.name": msg.subject,
        "gateway.provider": event.provider,
        "gateway.event_id": event.event_id,
        "gateway.attempt": deliveries,
    }
    if event.event_type is not None:
        attributes["gateway.event_type"] = event.event_type
    if drawn:
        return tracing.start_root("settle", kind="consumer", attributes=attributes)
    return tracing.start("settle", kind="consumer", attributes=attributes, parent=parent)


def ledger_spans(spans: list[tracing.Span | None], started_ns: int, batch_size: int) -> None:
    """One `ledger.post` child per event of a batch posted together: the same interval
    (one ledger transaction), each in its own event's trace."""
    for parent in spans:
        if parent is not None:
            child = tracing.start(
                "ledger.post",
                attributes={"gateway.batch_size": batch_size},
                parent=parent,
                start_ns=started_ns,
            )
            child.end()


async def rate(
    look_up: RateLookUp, parent: tracing.Span | None, currency: str, attempt: int
) -> Decimal:
    """`Settler.rate` (`look_up` is its `rate_from`) in a `currency.rate` span, a child
    of `parent` (None: of the current span), that says where the rate came from
    (`gateway.rate.source`: memory, service, cache, identity); a look-up that fails is
    marked with its error class instead."""
    attributes = {"gateway.currency": currency}
    step = (
        tracing.current_child("currency.rate", attributes)
        if parent is None
        else tracing.child(parent, "currency.rate", attributes)
    )
    with step as span:
        found, source = await look_up(currency, attempt)
        if span is not None:
            span.set_attribute("gateway.rate.source", source)
    return found
