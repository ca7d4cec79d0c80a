"""Replaying `publish` dead letters: the event was recorded but the outbox gave up on it
(too large for the broker, or unconfirmed too many times). Replaying hands the row back
to the outbox with a fresh attempt count; the relay publishes it on its next sweep.

Nothing is published from here: the relay owns publishing, and if the broker still
refuses the event (its `max_payload` was not raised, say) the relay parks it again with
a new dead letter, so a replay can never wedge the outbox.
"""

from __future__ import annotations

from gateway.adapters.postgres import Pool, connection
from gateway.adapters.postgres.parking import unpark
from gateway.core.dlq.model import DlqRow
from gateway.dlq.parts import ReplayContext, StageHandler
from gateway.errors import EventNotRecorded


class PublishReplay:
    """Re-queues a parked row for the outbox relay (the `publish` stage)."""

    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    async def __call__(self, row: DlqRow) -> None:
        async with connection(self._pool) as conn:
            published = await unpark(conn, row.provider, row.event_id)
        if published is None:
            raise EventNotRecorded(f"no processed_webhooks row for {row.provider}/{row.event_id}")


async def publish_handler(ctx: ReplayContext) -> StageHandler:
    """Build the `publish` handler; it needs only the database."""
    return PublishReplay(ctx.pool)
