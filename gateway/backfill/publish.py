"""Publishing what a backfill page recovered, at once; whatever NATS does not take now
stays in the outbox for the relay of `gateway serve` or `gateway relay`.

The publisher applies the relay's size rule (`OneShotPublisher.fits`, the relay's own
`message_bytes`): an event larger than the server's `max_payload` with its headers is
never sent, since the server would answer it by closing the connection and every later
event of the pass would go unpublished. It is parked at stage `publish` as
`PAYLOAD_TOO_LARGE`, exactly as the relay parks one, so the relay's walk passes it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from gateway.adapters.jetstream.broker import message_headers
from gateway.adapters.jetstream.one_shot import OneShotPublisher
from gateway.adapters.postgres import Pool, transaction
from gateway.adapters.postgres.webhooks import StoredEvent
from gateway.errors import BrokerUnavailable
from gateway.ingest.parking import park_unpublishable, too_large_error
from gateway.metrics import Metrics

log = logging.getLogger(__name__)


async def publish_recovered(
    pool: Pool,
    publisher: OneShotPublisher,
    stored: Sequence[StoredEvent],
    metrics: Metrics,
) -> tuple[set[int], int]:
    """Publish `stored` (events with a subject), awaiting each PubAck; (the webhook ids
    published, how many were left to the outbox relay). Parked rows are neither."""
    acked: set[int] = set()
    too_large: list[StoredEvent] = []
    try:
        await publisher.connect()
        for item in stored:
            headers = message_headers(item)
            if not publisher.fits(item.event.body, headers):
                too_large.append(item)
                continue
            await publisher.publish(item.event.subject or "", item.event.body, headers)
            acked.add(item.webhook_id)
    except BrokerUnavailable as exc:
        log.warning(
            "NATS did not take recovered events; the outbox relay will publish them",
            extra={"provider": stored[0].event.provider, "error": str(exc)},
        )
    # Nothing is marked published: the relay publishes these rows too when its walk
    # reaches them, and the duplicate window absorbs it.
    await _park_too_large(pool, too_large, metrics)
    return acked, len(stored) - len(acked) - len(too_large)


async def _park_too_large(pool: Pool, rows: Sequence[StoredEvent], metrics: Metrics) -> None:
    for stored in rows:
        async with transaction(pool) as conn:
            await park_unpublishable(conn, stored, too_large_error(stored), metrics, log)
