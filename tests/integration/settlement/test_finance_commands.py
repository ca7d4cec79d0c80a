"""Finance's commands on both ledgers, as an operator runs them: `gateway ledger
statement|transfers|export|adjust` and `check --payments`, against movements the real
settler posted. A statement's closing balance is the ledger's own balance."""

from __future__ import annotations

import csv
import io
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gateway import settings as settings_mod
from gateway.adapters.postgres.account_names import PostgresAccountNames
from gateway.settlement import ledger_ops
from gateway.settlement.batch import settle_batch
from gateway.settlement.parts import SettlementParts
from gateway.settlement.settler import SettleOutcome
from gateway.wiring.settlement import settlement_parts
from tests.integration.settlement.test_money_movements import Payment
from tests.support.cli import Result, invoke
from tests.support.config_file import write_toml
from tests.support.gateway import config
from tests.support.settlement import (
    fetch,
    ledger_section,
    merchant_balance,
    settlement_sections,
)
from tests.support.stub import Stub


@pytest.fixture(params=["postgres", "tigerbeetle"])
def doc(
    request: pytest.FixtureRequest, database_url: str, nats_url: str, stub: Stub, redis_url: str
) -> dict[str, Any]:
    ledger = ledger_section(request.param)
    return config(database_url, nats_url, **settlement_sections(stub.url, redis_url, ledger=ledger))


@pytest.fixture
async def parts(doc: dict[str, Any]) -> AsyncIterator[SettlementParts]:
    async with settlement_parts(settings_mod.parse(doc, env={})) as p:
        await p.settler.open_clearing_accounts()
        yield p


@pytest.fixture
def cfg(tmp_path: Path, doc: dict[str, Any]) -> tuple[str, str]:
    return ("--config", str(write_toml(tmp_path / "gateway.toml", doc)))


def gateway(*args: str) -> Result:
    return invoke(*args)


async def settled_payment(parts: SettlementParts) -> Payment:
    """Capture 5000, refund 1000 then 3000 in all, a chargeback of 500: 1500 left."""
    p = Payment()
    await ledger_ops.open_account(parts.ledger, PostgresAccountNames(parts.pool), p.merchant, "USD")
    events = [p.capture(5000), p.charge_refunded(1000), p.charge_refunded(3000),
              p.dispute("funds_withdrawn", 500)]  # fmt: skip
    for event in events:
        assert await settle_batch(parts.settler, [(event, 1)]) == [SettleOutcome.SETTLED]
    return p


async def test_a_statement_ends_at_the_ledgers_balance(
    parts: SettlementParts, cfg: tuple[str, str]
) -> None:
    p = await settled_payment(parts)
    text = gateway("ledger", "statement", "--merchant", p.merchant, *cfg)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0] == f"statement of {p.merchant} in USD"
    assert lines[1] == "opening balance 0.00 USD"
    assert lines[-1] == "closing balance 15.00 USD (4 movements)"
    assert [ln.split()[2] for ln in lines[2:-1]] == ["capture", "refund", "refund", "chargeback"]
    assert "-20.00 USD" in lines[4] and "20.00 USD" in lines[4]  # the second refund, netted

    as_json = gateway("ledger", "statement", "--merchant", p.merchant, "--json", *cfg)
    rows = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert [r["posted_minor"] for r in rows] == [5000, -1000, -2000, -500]
    balances = gateway("ledger", "balances", "--merchant", p.merchant, "--json", *cfg)
    [account] = json.loads(balances.stdout)
    assert rows[-1]["balance_minor"] == account["balance"] == 1500
    assert await merchant_balance(parts, p.merchant) == 1500

    window = gateway("ledger", "statement", "--merchant", p.merchant, "--since", "1s",
                     "--until", "2099-01-01T00:00Z", "--csv", *cfg)  # fmt: skip
    assert window.returncode == 0, window.stderr


async def test_transfers_and_export_list_the_movements_filtered(
    parts: SettlementParts, cfg: tuple[str, str]
) -> None:
    p = await settled_payment(parts)
    listed = gateway("ledger", "transfers", "--payment", p.pi, "--kind", "refund", "--json", *cfg)
    assert listed.returncode == 0, listed.stderr
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [(r["movement_id"], r["amount_minor"]) for r in rows] == [
        ("refunded:1000", 1000),
        ("refunded:3000", 2000),
    ]
    exported = gateway("ledger", "export", "--merchant", p.merchant, "--format", "csv", *cfg)
    table = list(csv.DictReader(io.StringIO(exported.stdout)))
    assert [r["kind"] for r in table] == ["capture", "refund", "refund", "chargeback"]
    assert table[0]["event_id"].startswith(f"evt_{p.tag}")


async def test_adjust_posts_once_and_refuses_what_it_cannot_use(
    parts: SettlementParts, cfg: tuple[str, str], database_url: str
) -> None:
    p = await settled_payment(parts)
    entry = ("--merchant", p.merchant, "--currency", "USD", "--reason", "duplicate capture")
    adj_id = f"adj-{uuid.uuid4().hex[:8]}"
    first = gateway("ledger", "adjust", *entry, "--amount", "-1250", "--id", adj_id, *cfg)
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == f"adjustment {adj_id}: -12.50 USD to {p.merchant}, posted"
    again = gateway("ledger", "adjust", *entry, "--amount", "-1250", "--id", adj_id, *cfg)
    assert "nothing moved again" in again.stdout
    assert await merchant_balance(parts, p.merchant) == 1500 - 1250
    refused = {
        "reused id": ("--amount", "-1300", "--id", adj_id),
        "zero": ("--amount", "0", "--id", "z"),
        "not an integer": ("--amount", "12.50", "--id", "n"),
        "an id past 200 characters": ("--amount", "5", "--id", "x" * 201),
        "a note past 2,000 characters": ("--amount", "5", "--id", "t", "--note", "n" * 2001),
        "an id of two lines": ("--amount", "5", "--id", "a\nb"),
    }
    for why, flags in refused.items():
        out = gateway("ledger", "adjust", *entry, *flags, *cfg)
        assert out.returncode == 2, (why, out.stdout, out.stderr)
        assert len(out.stderr.strip().splitlines()) == 1 or "usage:" in out.stderr, why
    stranger = gateway("ledger", "adjust", "--merchant", "m_nobody", "--amount", "5",
                       "--reason", "r", "--id", "s", *cfg)  # fmt: skip
    assert stranger.returncode == 2 and "m_nobody" in stranger.stderr
    blank = gateway("ledger", "adjust", *entry[:4], "--reason", " ", "--amount", "5",
                    "--id", "b", *cfg)  # fmt: skip
    assert blank.returncode == 2 and "--reason" in blank.stderr
    audit = await fetch(database_url, "SELECT reason, actor FROM ledger_adjustments")
    assert [r["reason"] for r in audit] == ["duplicate capture"]
    statement = gateway("ledger", "statement", "--merchant", p.merchant, *cfg)
    assert statement.stdout.splitlines()[-1] == "closing balance 2.50 USD (5 movements)"


async def test_check_payments_names_the_payment_that_differs(
    parts: SettlementParts, cfg: tuple[str, str], database_url: str
) -> None:
    p, q = await settled_payment(parts), await settled_payment(parts)
    fine = gateway("ledger", "check", "--payments", *cfg)
    assert fine.returncode == 0, fine.stderr
    assert fine.stdout.strip().endswith("every payment matches")
    # An outside write: the record of q's capture says one cent more than was posted.
    await fetch(database_url, "UPDATE settlements SET ledger_amount_minor = 5001 "
                "WHERE settlement_id = $1 AND kind = 'capture'", q.pi)  # fmt: skip
    found = gateway("ledger", "check", "--payments", "--json", *cfg)
    assert found.returncode == 1
    report = json.loads(found.stdout)
    assert [d["payment_id"] for d in report["differing"]] == [q.pi]
    assert report["differing"][0]["recorded_minor"] == 5001
    assert report["differing"][0]["posted_minor"] == 5000
    assert p.pi not in found.stdout


async def test_an_open_authorisation_shows_as_reserved_not_in_the_balance(
    parts: SettlementParts, cfg: tuple[str, str]
) -> None:
    """`ledger balances` shows what an authorisation reserves beside the balance, and a
    statement lists the authorisation and the capture that posted it at 0 and its
    amount: the balance moves once."""
    p = Payment()
    await ledger_ops.open_account(parts.ledger, PostgresAccountNames(parts.pool), p.merchant, "USD")
    auth = p.stripe("payment_intent.amount_capturable_updated", {
        "id": p.pi, "amount_capturable": 5000, "currency": "usd",
        "metadata": {"merchant_id": p.merchant}})  # fmt: skip
    assert await settle_batch(parts.settler, [(auth, 1)]) == [SettleOutcome.SETTLED]
    table = gateway("ledger", "balances", "--merchant", p.merchant, *cfg)
    assert table.returncode == 0, table.stderr
    header, row = table.stdout.splitlines()
    assert header.split()[-2:] == ["balance", "reserved"]
    assert row.split()[-2:] == ["0.00", "50.00"]  # as a person reads USD
    assert await settle_batch(parts.settler, [(p.capture(3000), 1)]) == [SettleOutcome.SETTLED]
    [account] = json.loads(gateway("ledger", "balances", "--merchant", p.merchant, "--json",
                                   *cfg).stdout)  # fmt: skip
    assert (account["balance"], account["reserved"]) == (3000, 0)
    statement = gateway("ledger", "statement", "--merchant", p.merchant, "--json", *cfg)
    rows = [json.loads(line) for line in statement.stdout.splitlines()]
    told = [(r["kind"], r["posted_minor"]) for r in rows]
    assert told == [("authorisation", 0), ("capture", 3000)]
    assert rows[-1]["balance_minor"] == 3000
