"""The `dlq_alert_state` table: what the alert receiver was last told, per rule and key.

Kept in PostgreSQL so that several gateway processes, and a restarted one, notify once
per episode: a process decides under the row's lock and records only what was delivered.
"""

from __future__ import annotations

from datetime import datetime

from gateway.adapters.postgres import Conn, translate_errors
from gateway.core.health.alerting import AlertState, Notice, Reading
from gateway.errors import GatewayError

#: (rule, key) -> (the state last notified, since when).
StoredStates = dict[tuple[str, str], tuple[AlertState, datetime]]


async def alert_states(conn: Conn) -> StoredStates:
    """Every stored state, read without locks (to skip conditions with nothing to send)."""
    with translate_errors():
        records = await conn.fetch("SELECT rule, key, state, since FROM dlq_alert_state")
    return {(r["rule"], r["key"]): (AlertState(r["state"]), r["since"]) for r in records}


async def lock_alert_state(
    conn: Conn, reading: Reading, now: datetime
) -> tuple[AlertState, datetime | None]:
    """Lock the reading's state row (created as `ok` if new) until the transaction ends.

    Must run inside a transaction; two processes deciding the same notice take turns.
    """
    with translate_errors():
        await conn.execute(
            "INSERT INTO dlq_alert_state (rule, key, state, since) VALUES ($1, $2, 'ok', $3) "
            "ON CONFLICT (rule, key) DO NOTHING",
            reading.rule.value,
            reading.key,
            now,
        )
        record = await conn.fetchrow(
            "SELECT state, since FROM dlq_alert_state WHERE rule = $1 AND key = $2 FOR UPDATE",
            reading.rule.value,
            reading.key,
        )
    if record is None:  # inserted just above, in this transaction
        raise GatewayError("dlq_alert_state row vanished")
    return AlertState(record["state"]), record["since"]


async def save_alert_state(conn: Conn, notice: Notice) -> None:
    """Record a delivered notice as what the receiver now knows."""
    with translate_errors():
        await conn.execute(
            "UPDATE dlq_alert_state SET state = $3, since = $4, value = $5, notified_at = now() "
            "WHERE rule = $1 AND key = $2",
            notice.reading.rule.value,
            notice.reading.key,
            notice.state.value,
            notice.since,
            notice.reading.value,
        )
