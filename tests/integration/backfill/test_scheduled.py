"""Scheduled backfill inside `gateway serve`: a pass every interval over the trailing
window recovers what never arrived, and of two serving processes one works at a time
(the advisory lock; the other skips)."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import itertools
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

from gateway import settings as settings_mod
from gateway.adapters.postgres.backfill import SCHEDULE_LOCK_CLASS
from tests.support.gateway import RunningServer, config
from tests.support.provider_apis import API_KEY, running_apis, stand_in_keys, stripe_event
from tests.support.services import wait_until

INTERVAL_S = 1.0


def scheduled_settings(database_url: str, nats_url: str, api_url: str) -> settings_mod.Settings:
    doc: dict[str, Any] = copy.deepcopy(config(database_url, nats_url))
    doc["providers"]["stripe"] |= stand_in_keys(api_url) | {
        "backfill": {"interval_s": INTERVAL_S, "window_s": 7200},
    }
    return settings_mod.parse(doc, env={"PROVIDER_API_KEY": API_KEY})


@contextlib.asynccontextmanager
async def serving(settings: settings_mod.Settings) -> AsyncIterator[RunningServer]:
    server = RunningServer(settings)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


async def _count(database_url: str, sql: str, *args: Any) -> int:
    conn = await asyncpg.connect(database_url)
    try:
        return int(await conn.fetchval(sql, *args))
    finally:
        await conn.close()


def _recovered(metrics_text: str) -> float:
    for line in metrics_text.splitlines():
        if line.startswith("gateway_backfill_events_total{") and 'outcome="recovered"' in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


async def test_two_serving_processes_recover_once_one_pass_at_a_time(
    database_url: str, nats_url: str
) -> None:
    now = datetime.now(UTC)
    async with running_apis() as apis:
        apis.stripe_events = [stripe_event(n, now - timedelta(minutes=60 - n)) for n in range(3)]
        settings = scheduled_settings(database_url, nats_url, apis.url)
        async with serving(settings) as one, serving(settings) as two:
            # 1. The first pass (after one interval) recovers the three, marked backfill,
            # and publishes them.
            await wait_until(
                lambda: _count(
                    database_url,
                    "SELECT count(*) = 3 FROM processed_webhooks "
                    "WHERE source = 'backfill' AND outbox_published(processed_webhooks)",
                ),
                timeout_s=15,
            )
            texts = [s.parts.metrics.render() for s in (one, two)]
            assert sum(_recovered(t) for t in texts) == 3.0
            assert any(
                line.startswith(
                    'gateway_backfill_last_complete_timestamp_seconds{provider="stripe"}'
                )
                for t in texts
                for line in t.splitlines()
            )
            # 2. More passes run, each finding everything present; none overlap.
            await asyncio.sleep(3 * INTERVAL_S)
            rows = await _passes(database_url)
            assert len(rows) >= 2
            assert len(rows) <= 6  # one pass an interval between the two, not two
            for earlier, later in itertools.pairwise(rows):
                assert earlier["completed_at"] <= later["started_at"]
            assert sum(r["recovered"] for r in rows) == 3
            # 3. While another session holds the lock, neither process runs a pass.
            conn = await asyncpg.connect(database_url)
            try:
                await conn.execute(
                    "SELECT pg_advisory_lock($1::int, hashtext('stripe'))", SCHEDULE_LOCK_CLASS
                )
                await asyncio.sleep(0.5)  # a pass in progress finishes
                held = len(await _passes(database_url))
                await asyncio.sleep(3 * INTERVAL_S)
                assert len(await _passes(database_url)) == held
                await conn.execute(
                    "SELECT pg_advisory_unlock($1::int, hashtext('stripe'))", SCHEDULE_LOCK_CLASS
                )
                await wait_until(lambda: _more_passes(database_url, held), timeout_s=4 * INTERVAL_S)
            finally:
                await conn.close()
        assert (
            await _count(
                database_url, "SELECT count(*) FROM processed_webhooks WHERE provider = 'stripe'"
            )
            == 3
        )


async def _passes(database_url: str) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(database_url)
    try:
        return list(
            await conn.fetch(
                "SELECT started_at, completed_at, recovered FROM backfill_progress "
                "WHERE provider = 'stripe' AND completed_at IS NOT NULL ORDER BY started_at"
            )
        )
    finally:
        await conn.close()


async def _more_passes(database_url: str, than: int) -> bool:
    return len(await _passes(database_url)) > than


async def test_a_pass_deletes_completed_progress_older_than_a_week(
    database_url: str, nats_url: str
) -> None:
    """Completed rows of this provider older than the keep time go; newer ones, unfinished
    ones (cursors to continue) and other providers' rows stay."""
    rows = [  # (provider, completed days ago or None, started days ago)
        ("stripe", 8, 8),
        ("stripe", 30, 30),
        ("stripe", 1, 1),
        ("stripe", None, 9),
        ("paddle", 8, 8),
    ]
    conn = await asyncpg.connect(database_url)
    try:
        for n, (provider, completed, started) in enumerate(rows):
            await conn.execute(
                "INSERT INTO backfill_progress (provider, since, until, started_at, completed_at) "
                "VALUES ($1, now() - make_interval(days => $2, hours => 2), "
                "now() - make_interval(days => $2, hours => 1) + make_interval(mins => $3), "
                "now() - make_interval(days => $2), "
                "CASE WHEN $4::int IS NULL THEN NULL ELSE now() - make_interval(days => $4) END)",
                provider,
                started,
                n,
                completed,
            )
    finally:
        await conn.close()
    async with running_apis() as apis:
        settings = scheduled_settings(database_url, nats_url, apis.url)
        async with serving(settings):
            await wait_until(
                lambda: _count(
                    database_url,
                    "SELECT count(*) = 0 FROM backfill_progress WHERE provider = 'stripe' "
                    "AND completed_at < now() - interval '7 days'",
                ),
                timeout_s=15,
            )
    conn = await asyncpg.connect(database_url)
    try:
        left = await conn.fetch(
            "SELECT provider, (now() - started_at) > interval '1 hour' AS old, "
            "completed_at IS NOT NULL AS done FROM backfill_progress ORDER BY provider, started_at"
        )
    finally:
        await conn.close()
    kept = [(r["provider"], r["old"], r["done"]) for r in left]
    assert ("stripe", True, True) in kept  # the one completed a day ago
    assert ("stripe", True, False) in kept  # the unfinished one
    assert ("paddle", True, True) in kept  # another provider's (pruned by its own passes)
    assert sum(1 for p, old, done in kept if p == "stripe" and old and done) == 1
