"""`gateway ledger balances` by name: the name directory in real PostgreSQL, beside
either ledger backend.

The PostgreSQL ledger always runs; TigerBeetle only when `TIGERBEETLE_ADDRESS` names a
cluster (its server cannot be installed here). Names live in PostgreSQL for both, so the
TigerBeetle case needs the test database too. Every test uses merchants and sources of
its own, so a long-lived TigerBeetle cluster with other runs' accounts serves as well.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from decimal import Decimal
from pathlib import Path

import asyncpg
import orjson
import pytest

from gateway.adapters.postgres import open_pool
from gateway.adapters.postgres.account_names import PostgresAccountNames
from gateway.adapters.postgres.ledger import PostgresLedger
from gateway.adapters.tigerbeetle import open_tigerbeetle
from gateway.core.ledger.accounts import clearing_name, merchant_name
from gateway.core.ledger.port import Ledger, TransferResult
from gateway.core.settlement.instructions import (
    SettlementInstruction,
    SettlementKind,
    build_transfer,
)
from gateway.settlement import ledger_ops
from tests.support.cli import Result, invoke


@pytest.fixture(params=["postgres", "tigerbeetle"])
async def desk(
    request: pytest.FixtureRequest, database_url: str
) -> AsyncIterator[tuple[Ledger, PostgresAccountNames]]:
    """Each ledger backend, with the name directory in a fresh migrated database."""
    async with open_pool(database_url, max_size=4) as pool:
        names = PostgresAccountNames(pool)
        if request.param == "postgres":
            yield PostgresLedger(pool), names
            return
        address = os.environ.get("TIGERBEETLE_ADDRESS")
        if not address:
            pytest.skip("TIGERBEETLE_ADDRESS not set: no TigerBeetle server here")
        cluster_id = int(os.environ.get("TIGERBEETLE_CLUSTER_ID", "0"))
        async with open_tigerbeetle(cluster_id, address, timeout_s=10.0) as tb_ledger:
            yield tb_ledger, names


def _capture(merchant: str, source: str, amount_minor: int) -> SettlementInstruction:
    return SettlementInstruction(
        settlement_id=f"{merchant}:pay_{uuid.uuid4().hex[:8]}", kind=SettlementKind.CAPTURE,
        merchant_id=merchant, amount_minor=amount_minor, currency="USD", refund_id=None,
        source_event_id=None,
    )  # fmt: skip


async def test_balances_show_kind_owner_and_currency_and_filter_by_merchant(
    desk: tuple[Ledger, PostgresAccountNames],
) -> None:
    """Opened accounts are listed with their names; `--merchant` and `--currency` filter."""
    ledger, names = desk
    tag = uuid.uuid4().hex[:10]
    merchant, source = f"m_{tag}", f"psp_{tag}"
    await ledger_ops.open_account(ledger, names, merchant, "USD")
    await ledger_ops.open_account(ledger, names, merchant, "EUR")
    await ledger_ops.open_account(ledger, names, merchant, "USD")  # idempotent
    await ledger_ops.open_accounts(ledger, names, [clearing_name(source, "USD")])
    transfer = build_transfer(
        _capture(merchant, source, 1250), provider=source, ledger_currency="USD",
        amount_minor=1250, rate_at_payment=Decimal(1),
    )  # fmt: skip
    assert await ledger.post([transfer]) == [TransferResult.CREATED]

    mine = await ledger_ops.balances(ledger, names, merchant=merchant)
    assert sorted((v.kind, v.owner, v.currency, v.balance) for v in mine) == [
        ("merchant", merchant, "EUR", 0),
        ("merchant", merchant, "USD", 1250),
    ]
    usd = await ledger_ops.balances(ledger, names, merchant=merchant, currency="usd")
    assert [(v.account_id, v.credits_posted) for v in usd] == [
        (merchant_name(merchant, "USD").account_id, 1250)
    ]
    everything = {v.account_id: v for v in await ledger_ops.balances(ledger, names)}
    clearing = everything[clearing_name(source, "USD").account_id]
    assert (clearing.kind, clearing.owner, clearing.currency) == ("clearing", source, "USD")
    assert clearing.debits_posted == 1250


async def test_an_account_opened_without_a_name_is_listed_unnamed(
    desk: tuple[Ledger, PostgresAccountNames],
) -> None:
    """An account created straight in the ledger (older versions, other tools) still shows
    its kind and currency, from the ledger's own numbers, and no owner."""
    ledger, names = desk
    unnamed = merchant_name(f"m_{uuid.uuid4().hex[:10]}", "JPY")
    await ledger.ensure_accounts([unnamed.spec()])
    views = {v.account_id: v for v in await ledger_ops.balances(ledger, names)}
    view = views[unnamed.account_id]
    assert (view.kind, view.owner, view.currency) == ("merchant", None, "JPY")
    assert await ledger_ops.balances(ledger, names, merchant=unnamed.owner) == []


async def test_a_database_without_the_names_table_lists_balances_unnamed(
    database_url: str,
) -> None:
    """Before `gateway migrate` adds the table, balances still list, with no names."""
    async with open_pool(database_url, max_size=2) as pool:
        ledger, names = PostgresLedger(pool), PostgresAccountNames(pool)
        await ledger_ops.open_account(ledger, names, "m_1", "USD")
        await pool.execute("DROP TABLE ledger_account_names")
        [view] = await ledger_ops.balances(ledger, names)
    assert (view.kind, view.owner, view.currency) == ("merchant", None, "USD")


def _gateway(*args: str) -> Result:
    return invoke(*args)


async def test_cli_balances_by_merchant_as_table_and_json(
    tmp_path: Path, database_url: str
) -> None:
    """`gateway ledger balances` prints kind, owner and currency; `--json` the same fields."""
    config = tmp_path / "gateway.toml"
    # NATS is never reached by the ledger commands; the config must still name it.
    config.write_text(
        f'[database]\nurl = "{database_url}"\n[nats]\nurl = "nats://127.0.0.1:1"\n',
        encoding="utf-8",
    )
    cfg = ("--config", str(config))
    for merchant, currency in (("m_1", "USD"), ("m_1", "EUR"), ("m_2", "USD")):
        opened = _gateway("ledger", "open-account", merchant, "--currency", currency, *cfg)
        assert opened.returncode == 0, opened.stderr
    conn = await asyncpg.connect(database_url)
    try:  # an account no name was recorded for
        await conn.execute("DELETE FROM ledger_account_names WHERE owner = 'm_2'")
    finally:
        await conn.close()

    listed = _gateway("ledger", "balances", "--merchant", "m_1", "--json", *cfg)
    assert listed.returncode == 0, listed.stderr
    rows = orjson.loads(listed.stdout)
    assert sorted((r["kind"], r["owner"], r["currency"]) for r in rows) == [
        ("merchant", "m_1", "EUR"),
        ("merchant", "m_1", "USD"),
    ]
    assert set(rows[0]) == {
        "account_id", "kind", "owner", "currency", "ledger",
        "debits_posted", "credits_posted", "balance",
        "debits_pending", "credits_pending", "reserved",  # what authorisations hold
    }  # fmt: skip

    table = _gateway("ledger", "balances", "--currency", "USD", *cfg)
    assert table.returncode == 0, table.stderr
    header, *lines = table.stdout.splitlines()
    assert header.split()[:4] == ["account", "kind", "owner", "currency"]
    assert sorted(line.split()[1:4] for line in lines) == [
        ["merchant", "(unnamed)", "USD"],
        ["merchant", "m_1", "USD"],
    ]

    bad = _gateway("ledger", "balances", "--currency", "dollars", *cfg)
    assert bad.returncode == 2
    assert bad.stderr.startswith("gateway: config error: --currency:")
