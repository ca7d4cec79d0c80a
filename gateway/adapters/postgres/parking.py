"""Parking rows the outbox cannot publish: a dead letter at stage `publish`, and a mark
on the `processed_webhooks` row (`publish_parked_at`) so the relay stops claiming it.
Replaying the dead letter clears the mark and the relay tries the row again."""

from __future__ import annotations

from gateway.adapters.postgres import Conn, translate_errors
from gateway.adapters.postgres.webhooks import StoredEvent, record_failure
from gateway.core.model import Failure, Stage

_PARK = """
UPDATE processed_webhooks SET publish_parked_at = now()
WHERE id = $1 AND published_at IS NULL AND publish_parked_at IS NULL
RETURNING publish_attempts
"""

# Only a row still unpublished is handed back to the outbox, with its count reset so the
# bound applies afresh.
_UNPARK = """
UPDATE processed_webhooks SET publish_parked_at = NULL, publish_attempts = 0
WHERE provider = $1 AND event_id = $2
RETURNING published_at IS NOT NULL AS published
"""


async def park(conn: Conn, stored: StoredEvent, failure: Failure) -> int | None:
    """Park one unpublished row; return its dead letter's id (None: published or parked
    meanwhile by someone else). Run it in a transaction with the publish's other writes."""
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
