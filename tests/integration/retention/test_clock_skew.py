"""Retention against real PostgreSQL when a host's clock was wrong: rows stamped far in
the future (as such a host writes them) are dated by the rows recorded after them, so
one of them, or a run longer than a batch, no longer stops the walk for ever."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest

from gateway.adapters.postgres import Pool, open_pool
from gateway.adapters.postgres.webhooks import insert_events
from gateway.core.events.model import Event
from gateway.core.retention import WEBHOOKS, Removed, RetentionReport
from gateway.retention.passes import RetentionPass
from gateway.settings import RetentionSettings
from tests.integration.retention.test_retention import event, kept
from tests.support.outbox import pass_cursor

DAY_S = 86_400.0
YEAR_AHEAD_S = -365 * DAY_S  # an age in the future
#: Payloads kept 30 days, in batches of 50: 300 rows take six batches.
THIRTY_DAYS = RetentionSettings(payload_max_age_s=30 * DAY_S, batch_size=50, pause_s=0)


@pytest.fixture
async def pool(database_url: str) -> AsyncIterator[Pool]:
    async with open_pool(database_url, max_size=2) as opened:
        yield opened


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(database_url)
    yield conn
    await conn.close()


async def record(pool: Pool, *events: Event) -> None:
    """Record the events, in this order (their ids follow it), all published."""
    async with pool.acquire() as conn:
        for e in events:  # one statement each: the ids follow the order given
            await insert_events(conn, [e])
        await pass_cursor(conn)


def aged(prefix: str, n: int, age_s: float) -> list[Event]:
    return [event(f"{prefix}_{i}", age_s=age_s) for i in range(n)]


async def run(pool: Pool, settings: RetentionSettings, dry_run: bool = False) -> RetentionReport:
    return await RetentionPass(pool, settings).run(dry_run=dry_run)


async def test_one_row_stamped_a_year_ahead_does_not_stop_retention(
    pool: Pool, db: asyncpg.Connection
) -> None:
    """The finding: one row a year in the future ahead of 300 payloads 40 days old. It
    was recorded before them, so it is at least as old: all 301 bodies are emptied (the
    dry run says so first), and a second pass finds nothing left."""
    await record(pool, event("evt_future", age_s=YEAR_AHEAD_S), *aged("evt_old", 300, 40 * DAY_S))

    dry = await run(pool, THIRTY_DAYS, dry_run=True)
    assert dry.count(WEBHOOKS, Removed.PAYLOAD) == 301
    report = await run(pool, THIRTY_DAYS)

    assert report.count(WEBHOOKS, Removed.PAYLOAD) == 301
    assert not any((await kept(db)).values())
    assert (await run(pool, THIRTY_DAYS)).count(WEBHOOKS, Removed.PAYLOAD) == 0


async def test_a_run_of_future_rows_longer_than_a_batch_is_dated_past_the_batch(
    pool: Pool, db: asyncpg.Connection
) -> None:
    """120 rows from a wrong clock (more than two batches) between old rows: the walk
    looks past its batch for the next believable stamp and empties them all."""
    await record(
        pool,
        *aged("evt_before", 10, 40 * DAY_S),
        *aged("evt_future", 120, YEAR_AHEAD_S),
        *aged("evt_after", 10, 40 * DAY_S),
    )
    report = await run(pool, THIRTY_DAYS)
    assert report.count(WEBHOOKS, Removed.PAYLOAD) == 140
    assert not any((await kept(db)).values())


async def test_a_future_row_with_nothing_old_after_it_keeps_its_payload(
    pool: Pool, db: asyncpg.Connection
) -> None:
    """A future row followed only by young rows, or by nothing, cannot be shown to be
    old: it keeps its body (and so do the young rows) and the walk waits there; the rows
    before it are emptied. It goes once the row recorded after it is old enough."""
    await record(pool, *aged("evt_old", 5, 40 * DAY_S), event("evt_future", age_s=YEAR_AHEAD_S))
    first = await run(pool, THIRTY_DAYS)
    assert first.count(WEBHOOKS, Removed.PAYLOAD) == 5
    state = await kept(db)
    assert state["evt_future"] and not any(state[f"evt_old_{i}"] for i in range(5))

    await record(pool, event("evt_young", age_s=DAY_S))
    second = await run(pool, THIRTY_DAYS)
    assert second.count(WEBHOOKS, Removed.PAYLOAD) == 0
    state = await kept(db)
    assert state["evt_future"] and state["evt_young"]


async def test_the_key_walk_steps_past_a_future_row_too(pool: Pool, db: asyncpg.Connection) -> None:
    """Keys kept 90 days: one future row ahead of 30 rows 100 days old no longer keeps
    every key after it; the 31 rows go."""
    keys = RetentionSettings(payload_max_age_s=0, key_max_age_s=90 * DAY_S, batch_size=10,
                             pause_s=0)  # fmt: skip
    await record(pool, event("evt_future", age_s=YEAR_AHEAD_S), *aged("evt_old", 30, 100 * DAY_S))
    report = await run(pool, keys)
    assert report.count(WEBHOOKS, Removed.KEY) == 31
    assert await db.fetchval("SELECT count(*) FROM processed_webhooks") == 0
