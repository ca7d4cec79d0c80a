"""How far a durable consumer is behind: its pending count from JetStream's consumer
info, asked with a bounded wait so a page that shows it never hangs on NATS."""

from __future__ import annotations

import asyncio
import inspect
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import nats.js.errors

from gateway.adapters.jetstream.publish import NATS_ERRORS
from gateway.errors import BrokerUnavailable

#: How long the question may take; past it the figure is "unavailable".
INFO_TIMEOUT_S = 1.0


@dataclass(frozen=True)
class ConsumerBacklog:
    """Messages the consumer has not been delivered yet (`num_pending`) and delivered
    but not acknowledged (`num_ack_pending`); None with the reason when NATS could not
    say."""

    pending: int | None
    ack_pending: int | None = None
    unavailable: str | None = None
    #: When the oldest message not yet acknowledged was stored (asked for with
    #: `subjects`); None when nothing waits or it was not asked.
    oldest_at: datetime | None = None


async def _context(connection: Any) -> Any:
    """A JetStream context from what the console was given: a context, a nats client,
    or the gateway's broker (whose `jetstream()` waits for its stream)."""
    if hasattr(connection, "consumer_info"):
        return connection
    made = connection.jetstream()
    return await made if inspect.isawaitable(made) else made


async def consumer_backlog(
    connection: Any,
    stream: str,
    durable: str,
    timeout_s: float = INFO_TIMEOUT_S,
    *,
    subjects: tuple[str, ...] | None = None,
) -> ConsumerBacklog:
    """The durable consumer's backlog, or why it is unknown (no connection, NATS down or
    slow, no such consumer). Never raises for NATS's sake.

    With `subjects` (the consumer's filter; empty for all), also when the oldest message
    it has not had acknowledged was stored: the first of those subjects after its ack
    floor."""
    if connection is None:
        return ConsumerBacklog(None, unavailable="no NATS connection configured")
    try:
        async with asyncio.timeout(timeout_s):
            js = await _context(connection)
            info = await js.consumer_info(stream, durable, timeout=timeout_s)
            waiting = int(info.num_pending or 0) + int(info.num_ack_pending or 0)
            oldest_at = None
            if subjects is not None and waiting:
                after = int(info.ack_floor.stream_seq or 0) + 1 if info.ack_floor else 1
                oldest_at = await _first_stored_at(js, stream, after, subjects or (">",))
    except nats.js.errors.NotFoundError:
        return ConsumerBacklog(None, unavailable=f"no consumer {durable!r} on {stream}")
    except (*NATS_ERRORS, BrokerUnavailable) as exc:  # TimeoutError: the bound passed
        return ConsumerBacklog(None, unavailable=f"NATS did not answer ({type(exc).__name__})")
    return ConsumerBacklog(
        int(info.num_pending or 0), int(info.num_ack_pending or 0), None, oldest_at
    )


async def _first_stored_at(
    js: Any, stream: str, seq: int, subjects: tuple[str, ...]
) -> datetime | None:
    """When the first message at or after `seq` on any of `subjects` was stored."""
    times = []
    for subject in subjects:
        try:
            found = await js.get_msg(stream, seq=seq, subject=subject, next=True)
        except nats.js.errors.NotFoundError:
            continue
        if found.time is not None:
            times.append(found.time)
    return min(times, default=None)
