"""A large `processed_webhooks` built quickly, and what the table costs on disk.

`prefill()` generates rows inside PostgreSQL (one `INSERT ... SELECT FROM
generate_series` per chunk of a million rows, each its own transaction), shaped like the
rows the gateway records for Stripe: provider `stripe`, a unique Stripe-style event id,
the type and subject the gateway derives, the two headers it keeps, and a real ~2 KB
Stripe body (bench/stripe_event.json: `payment_intent.succeeded` from stripe/openapi's
fixtures3.json, MIT, byte for byte as the corpus holds it) with its event id, payment
intent id and `created` varied per row. Rows are already published: each carries the
transaction id that recorded it, like a live row, and once all are in the outbox cursor
is moved past them (sql/010), so neither the relay nor retention's outbox rule sees them
as pending.

Ids follow `received_at`, oldest first, as they do in a live table: each row's id is
given (the sequence is moved past them afterwards), so chunks can be inserted by a few
connections at once and still keep that order.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import asyncpg

from gateway.core.events.model import webhook_subject
from tests.support.outbox import pass_cursor

TEMPLATE = Path(__file__).with_name("stripe_event.json").read_text(encoding="utf-8")
EVENT_TYPE = "payment_intent.succeeded"
# What the template holds and each row replaces (same lengths, so every body has the
# template's size).
_TEMPLATE_EVENT_ID = "evt_1L78EhKmLGUmNSHrXjmji7sZ"
_TEMPLATE_INTENT_ID = "pi_1PgafyB7WZ01zgkWSjxsAJo3"
_TEMPLATE_CREATED = "1234567890"
# The headers the gateway keeps for a Stripe delivery (content.COMMON_STORED, lower-cased).
HEADERS = (
    '{"content-type": "application/json; charset=utf-8", '
    '"user-agent": "Stripe/1.0 (+https://stripe.com/docs/webhooks)"}'
)
CHUNK_ROWS = 1_000_000
JOBS = min(os.cpu_count() or 1, 4)  # connections inserting chunks at the same time

# $1 first id, $2 last id, $3 last id of the whole prefill, $4 the clock every chunk
# shares, $5 age of the newest row (s), $6 span from the oldest to the newest (s), $7 seed
# of the ids, $8 the template body.
# md5 spreads the ids over the unique index as real random ids do (96 bits: a collision
# among 10 M rows has a chance of about 1e-15, and would be skipped, then reported).
_INSERT = """
INSERT INTO processed_webhooks (id, provider, event_id, event_type, subject, headers, body,
                                received_at)
SELECT e.g, 'stripe', e.event_id, '{event_type}', '{subject}', '{headers}'::jsonb,
       convert_to(replace(replace(replace(t.body, '{template_event_id}', e.event_id),
                                  '{template_intent_id}', e.intent_id),
                          '{template_created}', extract(epoch FROM e.received_at)::bigint::text),
                  'UTF8'),
       e.received_at
FROM (SELECT g,
             'evt_' || substr(md5($7::text || ':' || g), 1, 24) AS event_id,
             'pi_' || substr(md5($7::text || ':pi:' || g), 1, 24) AS intent_id,
             $4::timestamptz
                 - make_interval(secs => $5::float8 + $6::float8 * ($3::bigint - g) / $3::bigint)
                 AS received_at
      FROM generate_series($1::bigint, $2::bigint) AS g) e,
     (SELECT $8::text AS body) t
ORDER BY e.g
ON CONFLICT DO NOTHING
"""

_STORAGE = """
SELECT pg_total_relation_size(c.oid) AS total_bytes,
       pg_relation_size(c.oid) AS heap_bytes,
       coalesce(pg_total_relation_size(nullif(c.reltoastrelid, 0)), 0) AS toast_bytes,
       pg_indexes_size(c.oid) AS index_bytes,
       (SELECT count(*) FROM processed_webhooks) AS rows{removed}
FROM pg_class c WHERE c.oid = 'processed_webhooks'::regclass
"""


@dataclass(frozen=True)
class Prefilled:
    """What `prefill()` did."""

    rows: int  # inserted (requested minus id collisions, normally equal)
    seconds: float  # inserting
    vacuum_s: float  # VACUUM (ANALYZE) and CHECKPOINT afterwards
    max_id: int  # rows above this id arrived during the measurement

    def as_dict(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "insert_s": round(self.seconds, 1),
            "rows_per_s": round(self.rows / self.seconds) if self.seconds else None,
            "vacuum_analyze_checkpoint_s": round(self.vacuum_s, 1),
            "max_id": self.max_id,
        }


def insert_sql() -> str:
    return _INSERT.format(
        event_type=EVENT_TYPE,
        subject=webhook_subject("stripe", EVENT_TYPE),
        headers=HEADERS,
        template_event_id=_TEMPLATE_EVENT_ID,
        template_intent_id=_TEMPLATE_INTENT_ID,
        template_created=_TEMPLATE_CREATED,
    )


async def _prefill(
    dsn: str, rows: int, newest_age_s: float, span_s: float, seed: str, progress: bool
) -> Prefilled:
    conn = await asyncpg.connect(dsn)
    try:
        sql = insert_sql()
        now: datetime = await conn.fetchval("SELECT now()")
        first = int(await conn.fetchval("SELECT coalesce(max(id), 0) FROM processed_webhooks"))
        last = first + rows
        chunks = [
            (lo, min(lo + CHUNK_ROWS - 1, last)) for lo in range(first + 1, last + 1, CHUNK_ROWS)
        ]
        inserted, started = 0, time.monotonic()

        async def worker() -> None:
            nonlocal inserted
            one = await asyncpg.connect(dsn)
            try:
                while chunks:
                    lo, hi = chunks.pop(0)
                    status = await one.execute(
                        sql, lo, hi, last, now, newest_age_s, span_s, seed, TEMPLATE, timeout=None
                    )
                    inserted += int(status.rsplit(" ", 1)[1])
                    if progress and rows > CHUNK_ROWS:
                        print(
                            f"  prefill: {inserted:,} / {rows:,} rows, "
                            f"{time.monotonic() - started:.0f} s"
                        )
            finally:
                await one.close()

        await asyncio.gather(*(worker() for _ in range(min(JOBS, len(chunks)))))
        seconds = time.monotonic() - started
        await conn.execute(
            "SELECT setval(pg_get_serial_sequence('processed_webhooks', 'id'), $1)", last
        )
        await pass_cursor(conn)  # as a relay does once the stream has every row
        # Plain VACUUM (not FULL) sets hint bits and the visibility map now, so neither the
        # first reads nor an autovacuum of the fresh rows land in the measured passes;
        # ANALYZE gives the planner the table's real size; CHECKPOINT writes the dirty
        # pages before the load starts instead of during it.
        started = time.monotonic()
        await conn.execute("VACUUM (ANALYZE) processed_webhooks", timeout=None)
        await conn.execute("CHECKPOINT", timeout=None)
        vacuum_s = time.monotonic() - started
        return Prefilled(inserted, seconds, vacuum_s, last)
    finally:
        await conn.close()


def prefill(
    dsn: str,
    rows: int,
    *,
    newest_age_s: float,
    span_s: float,
    seed: str = "bench",
    progress: bool = True,
) -> Prefilled:
    """Insert `rows` published Stripe rows received from `newest_age_s + span_s` to
    `newest_age_s` seconds ago, then VACUUM (ANALYZE) and CHECKPOINT."""
    return asyncio.run(_prefill(dsn, rows, newest_age_s, span_s, seed, progress))


async def _query(dsn: str, sql: str, *params: Any) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(dsn)
    try:
        return list(await conn.fetch(sql, *params, timeout=None))
    finally:
        await conn.close()


_REMOVED = """,
       (SELECT count(*) FROM processed_webhooks WHERE payload_removed_at IS NOT NULL)
           AS payloads_removed"""


def storage(dsn: str, count_removed: bool = False) -> dict[str, Any]:
    """Table, TOAST and index bytes of `processed_webhooks` (pg_total_relation_size
    counts all three), its rows, the total per row, and with `count_removed` how many
    payloads retention emptied (a scan of the whole table)."""
    r = dict(
        asyncio.run(_query(dsn, _STORAGE.format(removed=_REMOVED if count_removed else "")))[0]
    )
    r["bytes_per_row"] = round(r["total_bytes"] / r["rows"]) if r["rows"] else None
    return r


def vacuum(dsn: str, full: bool = False) -> float:
    """VACUUM (or VACUUM FULL) the table; seconds it took."""
    started = time.monotonic()
    asyncio.run(_query(dsn, f"VACUUM {'FULL ' if full else ''}processed_webhooks"))
    return round(time.monotonic() - started, 1)


def rows_after(dsn: str, after_id: int) -> int:
    """Rows above `after_id`: those recorded after a prefill (all rows for 0)."""
    sql = "SELECT count(*) FROM processed_webhooks WHERE id > $1"
    return int(asyncio.run(_query(dsn, sql, after_id))[0][0])


def delete_after(dsn: str, after_id: int) -> int:
    """Delete the rows above `after_id`; how many there were."""
    rows = asyncio.run(
        _query(
            dsn,
            "WITH d AS (DELETE FROM processed_webhooks WHERE id > $1 RETURNING 1) "
            "SELECT count(*) FROM d",
            after_id,
        )
    )
    return int(rows[0][0])


def database_now(dsn: str) -> datetime:
    value: datetime = asyncio.run(_query(dsn, "SELECT now()"))[0][0]
    return value


def payloads_removed_between(dsn: str, since: datetime, until: datetime) -> int:
    """Payloads retention emptied in transactions that started in [since, until)."""
    sql = (
        "SELECT count(*) FROM processed_webhooks "
        "WHERE payload_removed_at >= $1 AND payload_removed_at < $2"
    )
    return int(asyncio.run(_query(dsn, sql, since, until))[0][0])


def retention_watermark(dsn: str) -> int:
    """How far retention's payload pass got (0 before its first batch)."""
    sql = "SELECT coalesce(max(next_id), 0) FROM retention_progress WHERE name = 'payloads'"
    return int(asyncio.run(_query(dsn, sql))[0][0])
