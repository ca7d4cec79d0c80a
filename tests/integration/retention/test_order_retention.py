"""Retention of per-key order against real PostgreSQL: the counters, applied position and
log of keys idle past the key horizon and fully applied are removed (and counted), what
is still in flight is kept, a key ingest is numbering right now is left for the next
pass, and a later event of a removed key is numbered from 1 again."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime

import asyncpg
import pytest

from gateway.adapters.postgres import Pool, open_pool
from gateway.adapters.postgres.ordering.key_numbers import key_lock_id
from gateway.adapters.postgres.webhooks import record_events
from gateway.core.events.model import Event
from gateway.core.retention import ORDER_APPLIED, ORDER_COUNTERS, ORDER_LOG, Removed
from gateway.metrics import Metrics
from gateway.retention.passes import RetentionPass
from gateway.settings import RetentionSettings
from tests.support.ordering_property import violations

# Keys idle for a day are past a one-hour key horizon; batches of two keys.
SETTINGS = RetentionSettings(payload_max_age_s=60, key_max_age_s=3600, batch_size=2, pause_s=0)
DAY_S = 86_400


@pytest.fixture
async def pool(database_url: str) -> AsyncIterator[Pool]:
    async with open_pool(database_url, max_size=4) as opened:
        yield opened


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(database_url)
    yield conn
    await conn.close()


async def key(
    db: asyncpg.Connection,
    order_key: str,
    *,
    last: int,
    applied: int | None,
    idle_s: float = DAY_S,
    progressed_idle_s: float | None = None,
    held: bool = False,
    deferred_open: bool = False,
) -> None:
    """A stripe key numbered to `last` `idle_s` ago and applied to `applied` (None: no
    settlement row), each applied number logged; the last one deferred and still open
    with `deferred_open`."""
    await db.execute(
        "INSERT INTO order_counters (provider, order_key, last_seq, touched_at)"
        " VALUES ('stripe', $1, $2, now() - make_interval(secs => $3))",
        order_key,
        last,
        idle_s,
    )
    if applied is None:
        return
    holder = None
    if held:
        # Its dead letter resolved (by some other hand): only the hold keeps the key.
        holder = await db.fetchval(
            "INSERT INTO dlq_webhooks (stage, provider, event_id, error_class, error_message,"
            " payload, order_key, key_seq, is_resolved)"
            " VALUES ('settlement', 'stripe', $1, 'UNKNOWN_MERCHANT', 'x', '\\x7b7d', $2, $3,"
            " true) RETURNING id",
            f"evt_{order_key}_{applied + 1}",
            order_key,
            applied + 1,
        )
    await db.execute(
        "INSERT INTO order_applied (provider, order_key, applied_seq, progressed_at, held_seq,"
        " held_dlq_id, hold_reason, held_at)"
        " VALUES ('stripe', $1, $2, now() - make_interval(secs => $3), $4, $5, $6, $7)",
        order_key,
        applied,
        idle_s if progressed_idle_s is None else progressed_idle_s,
        applied + 1 if held else None,
        holder,
        "UNKNOWN_MERCHANT" if held else None,
        datetime.now(UTC) if held else None,
    )
    for seq in range(1, applied + 1):
        deferred = deferred_open and seq == applied
        await db.execute(
            "INSERT INTO order_log (provider, order_key, key_seq, outcome, event_id)"
            " VALUES ('stripe', $1, $2, $3, $4)",
            order_key,
            seq,
            "deferred" if deferred else "applied",
            f"evt_{order_key}_{seq}",
        )


async def keys_left(db: asyncpg.Connection) -> dict[str, set[str]]:
    left: dict[str, set[str]] = {}
    for table in (ORDER_COUNTERS, ORDER_APPLIED, ORDER_LOG):
        rows = await db.fetch(f"SELECT DISTINCT order_key FROM {table}")  # noqa: S608
        left[table] = {r["order_key"] for r in rows}
    return left


def event(event_id: str, order_key: str) -> Event:
    return Event(
        "stripe",
        event_id,
        "payment_intent.succeeded",
        "webhooks.stripe.payment_intent.succeeded",
        {"content-type": "application/json"},
        b'{"id":"%s"}' % event_id.encode(),
        datetime.now(UTC),
        order_key=order_key,
    )


@pytest.fixture
async def keys(db: asyncpg.Connection) -> None:
    """Five idle, fully applied keys (more than two batches), and one of each kind that
    must stay."""
    for i in range(5):
        await key(db, f"pi_done_{i}", last=3, applied=3)
    await key(db, "pi_never_settled", last=2, applied=None)
    await key(db, "pi_behind", last=3, applied=2)
    await key(db, "pi_held", last=3, applied=2, held=True)
    await key(db, "pi_recent", last=3, applied=3, idle_s=60)
    await key(db, "pi_progressed", last=3, applied=3, progressed_idle_s=60)
    await key(db, "pi_deferred", last=2, applied=2, deferred_open=True)
    await key(db, "pi_parked", last=2, applied=2)
    await db.execute(
        "INSERT INTO dlq_webhooks (stage, provider, event_id, error_class, error_message,"
        " payload, order_key, key_seq)"
        " VALUES ('settlement', 'stripe', 'evt_pi_parked_2', 'UNKNOWN_MERCHANT', 'x',"
        " '\\x7b7d', 'pi_parked', 2)"
    )


KEPT = {
    "pi_never_settled",
    "pi_behind",
    "pi_held",
    "pi_recent",
    "pi_progressed",
    "pi_deferred",
    "pi_parked",
}


async def test_idle_fully_applied_keys_go_and_the_rest_stay(
    pool: Pool, db: asyncpg.Connection, keys: None
) -> None:
    metrics = Metrics()
    dry = await RetentionPass(pool, SETTINGS, metrics).run(dry_run=True)
    assert (
        dry.count(ORDER_COUNTERS, Removed.KEY),
        dry.count(ORDER_APPLIED, Removed.KEY),
        dry.count(ORDER_LOG, Removed.KEY),
    ) == (5, 5, 15)
    assert len((await keys_left(db))[ORDER_COUNTERS]) == 12  # a dry run changes nothing

    report = await RetentionPass(pool, SETTINGS, metrics).run()
    assert report.to_json()["removed"][ORDER_COUNTERS] == {"key": 5}
    assert report.to_json()["removed"][ORDER_LOG] == {"key": 15}
    assert report.batches >= 3  # two keys a batch
    left = await keys_left(db)
    assert left[ORDER_COUNTERS] == KEPT
    assert left[ORDER_APPLIED] == KEPT - {"pi_never_settled"}
    assert left[ORDER_LOG] == KEPT - {"pi_never_settled"}
    for table, rows in ((ORDER_COUNTERS, 5), (ORDER_APPLIED, 5), (ORDER_LOG, 15)):
        assert metrics.retention_removed_total.get(table=table, what="key") == rows
    assert 'gateway_retention_removed_total{table="order_log",what="key"} 15' in metrics.render()

    assert await violations(db, live=True) == []  # what is left still reads whole
    again = await RetentionPass(pool, SETTINGS, metrics).run()
    assert again.count(ORDER_COUNTERS, Removed.KEY) == 0


async def test_nothing_goes_while_keys_are_kept_for_ever(
    pool: Pool, db: asyncpg.Connection, keys: None
) -> None:
    """key_max_age_s = 0 (the default) keeps every key's state."""
    report = await RetentionPass(pool, replace(SETTINGS, key_max_age_s=0)).run()
    assert report.count(ORDER_COUNTERS, Removed.KEY) == 0
    assert len((await keys_left(db))[ORDER_COUNTERS]) == 12


async def test_a_key_ingest_is_numbering_is_left_for_the_next_pass(
    pool: Pool, db: asyncpg.Connection, database_url: str
) -> None:
    """Ingest holds a key's lock while it numbers: the pass steps over that key (and
    does not wait for it); the next pass removes it."""
    await key(db, "pi_busy", last=3, applied=3)
    await key(db, "pi_quiet", last=3, applied=3)
    ingest = await asyncpg.connect(database_url)
    try:
        tx = ingest.transaction()
        await tx.start()
        await ingest.execute("SELECT pg_advisory_xact_lock($1)", key_lock_id("stripe", "pi_busy"))
        report = await RetentionPass(pool, SETTINGS).run()
        assert report.count(ORDER_COUNTERS, Removed.KEY) == 1
        assert (await keys_left(db))[ORDER_COUNTERS] == {"pi_busy"}
        await tx.rollback()
    finally:
        await ingest.close()
    report = await RetentionPass(pool, SETTINGS).run()
    assert report.count(ORDER_COUNTERS, Removed.KEY) == 1
    assert (await keys_left(db))[ORDER_COUNTERS] == set()


async def test_a_later_event_of_a_removed_key_starts_again_at_1(
    pool: Pool, db: asyncpg.Connection
) -> None:
    async with pool.acquire() as conn:
        first = await record_events(conn, [event("evt_1", "pi_again"), event("evt_2", "pi_again")])
    assert sorted(r.key_seq or 0 for r in first.values()) == [1, 2]
    await db.execute(
        "UPDATE order_counters SET touched_at = now() - interval '2 days'"
        " WHERE order_key = 'pi_again'"
    )
    # Settlement applied both, a day ago.
    await db.execute(
        "INSERT INTO order_applied (provider, order_key, applied_seq, progressed_at)"
        " VALUES ('stripe', 'pi_again', 2, now() - interval '1 day')"
    )
    await db.executemany(
        "INSERT INTO order_log (provider, order_key, key_seq, outcome) VALUES"
        " ('stripe', 'pi_again', $1, 'applied')",
        [(1,), (2,)],
    )
    report = await RetentionPass(pool, SETTINGS).run()
    assert report.count(ORDER_COUNTERS, Removed.KEY) == 1
    async with pool.acquire() as conn:
        later = await record_events(conn, [event("evt_3", "pi_again")])
    assert [r.key_seq for r in later.values()] == [1]
    assert (
        await db.fetchval("SELECT last_seq FROM order_counters WHERE order_key = 'pi_again'") == 1
    )
    assert await db.fetchval("SELECT count(*) FROM order_applied") == 0
    assert await violations(db) == []


async def test_old_rows_are_dated_by_the_database_clock(pool: Pool, db: asyncpg.Connection) -> None:
    """touched_at and progressed_at are the database's own stamps: a key idle just past
    the horizon goes, one just inside it stays."""
    await key(db, "pi_past", last=1, applied=1, idle_s=SETTINGS.key_max_age_s + 60)
    await key(db, "pi_inside", last=1, applied=1, idle_s=SETTINGS.key_max_age_s - 60)
    await RetentionPass(pool, SETTINGS).run()
    assert (await keys_left(db))[ORDER_COUNTERS] == {"pi_inside"}
