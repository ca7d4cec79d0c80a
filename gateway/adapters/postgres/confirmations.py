"""The `confirmations` table (sql/029): fetches owed by the confirm stage.

A webhook that only names an object is recorded unpublished with its fetch owed here, in
the same transaction (`owe_fetches`, called by `webhooks.record_events`). `gateway
confirm` claims due fetches for a lease (`claim_due`), fetches without holding a
transaction, and settles each: the events the answer holds recorded through the gate,
then the fetch marked confirmed (`mark_fetched`), or the next try scheduled
(`retry_later`), or the fetch parked beside its dead letter (`mark_parked`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import orjson

from gateway.adapters.postgres import Conn, translate_errors
from gateway.core.confirm.decisions import ConfirmState
from gateway.core.events.model import Event

# New requests owe a fetch; a repeat of one asks for another (the object may have
# changed since: Mollie sends the same `id` on every change), unless its fetch is parked,
# which waits for a person's replay. A repeat during a fetch moves `armed_at` past the
# claim's, so `mark_fetched` leaves the row pending for one more fetch.
_OWE = """
INSERT INTO confirmations (webhook_id, provider)
SELECT * FROM unnest($1::bigint[], $2::text[])
ON CONFLICT (webhook_id) DO NOTHING
"""
_ASK_AGAIN = """
UPDATE confirmations c
SET armed_at = clock_timestamp(),
    due_at = CASE WHEN c.state = 'pending' THEN c.due_at ELSE now() END,
    pending_since = CASE WHEN c.state = 'pending' THEN c.pending_since ELSE now() END,
    attempts = CASE WHEN c.state = 'pending' THEN c.attempts ELSE 0 END,
    state = 'pending'
FROM processed_webhooks p, unnest($1::text[], $2::text[]) AS r(provider, event_id)
WHERE p.provider = r.provider AND p.event_id = r.event_id AND c.webhook_id = p.id
  AND c.state <> 'parked'
"""

# Due rows of the given providers, oldest due first, taken for a lease: `due_at` moves
# to the lease's end, so a process that dies mid-fetch leaves them due again then. Each
# claim counts as a try, so a fetch that kills its process cannot be tried for ever.
_CLAIM = """
WITH due AS (
    SELECT webhook_id FROM confirmations
    WHERE state = 'pending' AND provider = ANY($1::text[]) AND due_at <= now()
    ORDER BY due_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
)
UPDATE confirmations c
SET due_at = now() + make_interval(secs => $3), attempts = c.attempts + 1
FROM due, processed_webhooks p
WHERE c.webhook_id = due.webhook_id AND p.id = c.webhook_id
RETURNING c.webhook_id, c.provider, c.attempts, c.armed_at, p.event_id, p.event_type,
          p.body, p.headers::text AS headers, p.received_at
"""

# Each statement that ends a claim is fenced by it: still pending, and not claimed
# again since (`attempts` counts claims), so a process whose lease ran out while its
# fetch was slow cannot overwrite what the process that took the row over decided.

# A confirmed fetch: pending again, from its first try, if a webhook asked for a fetch
# after this one was claimed (its answer may predate the change that webhook announced).
_CONFIRMED = """
UPDATE confirmations
SET state = CASE WHEN armed_at > $2 THEN 'pending' ELSE $3::text END,
    attempts = CASE WHEN armed_at > $2 THEN 0 ELSE attempts END,
    pending_since = CASE WHEN armed_at > $2 THEN now() ELSE pending_since END,
    due_at = now(), fetched_at = now(), answer = $4, last_error = NULL
WHERE webhook_id = $1 AND state = 'pending' AND attempts = $5
"""

_RETRY = """
UPDATE confirmations
SET due_at = now() + make_interval(secs => $2), last_error = $3
WHERE webhook_id = $1 AND state = 'pending' AND attempts = $4
"""

_PARKED = """
UPDATE confirmations
SET state = 'parked', fetched_at = now(), answer = coalesce($3, answer), last_error = $2
WHERE webhook_id = $1 AND state = 'pending' AND attempts = $4
RETURNING webhook_id
"""

# A replayed dead letter (`confirm`, or an `ingest` one now valid): its fetch owed
# again, from its first try.
_REARM = """
INSERT INTO confirmations (webhook_id, provider)
SELECT id, provider FROM processed_webhooks WHERE provider = $1 AND event_id = $2
ON CONFLICT (webhook_id) DO UPDATE
SET state = 'pending', attempts = 0, due_at = now(), armed_at = clock_timestamp(),
    pending_since = now(), last_error = NULL
RETURNING webhook_id
"""

_RECORDED_AS = """
SELECT source, event_type FROM processed_webhooks WHERE provider = $1 AND event_id = $2
"""

_STATS = """
SELECT provider, count(*) AS pending,
       coalesce(extract(epoch FROM now() - min(pending_since)), 0)::float8 AS oldest_s
FROM confirmations WHERE state = 'pending'
GROUP BY provider
"""


@dataclass(frozen=True)
class Claim:
    """A fetch taken for a lease: the recorded request it confirms."""

    webhook_id: int
    provider: str
    attempts: int  # this one included
    armed_at: datetime
    event_id: str
    event_type: str | None
    body: bytes
    headers: dict[str, str]
    received_at: datetime


async def owe_fetches(
    conn: Conn, events: Sequence[Event], inserted: dict[tuple[str, str], int]
) -> None:
    """In the recording transaction: a fetch owed for each new event awaiting
    confirmation, another asked for each repeat. `inserted` maps the new rows' keys to
    their ids."""
    waiting = [e for e in events if e.awaits_confirmation]
    new = [(inserted[(e.provider, e.event_id)], e.provider) for e in waiting
           if (e.provider, e.event_id) in inserted]  # fmt: skip
    repeats = [e for e in waiting if (e.provider, e.event_id) not in inserted]
    with translate_errors():
        if new:
            await conn.execute(_OWE, [n[0] for n in new], [n[1] for n in new])
        if repeats:
            await conn.execute(
                _ASK_AGAIN, [e.provider for e in repeats], [e.event_id for e in repeats]
            )


async def claim_due(
    conn: Conn, providers: Sequence[str], limit: int, lease_s: float
) -> list[Claim]:
    with translate_errors():
        rows = await conn.fetch(_CLAIM, list(providers), limit, lease_s)
    return [
        Claim(
            int(r["webhook_id"]),
            r["provider"],
            int(r["attempts"]),
            r["armed_at"],
            r["event_id"],
            r["event_type"],
            bytes(r["body"]),
            orjson.loads(r["headers"]),
            r["received_at"],
        )
        for r in rows
    ]


async def mark_fetched(conn: Conn, claim: Claim, state: ConfirmState, answer: bytes | None) -> bool:
    """`claim`'s fetch ended `state` (confirmed), with the answer's bytes; pending again
    when a webhook asked for another fetch meanwhile. False when the claim is no longer
    this process's (its lease ended and another took it over)."""
    with translate_errors():
        status = await conn.execute(
            _CONFIRMED, claim.webhook_id, claim.armed_at, str(state), answer, claim.attempts
        )
    return _updated_one(status)


async def retry_later(conn: Conn, claim: Claim, delay_s: float, error: str) -> bool:
    """`claim`'s fetch tried again in `delay_s`; False when the claim is no longer this
    process's."""
    with translate_errors():
        status = await conn.execute(_RETRY, claim.webhook_id, delay_s, error, claim.attempts)
    return _updated_one(status)


def _updated_one(status: str) -> bool:
    """Whether an `UPDATE` changed its row (asyncpg's status text, `UPDATE 1`)."""
    return status == "UPDATE 1"


async def mark_parked(conn: Conn, claim: Claim, error: str, answer: bytes | None) -> bool:
    """Park `claim`'s fetch; False when the claim is no longer this process's."""
    with translate_errors():
        row = await conn.fetchval(_PARKED, claim.webhook_id, error, answer, claim.attempts)
    return row is not None


async def rearm(conn: Conn, provider: str, event_id: str) -> bool:
    """Owe the event's fetch (again: a replayed dead letter); False when no row of the
    event is recorded."""
    with translate_errors():
        return await conn.fetchval(_REARM, provider, event_id) is not None


async def pending_stats(conn: Conn) -> dict[str, tuple[int, float]]:
    """Per provider: fetches pending, and how long the longest-owed one has been."""
    with translate_errors():
        rows = await conn.fetch(_STATS)
    return {r["provider"]: (int(r["pending"]), float(r["oldest_s"])) for r in rows}


async def recorded_as(conn: Conn, provider: str, event_id: str) -> tuple[str, str | None] | None:
    """How the event's row came to be (`source`) and its type; None when none is
    recorded. A replay tells a provider's webhook from the events its fetch found."""
    with translate_errors():
        row = await conn.fetchrow(_RECORDED_AS, provider, event_id)
    return None if row is None else (row["source"], row["event_type"])
