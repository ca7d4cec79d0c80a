"""Run the real settlement worker in-process, and look at what it did."""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from gateway import settings as settings_mod
from gateway.core.ledger.ids import merchant_account, merchant_account_id
from gateway.settlement.parts import SettlementParts
from gateway.settlement.worker import SettlementWorker
from gateway.wiring.settlement import settlement_parts


def ledger_section(backend: str) -> dict[str, Any]:
    """`[ledger]` for `backend`: nothing for PostgreSQL (the default); for TigerBeetle
    the cluster `TIGERBEETLE_ADDRESS` names, the test skipped (with that reason) without."""
    if backend == "postgres":
        return {}
    address = os.environ.get("TIGERBEETLE_ADDRESS")
    if not address:
        pytest.skip("TIGERBEETLE_ADDRESS not set: no TigerBeetle server here")
    return {"backend": "tigerbeetle", "addresses": address.split(","), "timeout_s": 10.0}


def settlement_sections(
    stub_url: str, redis_url: str, **overrides: dict[str, Any]
) -> dict[str, Any]:
    """Config sections for settling in tests: tiny retry delays, a private cache prefix."""
    sections: dict[str, Any] = {
        "redis": {"url": redis_url},
        "currency": {
            "url": stub_url,
            "retry_delays_s": [0.2, 0.3, 0.4],
            "cache_key_prefix": f"fx-test-{uuid.uuid4().hex[:8]}",
            "timeout_s": 1.0,
        },
        "settlement": {"retry_delays_s": [0.2, 0.3, 0.4], "ack_wait_s": 2.0, "metrics_port": 0},
        "ledger": {"retry_delays_s": [0.2, 0.3, 0.4]},
    }
    for name, values in overrides.items():
        sections[name] = {**sections.get(name, {}), **values}
    return sections


@contextlib.asynccontextmanager
async def running_worker(
    doc: dict[str, Any], env: dict[str, str] | None = None
) -> AsyncIterator[SettlementParts]:
    """The worker consuming in the background until the block ends (`env`: the
    environment the config's `*_env` keys name)."""
    settings = settings_mod.parse(doc, env=env or {})
    async with settlement_parts(settings) as parts:
        stop = asyncio.Event()
        task = asyncio.create_task(SettlementWorker(parts).run(stop))
        try:
            yield parts
        finally:
            stop.set()
            await asyncio.wait_for(task, 10)


async def open_merchant(parts: SettlementParts, merchant_id: str, currency: str = "USD") -> None:
    await parts.ledger.ensure_accounts([merchant_account(merchant_id, currency)])


async def merchant_balance(
    parts: SettlementParts, merchant_id: str, currency: str = "USD"
) -> int | None:
    balance = await parts.ledger.balance(merchant_account_id(merchant_id, currency))
    return None if balance is None else balance.credit_balance_minor


async def fetch(dsn: str, sql: str, *args: object) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(dsn)
    try:
        return await conn.fetch(sql, *args)
    finally:
        await conn.close()
