"""What a worker process writes of its dependencies and retries (issue 42 #12), against
real PostgreSQL: `since` moves only on a change, a crossing older write changes nothing,
a retry is listed until its redelivery settles, and a flush that fails keeps its news."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from gateway.adapters.postgres import dependency_state as store
from gateway.adapters.postgres import open_pool
from gateway.core.events.model import Event
from gateway.core.health.dependencies import Dependency
from gateway.dependency_watch import DependencyWatch
from gateway.errors import DatabaseUnavailable
from gateway.metrics import Metrics

T0 = datetime(2026, 12, 1, 3, 0, tzinfo=UTC)


@pytest.fixture
async def pool(database_url: str) -> AsyncIterator[asyncpg.Pool]:
    async with open_pool(database_url, max_size=2) as p:
        yield p


class Clock:
    def __init__(self) -> None:
        self.now, self.mono = T0, 0.0

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)
        self.mono += seconds


def event(event_id: str) -> Event:
    return Event("stripe", event_id, "x", "webhooks.stripe.x", {}, b"{}", T0)


async def test_states_keep_their_since_and_retries_leave_when_settled(
    pool: asyncpg.Pool,
) -> None:
    clock = Clock()
    metrics = Metrics()
    watch = DependencyWatch(metrics, "settle@t:1", clock=lambda: clock.now,
                            monotonic=lambda: clock.mono)  # fmt: skip
    watch.failed(Dependency.CURRENCY_SERVICE, "RATE_SERVICE_UNAVAILABLE")
    watch.retrying(event("evt_1"), "RATE_UNAVAILABLE", 5.0, deliveries=1)
    await watch.flush(pool)
    clock.advance(40)  # seen down again after REASSERT_S: written, since unchanged
    watch.failed(Dependency.CURRENCY_SERVICE, "RATE_SERVICE_UNAVAILABLE")
    await watch.flush(pool)
    async with pool.acquire() as conn:
        (row,) = await store.dependency_states(conn)
        counts = await store.retries_by_class(conn, T0)
    assert (row.dependency, row.state, row.since) == ("currency-service", "down", T0)
    assert row.checked_at == T0 + timedelta(seconds=40) and row.checked_by == "settle@t:1"
    assert [(c.error_class, c.dependency, c.events) for c in counts] == [
        ("RATE_UNAVAILABLE", "currency-service", 1)
    ]
    assert metrics.dependency_up.get(dependency="currency-service") == 0.0

    clock.advance(5)
    watch.answered(Dependency.CURRENCY_SERVICE)
    watch.settled(event("evt_1"), deliveries=2)
    await watch.flush(pool)
    async with pool.acquire() as conn:
        states = await store.dependency_states(conn)
        await store.write_states(  # another process's older observation: ignored
            conn, [store.StateChange("currency-service", "down", T0)], "settle@t:2"
        )
        after = await store.dependency_states(conn)
        counts = await store.retries_by_class(conn, T0)
    # Settling says the database and the ledger answered too.
    assert [(s.dependency, s.state, s.since, s.error_class) for s in states] == [
        (name, "up", T0 + timedelta(seconds=45), None)
        for name in ("currency-service", "database", "ledger")
    ]
    assert after == states and counts == []


async def test_a_failed_flush_keeps_what_it_held(database_url: str) -> None:
    watch = DependencyWatch(None, "settle@t:1")
    watch.failed(Dependency.LEDGER, "LEDGER_UNAVAILABLE")
    watch.retrying(event("evt_2"), "LEDGER_UNAVAILABLE", 2.0, deliveries=1)
    async with open_pool(database_url, max_size=1) as closed:
        pass  # closed: every acquire fails
    with pytest.raises((DatabaseUnavailable, asyncpg.InterfaceError)):
        await watch.flush(closed)
    async with open_pool(database_url, max_size=1) as pool:
        await watch.flush(pool)
        async with pool.acquire() as conn:
            states = await store.dependency_states(conn)
            counts = await store.retries_by_class(conn, T0 - timedelta(days=1))
    assert [(s.dependency, s.state) for s in states] == [("ledger", "down")]
    assert [(c.error_class, c.events) for c in counts] == [("LEDGER_UNAVAILABLE", 1)]


async def test_rows_of_unknown_dependencies_are_not_read(pool: asyncpg.Pool) -> None:
    """The overview (every 10 s) and the alerts read the known dependencies' rows only:
    a flood of rows written under other names (by hand, or forged) is neither read nor
    alerted on, nor shown."""
    async with pool.acquire() as conn:
        await conn.execute(
            "INSERT INTO dependency_state (dependency, state, since, checked_at, checked_by)"
            " SELECT 'forged-' || n, 'down', $1, $1, 'x' FROM generate_series(1, 5000) AS n",
            T0,
        )
        await store.write_states(
            conn, [store.StateChange(Dependency.LEDGER, "down", T0, "LEDGER_UNAVAILABLE")], "s"
        )
        rows = await store.dependency_states(conn)
    assert [(r.dependency, r.state) for r in rows] == [("ledger", "down")]
