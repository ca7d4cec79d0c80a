"""What `gateway forward` keeps in PostgreSQL: each retrying event's failed attempts
(`forward_attempts`), its dead letters (`dlq_webhooks`, stage `forward:NAME`), and the
keys those dead letters hold."""

from __future__ import annotations

import enum
from typing import NamedTuple

from gateway.adapters.postgres import Conn, translate_errors
from gateway.adapters.postgres.webhooks import record_failure
from gateway.core.events.model import Event, Failure, forward_stage
from gateway.core.failures.excerpt import capped

_FAILURES = """
SELECT failures FROM forward_attempts WHERE destination = $1 AND provider = $2 AND event_id = $3
"""
_ADD_FAILURE = """
INSERT INTO forward_attempts AS a (destination, provider, event_id, failures, last_error,
                                   order_key, key_seq, retry_due_at)
VALUES ($1, $2, $3, 1, $4, $5, $6, now() + make_interval(secs => $7))
ON CONFLICT (destination, provider, event_id) DO UPDATE
SET failures = a.failures + 1, last_failed_at = now(), last_error = EXCLUDED.last_error,
    order_key = EXCLUDED.order_key, key_seq = EXCLUDED.key_seq,
    retry_due_at = EXCLUDED.retry_due_at
RETURNING failures
"""
_RETRYING_KEYS = """
SELECT provider, order_key, event_id, key_seq,
       extract(epoch FROM retry_due_at - now())::float8 AS due_in_s
FROM forward_attempts
WHERE destination = $1 AND order_key IS NOT NULL AND key_seq IS NOT NULL
"""
_FORGET = "DELETE FROM forward_attempts WHERE destination = $1 AND provider = $2 AND event_id = $3"
_HOLD_ON = """
SELECT bool_or(event_id = $4) AS own, count(*) > 0 AS any FROM dlq_webhooks
WHERE stage = $1 AND provider = $2 AND order_key = $3 AND NOT is_resolved
"""
_PLACE = "SELECT event_type, order_key, key_seq FROM processed_webhooks WHERE id = $1"
_HELD_KEYS = """
SELECT DISTINCT provider, order_key FROM dlq_webhooks
WHERE stage = $1 AND NOT is_resolved AND order_key IS NOT NULL
"""


async def failures(conn: Conn, destination: str, provider: str, event_id: str) -> int:
    """How many attempts of the event have failed so far (0: none recorded)."""
    with translate_errors():
        found = await conn.fetchval(_FAILURES, destination, provider, event_id)
    return 0 if found is None else int(found)


class RetryingKey(NamedTuple):
    """A key whose event waits for a retry: its later events wait behind it."""

    provider: str
    order_key: str
    event_id: str
    key_seq: int
    due_in_s: float


async def add_failure(
    conn: Conn,
    destination: str,
    provider: str,
    event_id: str,
    error: str,
    *,
    order_key: str | None = None,
    key_seq: int | None = None,
    retry_in_s: float = 0.0,
) -> int:
    """Count one more failed attempt, with the event's place in its key and when its
    retry is due; the failures so far, this one included."""
    with translate_errors():
        return int(
            await conn.fetchval(
                _ADD_FAILURE,
                destination,
                provider,
                event_id,
                capped(error),
                order_key,
                key_seq,
                retry_in_s,
            )
        )


async def retrying_keys(conn: Conn, destination: str) -> list[RetryingKey]:
    """Every key of the destination with an event waiting for its retry."""
    with translate_errors():
        rows = await conn.fetch(_RETRYING_KEYS, destination)
    return [
        RetryingKey(r["provider"], r["order_key"], r["event_id"], r["key_seq"], r["due_in_s"])
        for r in rows
    ]


async def forget(conn: Conn, destination: str, provider: str, event_id: str) -> None:
    """The event is delivered or parked: its attempts are no longer needed."""
    with translate_errors():
        await conn.execute(_FORGET, destination, provider, event_id)


async def park(
    conn: Conn,
    destination: str,
    event: Event,
    failure: Failure,
    attempts: int,
) -> int:
    """File the event's dead letter at `forward:NAME` (its own row is found by its key)
    and drop its attempts, in the caller's transaction; the dead letter's id."""
    row_id = await record_failure(conn, None, forward_stage(destination), event, failure, attempts)
    await forget(conn, destination, event.provider, event.event_id)
    return row_id


async def held_keys(conn: Conn, destination: str) -> set[tuple[str, str]]:
    """(provider, order_key) of every key an open dead letter of the destination holds."""
    with translate_errors():
        rows = await conn.fetch(_HELD_KEYS, forward_stage(destination))
    return {(r["provider"], r["order_key"]) for r in rows}


class HoldOn(enum.StrEnum):
    """What holds a key, as an event of it sees it."""

    RELEASED = "released"  # no open dead letter of the destination has the key
    HELD = "held"  # another event's open dead letter holds it
    OWN = "own"  # this event's own dead letter is open (its park's ack was lost)


async def hold_on(
    conn: Conn, destination: str, provider: str, order_key: str, event_id: str
) -> HoldOn:
    """Whether, and by whom, the destination's open dead letters hold the key."""
    with translate_errors():
        row = await conn.fetchrow(
            _HOLD_ON, forward_stage(destination), provider, order_key, event_id
        )
    if row is None or not row["any"]:
        return HoldOn.RELEASED
    return HoldOn.OWN if row["own"] else HoldOn.HELD


async def event_place(conn: Conn, webhook_id: int) -> tuple[str, str | None, int | None]:
    """An event row's type, ordering key and number (what its message's headers carried):
    a replayed delivery carries them again."""
    with translate_errors():
        row = await conn.fetchrow(_PLACE, webhook_id)
    if row is None:
        return "", None, None
    return row["event_type"] or "", row["order_key"], row["key_seq"]
