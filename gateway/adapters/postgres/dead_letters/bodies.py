"""The bodies a dead-letter list reads to show each row's amount: one query for a page
of rows, each body only when it is small enough to read for a list (larger ones, and
bodies retention removed, come back as None; the list leaves their amount blank)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gateway.adapters.postgres import Conn, translate_errors

_BODIES = """
SELECT d.id, d.provider, p.event_type,
       CASE WHEN d.payload_removed_at IS NULL AND octet_length(d.payload) <= $2
            THEN d.payload END AS body
FROM dlq_webhooks d
LEFT JOIN processed_webhooks p ON p.provider = d.provider AND p.event_id = d.event_id
WHERE d.id = ANY($1::bigint[])"""
# The event's row is found by (provider, event_id), its UNIQUE key: a settlement dead
# letter does not carry `webhook_id`.


@dataclass(frozen=True)
class StoredBody:
    provider: str
    event_type: str | None  # from the event's own row; None without one
    body: bytes | None  # None: removed, or over the list's limit


async def bodies_of(conn: Conn, ids: Sequence[int], max_bytes: int) -> dict[int, StoredBody]:
    """Each row's provider, event type and body (up to `max_bytes`), by id."""
    if not ids:
        return {}
    with translate_errors():
        records = await conn.fetch(_BODIES, list(ids), max_bytes)
    return {
        int(r["id"]): StoredBody(
            r["provider"], r["event_type"], None if r["body"] is None else bytes(r["body"])
        )
        for r in records
    }
