"""The hold gauges of per-key order, kept by the DLQ alerts loop that `gateway serve` and
`gateway settle` run: `gateway_order_held_keys` and `gateway_order_oldest_hold_seconds`
follow `order_applied` as keys are held and released."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from gateway.adapters.postgres import open_pool
from gateway.adapters.postgres.ordering import admin as order_admin
from gateway.core.health.alerting import AlertSettings
from gateway.dlq.alerts import DlqAlerts
from gateway.metrics import Metrics

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
async def pool(database_url: str) -> AsyncIterator[asyncpg.Pool]:
    async with open_pool(database_url, max_size=4) as p:
        yield p


async def hold(pool: asyncpg.Pool, key: str, since: datetime | None, applied: int = 0) -> None:
    """A key of stripe's, held at applied + 1 since `since` (None: not held)."""
    await pool.execute(
        "INSERT INTO order_counters (provider, order_key, last_seq) VALUES ('stripe', $1, $2)",
        key,
        applied + 1,
    )
    await pool.execute(
        "INSERT INTO order_applied (provider, order_key, applied_seq, held_seq, hold_reason,"
        " held_at) VALUES ('stripe', $1, $2, $3, $4, $5)",
        key,
        applied,
        None if since is None else applied + 1,
        None if since is None else "UNKNOWN_MERCHANT",
        since,
    )


def exported(metrics: Metrics, name: str) -> float:
    """The value `/metrics` shows for an unlabelled family."""
    (line,) = [ln for ln in metrics.render().splitlines() if ln.startswith(name + " ")]
    return float(line.split()[1])


async def test_gauges_count_the_holds_and_age_the_oldest(pool: asyncpg.Pool) -> None:
    metrics = Metrics()
    evaluator = DlqAlerts(pool, AlertSettings(), metrics, None)
    await evaluator.evaluate(T0)
    assert exported(metrics, "gateway_order_held_keys") == 0
    assert exported(metrics, "gateway_order_oldest_hold_seconds") == 0

    await hold(pool, "pi_old", T0 - timedelta(minutes=20))
    await hold(pool, "pi_new", T0 - timedelta(minutes=5), applied=3)
    await hold(pool, "pi_free", None, applied=7)
    await evaluator.evaluate(T0)
    assert exported(metrics, "gateway_order_held_keys") == 2
    assert exported(metrics, "gateway_order_oldest_hold_seconds") == 1200

    async with pool.acquire() as conn:
        await order_admin.release_key(conn, "stripe", "pi_old", "test", "ops")
    await evaluator.evaluate(T0 + timedelta(minutes=1))
    assert exported(metrics, "gateway_order_held_keys") == 1
    assert exported(metrics, "gateway_order_oldest_hold_seconds") == 360

    async with pool.acquire() as conn:
        await order_admin.release_key(conn, "stripe", "pi_new", "test", "ops")
    await evaluator.evaluate(T0 + timedelta(minutes=2))
    assert exported(metrics, "gateway_order_held_keys") == 0
    assert exported(metrics, "gateway_order_oldest_hold_seconds") == 0


async def test_the_look_up_uses_the_partial_index(pool: asyncpg.Pool) -> None:
    """Many keys, few holds: the gauges' query reads the held rows' index, not the table."""
    await pool.execute(
        "INSERT INTO order_applied (provider, order_key, applied_seq)"
        " SELECT 'stripe', 'k' || i, 1 FROM generate_series(1, 20000) i"
    )
    await hold(pool, "pi_held", T0)
    await pool.execute("ANALYZE order_applied")
    plan = "\n".join(
        r[0]
        for r in await pool.fetch("EXPLAIN " + order_admin._HOLDS)  # the query itself
    )
    assert "order_applied_held_idx" in plan, plan
