"""The `alert_lease` row (sql/027): which process evaluates the in-process alerts now.

One holder at a time, so two processes started with different thresholds cannot answer
each other's notices (an episode fired by one and resolved by the other, again and
again). The holder renews the lease every evaluation; once it stops (or stops renewing
for `ttl_s`), the next process to ask takes it over.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from gateway.adapters.postgres import Conn, translate_errors

_TAKE = """
INSERT INTO alert_lease AS l (name, holder, expires_at, settings, renewed_at)
VALUES ($1, $2, now() + make_interval(secs => $3), $4::jsonb, now())
ON CONFLICT (name) DO UPDATE
SET holder = excluded.holder, expires_at = excluded.expires_at,
    settings = excluded.settings, renewed_at = excluded.renewed_at
WHERE l.holder = excluded.holder OR l.expires_at < now()
RETURNING holder"""


async def hold(
    conn: Conn, name: str, holder: str, ttl_s: float, settings: Mapping[str, Any]
) -> bool:
    """Take or renew the lease `name` for `ttl_s`; whether `holder` holds it now."""
    with translate_errors():
        taken = await conn.fetchval(_TAKE, name, holder, ttl_s, orjson.dumps(settings).decode())
    return taken is not None


async def release(conn: Conn, name: str, holder: str) -> None:
    """Give the lease up (stopping), so another process takes it at its next evaluation."""
    with translate_errors():
        await conn.execute("DELETE FROM alert_lease WHERE name = $1 AND holder = $2", name, holder)


async def holder_of(conn: Conn, name: str) -> tuple[str, dict[str, Any]] | None:
    """The live lease's holder and the settings it judges with, or None."""
    with translate_errors():
        row = await conn.fetchrow(
            "SELECT holder, settings FROM alert_lease WHERE name = $1 AND expires_at >= now()",
            name,
        )
    if row is None:
        return None
    settings = row["settings"]
    return row["holder"], orjson.loads(settings) if isinstance(settings, str) else dict(settings)
