"""The `settlement_unmapped` table: each payment provider's event types that moved no
money, with how many events and when. Written by the settle processes; the console's
overview reads it (`console_stats.unmapped_types`)."""

from __future__ import annotations

from collections.abc import Mapping

from gateway.adapters.postgres import Conn, translate_errors

_ADD = """
INSERT INTO settlement_unmapped AS u (provider, event_type, events)
SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[])
ON CONFLICT (provider, event_type) DO UPDATE
SET events = u.events + excluded.events, last_seen = now()"""


async def add(conn: Conn, counts: Mapping[tuple[str, str], int]) -> None:
    """Add `counts` (by provider and type) to what is recorded, in one statement."""
    if not counts:
        return
    pairs = sorted(counts)  # one order: two processes never wait on each other in a cycle
    with translate_errors():
        await conn.execute(
            _ADD, [p for p, _ in pairs], [t for _, t in pairs], [counts[p] for p in pairs]
        )
