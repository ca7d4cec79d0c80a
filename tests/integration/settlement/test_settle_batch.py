"""Settling a fetched batch together: each event gets the outcome (or the error) it would
get alone, money moves once, and a failing batch step fails or isolates its events."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest

from gateway import settings as settings_mod
from gateway.core.events.model import Event
from gateway.core.ledger.port import LedgerTransfer, TransferResult, verify_totals
from gateway.errors import (
    InvalidAmount,
    LedgerIdCollision,
    LedgerUnavailable,
    PaymentNotSettled,
    UnknownMerchant,
)
from gateway.settlement.batch import Result, settle_batch
from gateway.settlement.parts import SettlementParts
from gateway.settlement.settler import SettleOutcome
from gateway.wiring.settlement import settlement_parts
from tests.support.gateway import config
from tests.support.settlement import fetch, merchant_balance, open_merchant, settlement_sections
from tests.support.stub import Stub

S = SettleOutcome


@pytest.fixture
async def parts(
    database_url: str, nats_url: str, stub: Stub, redis_url: str
) -> AsyncIterator[SettlementParts]:
    doc = config(database_url, nats_url, **settlement_sections(stub.url, redis_url))
    async with settlement_parts(settings_mod.parse(doc, env={})) as p:
        await p.settler.open_clearing_accounts()
        await open_merchant(p, "m_1")
        yield p


def stripe(event_id: str, event_type: str, obj: dict[str, Any]) -> Event:
    body = orjson.dumps({"id": event_id, "type": event_type, "data": {"object": obj}})
    subject = f"webhooks.stripe.{event_type}"
    return Event("stripe", event_id, event_type, subject, {}, body, datetime.now(UTC))


def capture(
    event_id: str, pi: str, amount: int, currency: str = "usd", merchant: str = "m_1"
) -> Event:
    obj = {"id": pi, "amount_received": amount, "currency": currency,
           "metadata": {"merchant_id": merchant}}  # fmt: skip
    return stripe(event_id, "payment_intent.succeeded", obj)


def refund(event_id: str, pi: str, refund_id: str, amount: int) -> Event:
    obj = {"id": refund_id, "object": "refund", "payment_intent": pi, "amount": amount,
           "currency": "usd", "status": "succeeded"}  # fmt: skip
    return stripe(event_id, "refund.created", obj)


async def run(parts: SettlementParts, events: Sequence[Event], attempt: int = 1) -> list[Result]:
    return await settle_batch(parts.settler, [(e, attempt) for e in events])


def kinds(results: Sequence[Result]) -> list[object]:
    return [r if isinstance(r, SettleOutcome) else type(r) for r in results]


async def transfers(dsn: str) -> int:
    return int((await fetch(dsn, "SELECT count(*) AS n FROM ledger_transfers"))[0]["n"])


async def test_a_mixed_batch_gets_each_events_own_outcome(
    parts: SettlementParts, database_url: str
) -> None:
    batch = [
        capture("e1", "pi_a", 1000),
        capture("e2", "pi_a", 1000),  # the same payment again, in the same batch
        refund("e3", "pi_a", "re_1", 300),  # its payment settles earlier in this batch
        capture("e4", "pi_b", 500, merchant="m_nobody"),
        capture("e5", "pi_c", 0),
        stripe("e6", "customer.created", {"id": "cus_1"}),
        capture("e7", "pi_a", 999),  # says something else about pi_a
        capture("e8", "pi_d", 1000, currency="eur"),
        refund("e9", "pi_never", "re_2", 10),  # its payment never arrived
    ]
    results = await run(parts, batch)
    assert kinds(results) == [
        S.SETTLED, S.DUPLICATE, S.SETTLED, UnknownMerchant, InvalidAmount,
        S.IGNORED, LedgerIdCollision, S.SETTLED, PaymentNotSettled,
    ]  # fmt: skip
    assert await merchant_balance(parts, "m_1") == 1000 - 300 + 1080
    assert await transfers(database_url) == 3
    verify_totals(await parts.ledger.check())

    # Delivered again (a worker died before acking): nothing moves twice.
    again = await run(parts, [batch[0], batch[2], batch[7]], attempt=2)
    assert kinds(again) == [S.DUPLICATE, S.DUPLICATE, S.DUPLICATE]
    assert await transfers(database_url) == 3


async def test_refund_of_a_payment_settled_before_takes_the_batch_path(
    parts: SettlementParts, database_url: str
) -> None:
    assert kinds(await run(parts, [capture("c1", "pi_r", 800)])) == [S.SETTLED]
    results = await run(parts, [refund("r1", "pi_r", "re_r1", 200), capture("c2", "pi_s", 50)])
    assert kinds(results) == [S.SETTLED, S.SETTLED]
    assert await merchant_balance(parts, "m_1") == 800 - 200 + 50
    rows = await fetch(database_url, "SELECT attempts, state FROM settlements ORDER BY id")
    assert [(r["attempts"], r["state"]) for r in rows] == [(1, "settled")] * 3


async def test_ledger_outage_fails_every_event_of_the_batch_with_its_amount_fixed(
    parts: SettlementParts, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def down(transfers: Sequence[LedgerTransfer]) -> list[TransferResult]:
        raise LedgerUnavailable("ledger down")

    monkeypatch.setattr(parts.ledger, "post", down)
    results = await run(parts, [capture("o1", "pi_o1", 100, "eur"), capture("o2", "pi_o2", 200)])
    assert kinds(results) == [LedgerUnavailable, LedgerUnavailable]
    rows = await fetch(
        database_url, "SELECT ledger_amount_minor, state FROM settlements ORDER BY id"
    )
    fixed = [(r["ledger_amount_minor"], r["state"]) for r in rows]
    assert fixed == [(108, "pending"), (200, "pending")]
    monkeypatch.undo()
    # The retry posts the amounts fixed by the first attempt.
    results = await run(parts, [capture("o1", "pi_o1", 100, "eur"), capture("o2", "pi_o2", 200)], 2)
    assert kinds(results) == [S.SETTLED, S.SETTLED]
    assert await merchant_balance(parts, "m_1") == 308


async def test_an_unexpected_batch_failure_settles_its_events_one_by_one(
    parts: SettlementParts, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_post = parts.ledger.post

    async def fails_in_bulk(transfers: Sequence[LedgerTransfer]) -> list[TransferResult]:
        if len(transfers) > 1:
            raise RuntimeError("a bug in the batch")
        return await real_post(transfers)

    monkeypatch.setattr(parts.ledger, "post", fails_in_bulk)
    results = await run(parts, [capture("u1", "pi_u1", 100), capture("u2", "pi_u2", 200)])
    assert kinds(results) == [S.SETTLED, S.SETTLED]
    assert await merchant_balance(parts, "m_1") == 300
