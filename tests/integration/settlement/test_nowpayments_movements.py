"""NOWPayments' USDT payments on a real ledger, through the real provider module: a
payment finished then refunded (its earlier statuses and a partial payment among them,
moving nothing) in every order of arrival, converted to the settlement currency at the
currency stub's USDT/USD rate and back at the payment's own rate after the rate moved;
the same held as USDT in the per-currency mode; and a coin the ledger holds no asset of,
or a USDT amount finer than its six decimals, parked with the field at fault.

The arrival orders and the one-at-a-time settling are `test_money_movements`'s.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import orjson
import pytest

from gateway import settings as settings_mod
from gateway.core.events.model import Event
from gateway.core.ledger.port import verify_totals
from gateway.currency_stub import DEFAULT_RATES
from gateway.errors import FieldTypeInvalid
from gateway.settlement.items import SettleOutcome
from gateway.settlement.parts import SettlementParts
from gateway.wiring.settlement import settlement_parts
from tests.integration.settlement.test_money_movements import orders, settle_in_order
from tests.support.gateway import config
from tests.support.settlement import (
    ledger_section,
    merchant_balance,
    open_merchant,
    settlement_sections,
)
from tests.support.stub import Stub

S = SettleOutcome
#: At the currency stub's USDT/USD 0.9998, USDT 100.25 is USD 100.22995: 100.23.
PAID, PAID_USD = "100.25", 10_023


async def nowpayments_parts(
    database_url: str, nats_url: str, sections: dict[str, dict[str, object]]
) -> AsyncIterator[SettlementParts]:
    """Settlement parts with a `nowpayments` provider whose merchant is the payment's
    `order_id` (NOWPayments names none; a platform puts it where it chooses)."""
    doc = config(database_url, nats_url, **sections)
    doc["providers"]["nowpayments"] = {"scheme": "nowpayments", "secrets": ["np_ipn_secret"],
                                       "merchant": ["/order_id"]}  # fmt: skip
    async with settlement_parts(settings_mod.parse(doc, env={})) as p:
        await p.settler.open_clearing_accounts()
        yield p


@pytest.fixture(params=["postgres", "tigerbeetle"])
async def parts(
    request: pytest.FixtureRequest, database_url: str, nats_url: str, stub: Stub, redis_url: str
) -> AsyncIterator[SettlementParts]:
    """Balances converted into USD at the currency service's rate: the stub quotes
    USDT/USD as `gateway currency-stub` does (the tests' stub starts with two pairs)."""
    sections = settlement_sections(stub.url, redis_url, ledger=ledger_section(request.param))
    await stub.control(rates={"USDT/USD": str(DEFAULT_RATES["USDT/USD"])})
    async for p in nowpayments_parts(database_url, nats_url, sections):
        yield p


@pytest.fixture(params=["postgres", "tigerbeetle"])
async def per_currency(
    request: pytest.FixtureRequest, database_url: str, nats_url: str, stub: Stub, redis_url: str
) -> AsyncIterator[SettlementParts]:
    """`[settlement] balances = "per_currency"`, the currency service stopped: nothing may
    ask it."""
    sections = settlement_sections(stub.url, redis_url, ledger=ledger_section(request.param),
                                   settlement={"balances": "per_currency"})  # fmt: skip
    await stub.control(mode="fail")
    async for p in nowpayments_parts(database_url, nats_url, sections):
        yield p


class Payment:
    """One NOWPayments payment's IPNs, under a payment id and merchant of its own
    (TigerBeetle keeps every run's)."""

    def __init__(self) -> None:
        self.payment_id = random.randrange(10**9, 10**12)
        self.merchant = f"m_np_{self.payment_id}"

    def ipn(self, status: str, paid: str = PAID, coin: str = "usdttrc20") -> Event:
        """The IPN of `status`, as NOWPayments writes it (its numbers in JavaScript's form)."""
        body = (
            f'{{"payment_id":{self.payment_id},"payment_status":"{status}",'
            f'"pay_address":"TNDFkiSmBQorNFacb3735q8MnT29sn8BLn","price_amount":100,'
            f'"price_currency":"usd","pay_amount":{PAID},"actually_paid":{paid},'
            f'"pay_currency":"{coin}","order_id":"{self.merchant}","outcome_amount":99.75,'
            f'"outcome_currency":"{coin}"}}'
        ).encode()
        orjson.loads(body)  # well-formed
        event_id = f"{self.payment_id}:{status}"
        return Event("nowpayments", event_id, status, f"webhooks.nowpayments.{status}", {},
                     body, datetime.now(UTC))  # fmt: skip

    def lifecycle(self) -> list[Event]:
        """Waiting to finished, then refunded; `partially_paid` on the way (the rest came)."""
        return [self.ipn("waiting", "0"), self.ipn("confirming", "50"),
                self.ipn("partially_paid", "50"), self.ipn("confirmed"), self.ipn("sending"),
                self.ipn("finished"), self.ipn("refunded")]  # fmt: skip


#: How each status of `Payment.lifecycle` ends: only `finished` and `refunded` move money.
ENDED = {"waiting": S.IGNORED, "confirming": S.IGNORED, "partially_paid": S.IGNORED,
         "confirmed": S.IGNORED, "sending": S.IGNORED, "finished": S.SETTLED,
         "refunded": S.SETTLED}  # fmt: skip


async def ended_by_status(
    parts: SettlementParts, p: Payment, order: list[int]
) -> dict[str, object]:
    """`p`'s lifecycle settled in `order`: how each status ended."""
    given = [p.lifecycle()[i] for i in order]
    ended = await settle_in_order(parts, given)
    return {str(e.event_type): outcome for e, outcome in zip(given, ended, strict=True)}


async def test_finished_then_refunded_in_every_order_converted_at_the_payments_rate(
    parts: SettlementParts,
) -> None:
    """USDT 100.25 credits USD 100.23 at USDT/USD 0.9998; its refund takes the same back,
    whichever comes first; the other statuses move nothing."""
    for order in orders(7, seed=7):
        p = Payment()
        await open_merchant(parts, p.merchant)
        assert await ended_by_status(parts, p, order) == ENDED, order
        assert await merchant_balance(parts, p.merchant) == 0, order
    p = Payment()
    await open_merchant(parts, p.merchant)
    assert await settle_in_order(parts, [p.ipn("finished")]) == [S.SETTLED]
    assert await merchant_balance(parts, p.merchant) == PAID_USD
    verify_totals(await parts.ledger.check())


async def test_a_refund_after_the_rate_moved_takes_back_exactly_what_was_credited(
    parts: SettlementParts, stub: Stub
) -> None:
    p = Payment()
    await open_merchant(parts, p.merchant)
    assert await settle_in_order(parts, [p.ipn("finished")]) == [S.SETTLED]
    assert await merchant_balance(parts, p.merchant) == PAID_USD
    await stub.control(rates={"USDT/USD": "1.07"})
    async with settlement_parts(parts.settings) as later:  # one running remembers a rate
        assert await settle_in_order(later, [p.ipn("refunded")]) == [S.SETTLED]
    assert await merchant_balance(parts, p.merchant) == 0
    verify_totals(await parts.ledger.check())


async def test_per_currency_balances_hold_usdt_as_usdt(per_currency: SettlementParts) -> None:
    """USDT 100.25 is 100,250,000 of USDT's millionths in the merchant's USDT account,
    nothing converted; the refund takes them back, in any order."""
    parts = per_currency
    for order in orders(7, seed=7):
        p = Payment()
        await open_merchant(parts, p.merchant, "USDT")
        assert await ended_by_status(parts, p, order) == ENDED, order
        assert await merchant_balance(parts, p.merchant, "USDT") == 0, order
    p = Payment()
    await open_merchant(parts, p.merchant, "USDT")
    assert await settle_in_order(parts, [p.ipn("finished")]) == [S.SETTLED]
    assert await merchant_balance(parts, p.merchant, "USDT") == 100_250_000
    assert await merchant_balance(parts, p.merchant, "USD") is None
    verify_totals(await parts.ledger.check())


@pytest.mark.parametrize(
    ("case", "paid", "coin"),
    [
        ("bitcoin: the ledger holds no such asset", "0.00029", "btc"),
        ("a seventh decimal of USDT, never rounded", "100.2500001", "usdttrc20"),
    ],
)
async def test_what_cannot_settle_exactly_is_parked_and_moves_nothing(
    parts: SettlementParts, case: str, paid: str, coin: str
) -> None:
    p = Payment()
    await open_merchant(parts, p.merchant)
    assert await settle_in_order(parts, [p.ipn("finished", paid, coin)]) == [FieldTypeInvalid]
    assert await merchant_balance(parts, p.merchant) == 0
