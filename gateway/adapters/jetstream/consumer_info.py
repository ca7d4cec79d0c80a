"""How far a durable consumer is behind: its pending count from JetStream's consumer
info, asked with a bounded wait so a page that shows it never hangs on NATS."""

from __future__ import annotations

import asyncio
import inspect
from dataclasses import dataclass
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


async def _context(connection: Any) -> Any:
    """A JetStream context from what the console was given: a context, a nats client,
    or the gateway's broker (whose `jetstream()` waits for its stream)."""
    if hasattr(connection, "consumer_info"):
        return connection
    made = connection.jetstream()
    return await made if inspect.isawaitable(made) else made


async def consumer_backlog(
    connection: Any, stream: str, durable: str, timeout_s: float = INFO_TIMEOUT_S
) -> ConsumerBacklog:
    """The durable consumer's backlog, or why it is unknown (no connection, NATS down or
    slow, no such consumer). Never raises for NATS's sake."""
    if connection is None:
        return ConsumerBacklog(None, unavailable="no NATS connection configured")
    try:
        async with asyncio.timeout(timeout_s):
            js = await _context(connection)
            info = await js.consumer_info(stream, durable, timeout=timeout_s)
    except nats.js.errors.NotFoundError:
        return ConsumerBacklog(None, unavailable=f"no consumer {durable!r} on {stream}")
    except (*NATS_ERRORS, BrokerUnavailable) as exc:  # TimeoutError: the bound passed
        return ConsumerBacklog(None, unavailable=f"NATS did not answer ({type(exc).__name__})")
    return ConsumerBacklog(int(info.num_pending or 0), int(info.num_ack_pending or 0))
