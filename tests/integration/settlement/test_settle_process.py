"""`gateway settle` as a process, and `gateway ledger` on what it posted: SIGKILL
mid-batch loses nothing and settles nothing twice."""

from __future__ import annotations

import asyncio
import signal
import subprocess
from pathlib import Path

import asyncpg

from tests.support.cli import GATEWAY, Result, invoke
from tests.support.config_file import write_toml
from tests.support.gateway import BILLING_TOKEN, config, running_server
from tests.support.processes import clean_env
from tests.support.services import wait_until
from tests.support.settlement import fetch, settlement_sections
from tests.support.stub import Stub


def gateway(*args: str) -> Result:
    return invoke(*args)


def start_worker(cfg: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [GATEWAY, "settle", "--config", str(cfg)],
        env=clean_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


async def count_settled(dsn: str) -> int:
    rows = await fetch(dsn, "SELECT count(*) AS n FROM settlements WHERE state = 'settled'")
    return int(rows[0]["n"])


async def test_worker_killed_mid_batch_loses_nothing_and_doubles_nothing(
    tmp_path: Path, database_url: str, nats_url: str, stub: Stub, redis_url: str
) -> None:
    doc = config(database_url, nats_url, **settlement_sections(stub.url, redis_url))
    doc["settlement"]["batch_size"] = 64
    cfg = write_toml(tmp_path / "gateway.toml", doc)
    opened = gateway("ledger", "--config", str(cfg), "open-account", "m_kill")
    assert opened.returncode == 0, opened.stderr
    total = 400
    async with running_server(doc) as server:
        worker = start_worker(cfg)
        try:

            async def publish(i: int) -> None:
                event = {
                    "type": "payment.captured",
                    "data": {
                        "settlement_id": f"s_{i}",
                        "merchant_id": "m_kill",
                        "amount_minor": 100,
                        "currency": "USD",
                    },
                }
                r = await server.client.post(
                    "/v1/events",
                    json=event,
                    headers={
                        "Authorization": f"Bearer {BILLING_TOKEN}",
                        "Idempotency-Key": f"k_{i}",
                    },
                )
                assert r.status_code == 200

            await asyncio.gather(*(publish(i) for i in range(total)))
            await wait_until(lambda: _at_least(database_url, 20), timeout_s=30)
            worker.send_signal(signal.SIGKILL)  # mid-batch: some messages in flight, unacked
            worker.wait(timeout=10)
            partial = await count_settled(database_url)
            assert partial < total, "the kill came too late to test anything"
            worker = start_worker(cfg)
            await wait_until(lambda: _at_least(database_url, total), timeout_s=60)
        finally:
            worker.kill()
            worker.wait(timeout=10)
    transfers = await fetch(
        database_url, "SELECT count(*) AS n, sum(amount) AS s FROM ledger_transfers"
    )
    assert (int(transfers[0]["n"]), int(transfers[0]["s"])) == (total, total * 100)
    balances = gateway("ledger", "--config", str(cfg), "balances", "--json")
    assert balances.returncode == 0, balances.stderr
    assert '"balance": 40000' in balances.stdout
    check = gateway("ledger", "--config", str(cfg), "check")
    assert check.returncode == 0, check.stderr
    assert check.stdout.startswith("ledger balanced: debits 40000 = credits 40000")


async def _at_least(dsn: str, n: int) -> bool:
    return await count_settled(dsn) >= n


async def test_ledger_check_fails_loudly_on_imbalance(
    tmp_path: Path, database_url: str, nats_url: str, stub: Stub, redis_url: str
) -> None:
    doc = config(database_url, nats_url, **settlement_sections(stub.url, redis_url))
    cfg = write_toml(tmp_path / "gateway.toml", doc)
    assert gateway("ledger", "--config", str(cfg), "open-account", "m_x").returncode == 0
    conn = await asyncpg.connect(database_url)
    try:  # a bug or a hand edit: credits without their debit
        await conn.execute("UPDATE ledger_accounts SET credits_posted = credits_posted + 5")
    finally:
        await conn.close()
    check = gateway("ledger", "--config", str(cfg), "check")
    assert check.returncode == 1
    assert "ledger check FAILED" in check.stderr
    assert "ledger imbalance" in check.stderr  # the critical log line
