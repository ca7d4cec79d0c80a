"""The settlement side's spans: one per delivery of a message, a child of the publish
that sent it (the message's `traceparent`, written by this gateway's own publisher), so
every attempt of a retried settlement shows in the payment's trace.

Every helper takes a span or None and does nothing for None: tracing off, or a delivery
of an unsampled trace, has no span, and its steps none either. Only `settle_span`, the
start of it all, reads `gateway.tracing.ENABLED`.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from decimal import Decimal

from gateway import tracing
from gateway.adapters.jetstream.consumer import Delivery
from gateway.core.events.model import Event
from gateway.core.trace_context import HEADER, parse_traceparent
from gateway.errors import ErrorClass, error_class_of

#: `Settler.rate_from`: a currency and delivery number to (rate, where it came from).
RateLookUp = Callable[[str, int], Awaitable[tuple[Decimal, str]]]


def settle_span(msg: Delivery, event: Event, deliveries: int) -> tracing.Span | None:
    """The consumer span of one delivery, or None (no SDK call) while tracing is off or
    when its trace is not sampled: the message's `traceparent` says so (flags 00), or,
    without a usable one (published while tracing was off), a new trace drawn at
    `sample_ratio` says so."""
    if not tracing.ENABLED:  # once per event: off, no header is even parsed
        return None
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


@contextlib.contextmanager
def ledger_post(spans: Sequence[tracing.Span | None]) -> Iterator[None]:
    """`with ledger_post(spans):` around posting a batch together: one `ledger.post`
    child per event of it (None: none), the same interval (one ledger transaction),
    each in its own event's trace; a post that raises marks each failed."""
    started_ns = time.time_ns()
    error_class: ErrorClass | None = None
    try:
        yield
    except BaseException as exc:
        error_class = error_class_of(exc)
        raise
    finally:
        attributes = {"gateway.batch_size": len(spans)}
        for parent in spans:
            child = tracing.start_child(
                parent, "ledger.post", attributes=attributes, start_ns=started_ns
            )
            if error_class is not None:
                tracing.failed(child, error_class)
            tracing.end(child)


async def rate(
    look_up: RateLookUp, parent: tracing.Span | None, currency: str, attempt: int
) -> Decimal:
    """The rate from `look_up` (`Settler.rate_from`) in a `currency.rate` span, a child
    of `parent` (None: no span), that says where the rate came from
    (`gateway.rate.source`: memory, service, cache, identity); a look-up that fails is
    marked with its error class instead."""
    with tracing.child(parent, "currency.rate", {"gateway.currency": currency}) as span:
        found, source = await look_up(currency, attempt)
        tracing.set_attributes(span, {"gateway.rate.source": source})
    return found
