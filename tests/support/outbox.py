"""The outbox cursor, moved by hand: for tests that need rows already on the stream (or
still owed) without running a relay; and a relay swept until it has caught up."""

from __future__ import annotations

from collections.abc import Collection

from gateway.adapters.postgres import Conn
from gateway.ingest.relay import OutboxRelay, Sweep

_PASS_ALL = """
UPDATE outbox_cursor
SET done_snapshot = pg_current_snapshot(), target_snapshot = pg_current_snapshot(),
    after_xid = '0', after_id = 0, advanced_at = now()
WHERE name = 'default'
"""


async def pass_cursor(conn: Conn, *, owed: Collection[int] = ()) -> None:
    """Move the cursor past every committed row, as a relay would once the stream took
    them; the rows whose ids are in `owed` get a fresh transaction id and stay owed."""
    async with conn.transaction():
        await conn.execute(_PASS_ALL)
        if owed:
            await conn.execute(
                "UPDATE processed_webhooks SET outbox_xid = pg_current_xact_id()"
                " WHERE id = ANY($1::bigint[])",
                list(owed),
            )


async def sweep_until_still(relay: OutboxRelay) -> list[Sweep]:
    """Sweep until a sweep moves nothing or is held by a row (the walk has caught up)."""
    done = [await relay.sweep()]
    while done[-1].moved and not done[-1].stuck:
        done.append(await relay.sweep())
    return done
