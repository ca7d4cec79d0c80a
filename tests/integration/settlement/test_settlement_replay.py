"""A settlement parked in the DLQ comes back through `gateway dlq replay`, once."""

from __future__ import annotations

import asyncio
from pathlib import Path

import asyncpg
import pytest

from gateway import cli
from tests.integration.settlement.test_settlement import payment, post_stripe
from tests.support.config_file import write_toml
from tests.support.gateway import config, running_server
from tests.support.services import wait_until
from tests.support.settlement import (
    fetch,
    merchant_balance,
    open_merchant,
    running_worker,
    settlement_sections,
)
from tests.support.stub import Stub


async def test_unknown_merchant_replayed_after_open_account(
    tmp_path: Path,
    database_url: str,
    nats_url: str,
    stub: Stub,
    redis_url: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    doc = config(database_url, nats_url, **settlement_sections(stub.url, redis_url))
    cfg = str(write_toml(tmp_path / "gateway.toml", doc))
    async with running_server(doc) as server, running_worker(doc) as parts:
        await post_stripe(
            server, "evt_later", payment("evt_later", "pi_later", 900, "usd", "m_late")
        )

        async def parked() -> list[asyncpg.Record]:
            return await fetch(database_url, "SELECT id, error_class FROM dlq_webhooks")

        rows = await wait_until(parked)
        assert [r["error_class"] for r in rows] == ["UNKNOWN_MERCHANT"]

        failed = await asyncio.to_thread(cli.main, ["dlq", "replay", "--all", "--config", cfg])
        assert failed == 1  # still no account: the replay fails and says so
        assert "UNKNOWN_MERCHANT" in capsys.readouterr().out

        await open_merchant(parts, "m_late")
        replayed = await asyncio.to_thread(cli.main, ["dlq", "replay", "--all", "--config", cfg])
        assert replayed == 0
        assert "replayed 1, failed 0" in capsys.readouterr().out
        assert await merchant_balance(parts, "m_late") == 900
        # The same payment arriving again by another event moves nothing more.
        second = payment("evt_later_b", "pi_later", 900, "usd", "m_late")
        await post_stripe(server, "evt_later_b", second)
        await asyncio.sleep(1.0)
        assert await merchant_balance(parts, "m_late") == 900
    dlq = await fetch(database_url, "SELECT is_resolved, resolution, attempts FROM dlq_webhooks")
    assert [(r["is_resolved"], r["resolution"]) for r in dlq] == [(True, "replayed")]
    assert len(await fetch(database_url, "SELECT 1 FROM ledger_transfers")) == 1
