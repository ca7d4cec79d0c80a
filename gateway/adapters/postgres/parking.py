"""Parking rows the outbox cannot publish: a dead letter at stage `publish`, and a mark
on the `processed_webhooks` row (`publish_parked_at`) so the relay's walk passes it.
Replaying the dead letter clears the mark and gives the row a fresh transaction id, which
puts it ahead of the outbox cursor: the relay tries it again."""

from __future__ import annotations

from gateway.adapters.postgres import Conn, translate_errors
from gateway.adapters.postgres.webhooks import StoredEvent, record_failure
from gateway.core.events.model import Failure, Stage

_PARK = """
UPDATE processed_webhooks SET publish_parked_at = now()
WHERE id = $1 AND publish_parked_at IS NULL
RETURNING publish_attempts
"""

# Only a parked row is handed back to the outbox, with its count reset so the bound
# applies afresh. A parked row never reached the stream (one recorded before sql/010
# may have: `published_at` says so).
_UNPARK = """
WITH target AS (
    SELECT id, publish_parked_at IS NULL OR published_at IS NOT NULL AS published
    FROM processed_webhooks WHERE provider = $1 AND event_id = $2
    FOR UPDATE
), unparked AS (
    UPDATE processed_webhooks p
    SET publish_parked_at = NULL, publish_attempts = 0, outbox_xid = pg_current_xact_id()
    FROM target t WHERE p.id = t.id AND NOT t.published
    RETURNING p.id
)
SELECT published FROM target
"""


async def park(conn: Conn, stored: StoredEvent, failure: Failure) -> int | None:
    """Park one unpublished row; return its dead letter's id (None: parked meanwhile by
    someone else). Run it in a transaction with the publish's other writes."""
    with translate_errors():
        attempts = await conn.fetchval(_PARK, stored.webhook_id)
    if attempts is None:
        return None
    return await record_failure(
        conn, stored.webhook_id, Stage.PUBLISH, stored.event, failure, max(1, int(attempts))
    )


async def unpark(conn: Conn, provider: str, event_id: str) -> bool | None:
    """Hand a parked row back to the outbox. Returns whether it was published already
    (True: nothing to do), or None when there is no such row."""
    with translate_errors():
        published = await conn.fetchval(_UNPARK, provider, event_id)
    return None if published is None else bool(published)
