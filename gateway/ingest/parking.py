"""Parking what the outbox must not try again, so no row can hold publishing up: a row
too large for the broker's `max_payload` (it is never sent: the server would close the
connection), and one unconfirmed `[outbox] max_publish_attempts` times."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from gateway.adapters.jetstream.broker import PublishResult
from gateway.adapters.postgres import Conn
from gateway.adapters.postgres.parking import park
from gateway.adapters.postgres.webhooks import StoredEvent
from gateway.core.events.model import Failure, Stage
from gateway.errors import PayloadTooLarge, PublishAttemptsExhausted
from gateway.metrics import Metrics
from gateway.settings import OutboxSettings

log = logging.getLogger(__name__)


async def park_failed(
    conn: Conn,
    batch: Sequence[StoredEvent],
    result: PublishResult,
    attempts: dict[int, int],
    settings: OutboxSettings,
    metrics: Metrics,
) -> set[int]:
    """Park the rows of a published batch that must not be tried again: too large for the
    broker, or unconfirmed for the `max_publish_attempts`-th time (`attempts` by row).
    Returns the ids of the rows now parked (by this call or, meanwhile, another)."""
    too_large = set(result.too_large)
    parked: set[int] = set()
    limit = settings.max_publish_attempts
    for stored in batch:
        error: PayloadTooLarge | PublishAttemptsExhausted
        if stored.webhook_id in too_large:
            error = too_large_error(stored)
        elif attempts.get(stored.webhook_id, 0) >= limit:
            error = PublishAttemptsExhausted(f"not acknowledged by the stream after {limit} tries")
        else:
            continue
        parked.add(stored.webhook_id)
        await park_unpublishable(conn, stored, error, metrics, log)
    return parked


def too_large_error(stored: StoredEvent) -> PayloadTooLarge:
    """The failure of a row the broker's `max_payload` will never take."""
    return PayloadTooLarge(
        f"{len(stored.event.body)}-byte body with its headers exceeds the broker's "
        "max_payload; it can never be published"
    )


async def park_unpublishable(
    conn: Conn,
    stored: StoredEvent,
    error: PayloadTooLarge | PublishAttemptsExhausted,
    metrics: Metrics,
    logger: logging.Logger,
) -> bool:
    """Park one row at stage `publish`, counted and logged on `logger` (the caller's);
    False when someone else parked it meanwhile."""
    if await park(conn, stored, Failure(error.error_class, str(error))) is None:
        return False
    metrics.dlq_total.inc(stage=Stage.PUBLISH.value, error_class=error.error_class)
    logger.warning(
        "event parked: it will not be published",
        extra={
            "webhook_id": stored.webhook_id,
            "provider": stored.event.provider,
            "event_id": stored.event.event_id,
            "error_class": error.error_class,
            "body_bytes": len(stored.event.body),
        },
    )
    return True
