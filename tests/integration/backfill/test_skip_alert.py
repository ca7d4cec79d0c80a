"""A skipped backfill page reaches the in-process alerts (`[alerts] webhook_url`) as
`backfill_page_skipped`, per provider: FIRING once, RESOLVED an hour after the skip."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import asyncpg
import httpx
import pytest

from gateway.adapters.alert_webhook import AlertWebhook
from gateway.adapters.postgres import open_pool
from gateway.core.health.alerting import AlertSettings
from gateway.dlq.alerts import DlqAlerts
from gateway.metrics import Metrics
from tests.support.receiver import Receiver

T0 = datetime(2026, 11, 30, 12, tzinfo=UTC)


@pytest.fixture
async def pool(database_url: str) -> AsyncIterator[asyncpg.Pool]:
    async with open_pool(database_url, max_size=4) as p:
        yield p


async def test_a_skipped_page_fires_once_and_resolves_after_an_hour(
    pool: asyncpg.Pool, database_url: str, receiver: Receiver
) -> None:
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute(
            "INSERT INTO backfill_progress (provider, since, until, cursor, failed_passes,"
            " last_error, skipped_at) VALUES ('stripe', $1, $2, 'evt_9', 3,"
            " 'ProviderApiAnswerInvalid: GET /v1/events: ...', $3)",
            T0 - timedelta(hours=2),
            T0 - timedelta(hours=1),
            T0 - timedelta(minutes=10),
        )
    finally:
        await conn.close()
    config = AlertSettings(webhook_url=receiver.url)
    async with httpx.AsyncClient() as client:
        webhook = AlertWebhook(client, receiver.url)
        evaluator = DlqAlerts(pool, config, Metrics(), webhook, source="gw-test")
        assert [n.state.value for n in await evaluator.evaluate(T0)] == ["firing"]
        assert await evaluator.evaluate(T0 + timedelta(minutes=30)) == []  # still held
        assert await evaluator.evaluate(T0 + timedelta(minutes=51)) != []
    assert receiver.statuses() == [
        ("backfill_page_skipped", "stripe", "firing"),
        ("backfill_page_skipped", "stripe", "resolved"),
    ]
    firing = receiver.received[0]
    assert firing["text"].startswith("[FIRING] gateway backfill_page_skipped: 1 stripe backfill")
