"""The console lists benchmark's data: 10,000,000 events and 1,000,000 dead letters made
by `INSERT ... SELECT FROM generate_series` in PostgreSQL (`fill`), with realistic
spreads taken from a hash of the row number, so every run makes the same rows: five
senders (stripe half of the events), a dozen event types, 30 days of arrivals; dead
letters in four stages and eight error classes, skewed, 30 % of them open.

The secondary indexes (and unique constraints) are dropped for the fill and built
again afterwards, as a restore would (one sort per index instead of ten million
insertions each), then the tables are vacuumed and analysed. `bench.console_lists`
measures the console on the result.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable
from datetime import datetime
from typing import Any

import asyncpg

EVENT_DAYS = 30
CHUNK_ROWS = 1_000_000
TABLES = ("processed_webhooks", "dlq_webhooks")

# Spreads from a hash of the row number g: h(g, k) is a number 0..99, the same each run.
_H = "(abs(hashint8({g}::bigint * {k} + {k})) % 100)"
_PROVIDER = (
    "CASE WHEN {h} < 50 THEN 'stripe' WHEN {h} < 70 THEN 'adyen' WHEN {h} < 80 THEN 'github'"
    " WHEN {h} < 90 THEN 'paddle' ELSE 'service:billing' END"
)
_TYPES = (
    "payment_intent.succeeded", "payment_intent.payment_failed", "charge.succeeded",
    "charge.refunded", "invoice.paid", "invoice.payment_failed", "customer.created",
    "customer.subscription.updated", "payout.paid", "transfer.created", "push", "order.paid",
)  # fmt: skip
_CLASSES = (
    "SCHEMA_INVALID", "CURRENCY_UNAVAILABLE", "UNSUPPORTED_PAIR", "LEDGER_UNAVAILABLE",
    "MISSING_FIELD", "INVALID_AMOUNT", "INSUFFICIENT_FUNDS", "BLOCKED_BY_PREDECESSOR",
)  # fmt: skip


def _provider(g: str) -> str:
    return _PROVIDER.format(h=_H.format(g=g, k=1))


def _pick(values: tuple[str, ...], g: str, k: int, skew: bool = False) -> str:
    """One of `values` by the hash; skewed towards the first ones when asked (a few
    error classes make most dead letters, as in life)."""
    h = _H.format(g=g, k=k)
    index = f"floor(power({h} / 100.0, 2) * {len(values)})" if skew else f"{h} % {len(values)}"
    listed = ", ".join(f"'{v}'" for v in values)
    return f"(ARRAY[{listed}])[1 + {index}::int]"


def _received(g: str) -> str:
    """Arrival times rise with the row number over EVENT_DAYS days to $3 (now)."""
    return f"($3::timestamptz - make_interval(secs => ($2::bigint - {g}) * $4::float8))"


def _events_sql() -> str:
    provider, etype = _provider("g"), _pick(_TYPES, "g", 2)
    return f"""
INSERT INTO processed_webhooks (id, provider, event_id, event_type, subject, headers, body,
                                received_at, published_at, outbox_xid, source)
SELECT g, {provider}, 'evt_' || g, {etype},
       CASE WHEN {provider} LIKE 'service:%' THEN 'events.billing.' ELSE 'webhooks.'
            || {provider} || '.' END || {etype},
       '{{"content-type": "application/json"}}'::jsonb,
       convert_to(json_build_object('id', 'evt_' || g, 'type', {etype}, 'data',
           json_build_object('amount', g % 100000, 'currency', 'EUR'))::text, 'UTF8'),
       {_received("g")}, {_received("g")}, NULL,
       CASE WHEN {_H.format(g="g", k=3)} < 2 THEN 'backfill' ELSE 'live' END
FROM generate_series($1::bigint, $5::bigint) AS g
"""  # noqa: S608 - only this module's constants are formatted in


def _dead_letters_sql() -> str:
    # Dead letter g is about event g * $6 (every tenth event, with the default sizes).
    w = "(g * $6::bigint)"
    stage = (
        f"CASE WHEN {_H.format(g='g', k=5)} < 70 THEN 'settlement' WHEN {_H.format(g='g', k=5)}"
        f" < 85 THEN 'ingest' WHEN {_H.format(g='g', k=5)} < 90 THEN 'publish'"
        " ELSE 'forward:crm' END"
    )
    failed = f"{_received(w)} + make_interval(secs => {_H.format(g='g', k=6)} * 3)"
    open_ = f"({_H.format(g='g', k=7)} < 30)"
    return f"""
INSERT INTO dlq_webhooks (webhook_id, stage, provider, event_id, subject, error_class,
                          error_message, error_detail, payload, attempts, received_at,
                          first_failed_at, last_failed_at, is_resolved, resolved_at,
                          resolution)
SELECT CASE WHEN {w} <= $2::bigint THEN {w} END, {stage}, {_provider(w)}, 'evt_' || {w},
       'webhooks.' || {_provider(w)} || '.' || {_pick(_TYPES, w, 2)},
       {_pick(_CLASSES, "g", 8, skew=True)}, 'the event failed: see the detail',
       'Traceback (most recent call last):\n  File "worker.py", line 1, in settle\n'
           || 'GatewayError: failed', '{{}}'::bytea, 1 + {_H.format(g="g", k=9)} % 5,
       {_received(w)}, {failed}, {failed}, NOT {open_},
       CASE WHEN NOT {open_} THEN {failed} + make_interval(secs => {_H.format(g="g", k=10)}
           * 1728) END,
       CASE WHEN NOT {open_} THEN 'replayed' END
FROM generate_series($1::bigint, $5::bigint) AS g
"""  # noqa: S608 - only this module's constants are formatted in


async def _timed(label: str, work: Awaitable[Any]) -> Any:
    started = time.monotonic()
    result = await work
    print(f"  {label}: {time.monotonic() - started:.1f} s", flush=True)
    return result


async def fill(dsn: str, events: int, dead_letters: int, now: datetime) -> None:
    """Rows in bulk, with the secondary indexes (and unique constraints) built after."""
    conn = await asyncpg.connect(dsn, command_timeout=None)
    try:
        await conn.execute("SET maintenance_work_mem = '1GB'")
        # The dead letters' foreign key is checked by construction (ids exist); skipping
        # its trigger saves a look-up per row.
        await conn.execute("SET session_replication_role = replica")
        indexes = await conn.fetch(
            "SELECT i.indexrelid::regclass::text AS name, pg_get_indexdef(i.indexrelid) AS ddl"
            " FROM pg_index i LEFT JOIN pg_constraint c ON c.conindid = i.indexrelid"
            " WHERE i.indrelid = ANY($1::regclass[]) AND c.oid IS NULL",
            list(TABLES),
        )
        uniques = await conn.fetch(
            "SELECT conrelid::regclass::text AS tab, conname, pg_get_constraintdef(oid) AS ddl"
            " FROM pg_constraint WHERE conrelid = ANY($1::regclass[]) AND contype = 'u'",
            list(TABLES),
        )
        for r in indexes:
            await conn.execute(f"DROP INDEX {r['name']}")
        for r in uniques:
            await conn.execute(f"ALTER TABLE {r['tab']} DROP CONSTRAINT {r['conname']}")
        step_s = EVENT_DAYS * 86_400 / max(events, 1)
        print(f"filling {events:,} events and {dead_letters:,} dead letters", flush=True)
        sql = _events_sql()
        for lo in range(1, events + 1, CHUNK_ROWS):
            hi = min(events, lo + CHUNK_ROWS - 1)
            await _timed(f"events {lo:,}-{hi:,}", conn.execute(sql, lo, events, now, step_s, hi))
        if events:
            await conn.execute("SELECT setval('processed_webhooks_id_seq', $1)", events)
        ratio = max(1, events // max(dead_letters, 1))
        sql = _dead_letters_sql()
        for lo in range(1, dead_letters + 1, CHUNK_ROWS):
            hi = min(dead_letters, lo + CHUNK_ROWS - 1)
            await _timed(
                f"dead letters {lo:,}-{hi:,}",
                conn.execute(sql, lo, events, now, step_s, hi, ratio),
            )
        for r in uniques:
            await _timed(
                f"constraint {r['conname']}",
                conn.execute(f"ALTER TABLE {r['tab']} ADD CONSTRAINT {r['conname']} {r['ddl']}"),
            )
        for r in indexes:
            await _timed(f"index {r['name']}", conn.execute(r["ddl"]))
        for table in TABLES:
            await _timed(f"vacuum analyze {table}", conn.execute(f"VACUUM ANALYZE {table}"))
    finally:
        await conn.close()
