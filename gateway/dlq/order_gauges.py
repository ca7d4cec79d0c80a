"""The hold gauges of per-key order, read from `order_applied` on the DLQ alerts loop's
schedule (every `[alerts] interval_s`), beside the DLQ gauges, in `gateway serve` and
`gateway settle`: `gateway_order_held_keys` and `gateway_order_oldest_hold_seconds`."""

from __future__ import annotations

from datetime import datetime

from gateway.adapters.postgres import Pool, connection
from gateway.adapters.postgres.ordering import admin as store
from gateway.core.retention import age_s
from gateway.metrics import Metrics


async def refresh_order_gauges(pool: Pool, metrics: Metrics, now: datetime) -> tuple[int, float]:
    """Set both gauges from the held keys (the partial index order_applied_held_idx, so
    the look-up grows with the holds, not with the keys); return (held keys, oldest
    hold's age in seconds, 0 without one)."""
    async with connection(pool) as conn:
        held, oldest = await store.holds(conn)
    oldest_s = age_s(now, oldest)
    metrics.order_held_keys.set(held)
    metrics.order_oldest_hold_seconds.set(oldest_s)
    return held, oldest_s
