"""Retention against real PostgreSQL: payloads emptied after their age, keys deleted after
theirs, what the outbox and open dead letters need left alone, small batches under one
advisory lock, and a dry run that changes nothing.

Events are recorded with a `received_at` in the past, so ages of a second or two need no
sleeping.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from gateway.adapters.postgres import Pool, open_pool
from gateway.adapters.postgres import retention as store
from gateway.adapters.postgres.webhooks import insert_events, record_failure
from gateway.cli.reconcile import _print as print_reconcile
from gateway.core.events.model import Event, Failure, Stage
from gateway.core.retention import DEAD_LETTERS, WEBHOOKS, Removed, RetentionReport
from gateway.errors import ErrorClass
from gateway.metrics import Metrics
from gateway.retention.passes import RetentionPass
from gateway.retention.task import RetentionTask, refresh_storage_gauges
from gateway.settings import RetentionSettings, parse
from gateway.settlement.parts import ReconcileParts
from gateway.settlement.reconcile import reconcile
from tests.support.config_file import with_urls
from tests.support.outbox import pass_cursor

PAYLOADS_1S = RetentionSettings(payload_max_age_s=1, key_max_age_s=0, batch_size=10, pause_s=0)


def event(event_id: str, age_s: float, provider: str = "stripe") -> Event:
    body = b'{"id":"%s","type":"payment_intent.succeeded"}' % event_id.encode()
    return Event(
        provider,
        event_id,
        "payment_intent.succeeded",
        f"webhooks.{provider}.payment_intent.succeeded",
        {"content-type": "application/json"},
        body,
        datetime.now(UTC) - timedelta(seconds=age_s),
    )


@pytest.fixture
async def pool(database_url: str) -> AsyncIterator[Pool]:
    async with open_pool(database_url, max_size=4) as opened:
        yield opened


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(database_url)
    yield conn
    await conn.close()


# Rows recorded unpublished: each `record` moves the outbox cursor past all the others.
_OWED: set[int] = set()


@pytest.fixture(autouse=True)
def _nothing_owed() -> None:
    _OWED.clear()


async def record(pool: Pool, *events: Event, published: bool = True) -> dict[str, int]:
    """Record events (published unless told otherwise); their row ids by event id."""
    async with pool.acquire() as conn:
        ids = await insert_events(conn, list(events))
        if not published:
            _OWED.update(ids.values())
        await pass_cursor(conn, owed=_OWED)
    return {event_id: row_id for (_, event_id), row_id in ids.items()}


async def mark_published(pool: Pool, row_ids: list[int]) -> None:
    """As if the relay had published these rows now."""
    _OWED.difference_update(row_ids)
    async with pool.acquire() as conn:
        await pass_cursor(conn, owed=_OWED)


async def park(pool: Pool, webhook_id: int, e: Event) -> int:
    """An open settlement dead letter for the event."""
    async with pool.acquire() as conn:
        return await record_failure(
            conn,
            webhook_id,
            Stage.SETTLEMENT,
            e,
            Failure(ErrorClass.UNKNOWN_MERCHANT, "no account"),
        )


async def kept(db: asyncpg.Connection) -> dict[str, bool]:
    """Event id -> whether its body is still kept."""
    rows = await db.fetch(
        "SELECT event_id, body <> ''::bytea AND payload_removed_at IS NULL AS kept "
        "FROM processed_webhooks"
    )
    return {r["event_id"]: r["kept"] for r in rows}


async def run(pool: Pool, settings: RetentionSettings, **kwargs: bool) -> RetentionReport:
    return await RetentionPass(pool, settings).run(**kwargs)


async def test_old_payloads_go_keys_stay_and_a_redelivery_is_still_a_duplicate(
    pool: Pool, db: asyncpg.Connection
) -> None:
    """Bodies and headers of published events older than payload_max_age_s are emptied
    and marked; younger ones and the outbox's are untouched; the key still answers."""
    old = [event(f"evt_old_{i}", age_s=30) for i in range(25)]
    await record(pool, *old, event("evt_young", age_s=0))
    await record(pool, event("evt_unpublished", age_s=30), published=False)

    report = await run(pool, PAYLOADS_1S)

    assert report.count(WEBHOOKS, Removed.PAYLOAD) == 25
    assert report.count(WEBHOOKS, Removed.KEY) == 0
    state = await kept(db)
    assert not any(state[f"evt_old_{i}"] for i in range(25))
    assert state["evt_young"] and state["evt_unpublished"]
    row = await db.fetchrow(
        "SELECT body, headers::text, payload_removed_at FROM processed_webhooks "
        "WHERE event_id = 'evt_old_0'"
    )
    assert row is not None
    assert row["body"] == b"" and row["headers"] == "{}" and row["payload_removed_at"]
    # The gate still holds the key: a provider's retry is a duplicate, not a new event.
    async with pool.acquire() as conn:
        assert await insert_events(conn, [event("evt_old_0", age_s=0)]) == {}
    assert await db.fetchval("SELECT count(*) FROM processed_webhooks") == 27
    # A second pass finds nothing more to do, starting from its watermark.
    again = await run(pool, PAYLOADS_1S)
    assert again.count(WEBHOOKS, Removed.PAYLOAD) == 0


async def test_the_watermark_waits_for_the_outbox(pool: Pool, db: asyncpg.Connection) -> None:
    """An old row still unpublished stops the walk; once published it is emptied with the
    rows behind it."""
    await record(pool, event("evt_a", age_s=30))
    pending = await record(pool, event("evt_pending", age_s=30), published=False)
    await record(pool, event("evt_b", age_s=30))

    first = await run(pool, PAYLOADS_1S)
    assert first.count(WEBHOOKS, Removed.PAYLOAD) == 1
    assert await kept(db) == {"evt_a": False, "evt_pending": True, "evt_b": True}

    await mark_published(pool, [pending["evt_pending"]])
    second = await run(pool, PAYLOADS_1S)
    assert second.count(WEBHOOKS, Removed.PAYLOAD) == 2
    assert not any((await kept(db)).values())


async def test_open_dead_letters_keep_their_payload_until_resolved_plus_retention(
    pool: Pool, db: asyncpg.Connection
) -> None:
    """An open dead letter holds its own payload and its event's body; resolved longer
    ago than the horizon, both are emptied (the event row after the watermark passed it)."""
    parked, resolved_now = event("evt_parked", age_s=30), event("evt_resolved_now", age_s=30)
    ids = await record(pool, parked, resolved_now, event("evt_plain", age_s=30))
    dead_letter = await park(pool, ids["evt_parked"], parked)
    recent = await park(pool, ids["evt_resolved_now"], resolved_now)
    await db.execute(
        "UPDATE dlq_webhooks SET is_resolved = true, resolved_at = now() WHERE id = $1", recent
    )

    first = await run(pool, PAYLOADS_1S)
    assert first.count(WEBHOOKS, Removed.PAYLOAD) == 1
    assert first.count(DEAD_LETTERS, Removed.PAYLOAD) == 0
    assert await kept(db) == {"evt_parked": True, "evt_resolved_now": True, "evt_plain": False}
    assert (
        await db.fetchval(
            "SELECT count(*) FROM dlq_webhooks WHERE payload <> ''::bytea AND payload_removed_at "
            "IS NULL"
        )
        == 2
    )

    await db.execute(
        "UPDATE dlq_webhooks SET is_resolved = true, resolved_at = now() - interval '5 s'"
    )
    second = await run(pool, PAYLOADS_1S)
    assert second.count(DEAD_LETTERS, Removed.PAYLOAD) == 2
    assert second.count(WEBHOOKS, Removed.PAYLOAD) == 2
    assert not any((await kept(db)).values())
    row = await db.fetchrow(
        "SELECT payload, headers::text, payload_removed_at FROM dlq_webhooks WHERE id = $1",
        dead_letter,
    )
    assert row is not None
    assert row["payload"] == b"" and row["headers"] == "{}" and row["payload_removed_at"]


async def test_keys_are_deleted_after_key_max_age_s_except_what_is_still_needed(
    pool: Pool, db: asyncpg.Connection
) -> None:
    """Rows older than key_max_age_s are deleted (a redelivery is then new); the outbox's
    rows and rows an open dead letter references stay; a resolved dead letter is kept and
    lets go of its row."""
    settings = RetentionSettings(payload_max_age_s=1, key_max_age_s=2, batch_size=10, pause_s=0)
    parked, resolved = event("evt_parked", age_s=60), event("evt_resolved", age_s=60)
    old = [event(f"evt_old_{i}", age_s=60) for i in range(15)]
    ids = await record(pool, *old, parked, resolved, event("evt_between", age_s=1.5))
    await record(pool, event("evt_unpublished", age_s=60), published=False)
    await park(pool, ids["evt_parked"], parked)
    closed = await park(pool, ids["evt_resolved"], resolved)
    await db.execute(
        "UPDATE dlq_webhooks SET is_resolved = true, resolved_at = now() - interval '50 s' "
        "WHERE id = $1",
        closed,
    )

    report = await run(pool, settings)

    assert report.count(WEBHOOKS, Removed.KEY) == 16
    left = {r["event_id"] for r in await db.fetch("SELECT event_id FROM processed_webhooks")}
    assert left == {"evt_parked", "evt_between", "evt_unpublished"}
    state = await kept(db)
    assert state["evt_parked"] and state["evt_unpublished"] and not state["evt_between"]
    assert await db.fetchval("SELECT webhook_id FROM dlq_webhooks WHERE id = $1", closed) is None
    assert await db.fetchval("SELECT count(*) FROM dlq_webhooks") == 2
    # Past the key horizon, the provider's retry is accepted as a new event.
    async with pool.acquire() as conn:
        assert await insert_events(conn, [event("evt_old_0", age_s=0)]) != {}


async def test_a_pass_works_in_short_batches_while_ingestion_goes_on(
    pool: Pool, db: asyncpg.Connection, database_url: str
) -> None:
    """500 rows with batch_size 10: fifty batches, each committed on its own (another
    connection sees the count grow by at most 10 between batches), and inserts made
    meanwhile keep succeeding quickly."""
    await record(pool, *(event(f"evt_{i}", age_s=30) for i in range(500)))
    seen: list[int] = []
    watcher = await asyncpg.connect(database_url)

    async def pause(_: float) -> None:
        seen.append(
            await watcher.fetchval(
                "SELECT count(*) FROM processed_webhooks WHERE payload_removed_at IS NOT NULL"
            )
        )
        await asyncio.sleep(0.005)

    inserted: list[float] = []

    async def ingest() -> None:
        for i in range(100):
            started = time.monotonic()
            assert await record(pool, event(f"evt_new_{i}", age_s=0))
            inserted.append(time.monotonic() - started)

    try:
        report, _ = await asyncio.gather(
            RetentionPass(pool, PAYLOADS_1S, sleep=pause).run(), ingest()
        )
    finally:
        await watcher.close()
    assert report.count(WEBHOOKS, Removed.PAYLOAD) == 500
    assert report.batches >= 50
    assert seen == sorted(seen) and seen[-1] == 500
    assert all(b - a <= 10 for a, b in zip([0, *seen], seen, strict=False))
    assert len(inserted) == 100 and max(inserted) < 1.0


async def test_one_pass_at_a_time(pool: Pool, db: asyncpg.Connection) -> None:
    """The advisory lock: a pass finding it held skips and changes nothing; of two passes
    started together exactly one works."""
    await record(pool, *(event(f"evt_{i}", age_s=30) for i in range(40)))
    holder = await pool.acquire()
    try:
        assert await store.try_lock(holder)
        skipped = await run(pool, PAYLOADS_1S)
        assert skipped.skipped and skipped.batches == 0
        assert all((await kept(db)).values())
    finally:
        await store.unlock(holder)
        await pool.release(holder)

    slow = RetentionSettings(payload_max_age_s=1, batch_size=10, pause_s=0.05)
    reports = await asyncio.gather(run(pool, slow), run(pool, slow))
    assert sorted(r.skipped for r in reports) == [False, True]
    assert sum(r.count(WEBHOOKS, Removed.PAYLOAD) for r in reports) == 40


async def test_a_dry_run_counts_and_changes_nothing(pool: Pool, db: asyncpg.Connection) -> None:
    """The dry run's counts are what the real pass then does."""
    settings = RetentionSettings(payload_max_age_s=1, key_max_age_s=20, batch_size=10, pause_s=0)
    parked = event("evt_parked", age_s=5)
    # Ids follow arrival, as in the gateway: the walks stop at the first row too young.
    await record(pool, *(event(f"evt_ancient_{i}", age_s=60) for i in range(7)))
    ids = await record(pool, *(event(f"evt_{i}", age_s=5) for i in range(23)), parked)
    closed = await park(pool, ids["evt_parked"], parked)
    await db.execute(
        "UPDATE dlq_webhooks SET is_resolved = true, resolved_at = now() - interval '3 s' "
        "WHERE id = $1",
        closed,
    )
    before = await db.fetch("SELECT * FROM processed_webhooks ORDER BY id")

    dry = await run(pool, settings, dry_run=True)

    assert await db.fetch("SELECT * FROM processed_webhooks ORDER BY id") == before
    assert await db.fetchval("SELECT count(*) FROM retention_progress") == 0
    assert dry.dry_run
    real = await run(pool, settings)
    assert dry.removed == real.removed
    assert real.count(WEBHOOKS, Removed.PAYLOAD) == 31
    assert real.count(DEAD_LETTERS, Removed.PAYLOAD) == 1
    assert real.count(WEBHOOKS, Removed.KEY) == 7


async def test_metrics_count_removals_and_report_storage(pool: Pool) -> None:
    """gateway_retention_removed_total by table and what; rows and bytes per table; the
    oldest kept payload's age."""
    await record(pool, *(event(f"evt_{i}", age_s=30) for i in range(12)))
    await record(pool, event("evt_young", age_s=3))
    metrics = Metrics()
    await RetentionPass(pool, RetentionSettings(payload_max_age_s=10, pause_s=0), metrics).run()
    assert metrics.retention_removed_total.get(table=WEBHOOKS, what="payload") == 12
    async with pool.acquire() as conn:
        await conn.execute("ANALYZE processed_webhooks")
    await refresh_storage_gauges(pool, metrics)
    assert metrics.storage_rows.get(table=WEBHOOKS) == 13
    assert metrics.storage_bytes.get(table=WEBHOOKS) > 8192
    assert metrics.storage_bytes.get(table=DEAD_LETTERS) > 0
    assert 2 < metrics.retention_oldest_payload_seconds.get() < 10
    rendered = metrics.render()
    assert (
        'gateway_retention_removed_total{table="processed_webhooks",what="payload"} 12' in rendered
    )


async def test_reconcile_reports_settling_events_whose_payload_is_gone(
    pool: Pool, db: asyncpg.Connection, database_url: str
) -> None:
    """Reconcile cannot judge or re-publish an event without its body: it lists it apart
    and never publishes an empty body."""
    ids = await record(pool, event("evt_gone", age_s=30), event("evt_other", age_s=30))
    await db.execute(
        "UPDATE processed_webhooks SET"
        " event_type = 'customer.created', subject = 'webhooks.stripe.customer.created'"
        " WHERE id = $1",
        ids["evt_other"],
    )
    await run(pool, PAYLOADS_1S)
    stripe = {"scheme": "stripe", "secrets": ["whsec_test"]}
    doc = with_urls({"database": {"url": database_url}, "providers": {"stripe": stripe}})
    settings = parse(doc, env={})
    parts = ReconcileParts(
        settings.providers,
        settings.settlement,
        pool,
        publisher=None,  # type: ignore[arg-type]
    )

    report = await reconcile(parts, older_than_s=1, dry_run=True)

    # Only a type that can move money (customer.created cannot, whatever the subjects).
    assert report.payload_removed == ["stripe:evt_gone"]
    assert report.events == [] and report.scanned == 0
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        print_reconcile(report, as_json=False)
    lines = out.getvalue().splitlines()
    assert lines[1].startswith("1 settling event(s) not checked: payload removed by retention")
    assert lines[2] == "  stripe:evt_gone"


async def test_serve_task_runs_a_pass_only_when_background(
    pool: Pool, db: asyncpg.Connection
) -> None:
    """`gateway serve`'s task: with `background = false` it keeps the gauges and removes
    nothing (cron does); with it, a pass runs and is counted."""
    await record(pool, *(event(f"evt_{i}", age_s=30) for i in range(5)))
    metrics = Metrics()
    off = RetentionSettings(payload_max_age_s=1, pause_s=0, background=False)
    assert await RetentionTask(pool, off, metrics).once() is None
    assert all((await kept(db)).values())
    assert metrics.retention_oldest_payload_seconds.get() > 20

    report = await RetentionTask(pool, PAYLOADS_1S, metrics).once()
    assert report is not None and report.count(WEBHOOKS, Removed.PAYLOAD) == 5
    assert metrics.retention_removed_total.get(table=WEBHOOKS, what="payload") == 5
    assert metrics.retention_oldest_payload_seconds.get() == 0
