"""Authorisations on a real ledger: reserved (a pending transfer), posted by the
capture (a partial capture releases the rest), released by a void; Stripe's
`payment_intent.amount_capturable_updated`, `payment_intent.succeeded`,
`charge.captured` and `payment_intent.canceled`, and internal `payment.authorized`,
`payment.captured` and `payment.voided`. Each scenario runs in shuffled orders of
arrival, on PostgreSQL and on TigerBeetle (when `TIGERBEETLE_ADDRESS` names a server),
and ends in the same balance and the same reservation.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from gateway.core.events.model import Event
from gateway.core.ledger.ids import merchant_account_id
from gateway.core.ledger.port import verify_totals
from gateway.settlement.batch import settle_batch
from gateway.settlement.parts import SettlementParts
from gateway.settlement.settler import SettleOutcome
from tests.integration.settlement.test_money_movements import (
    Payment,
    orders,
    parts,
    settle_in_order,
)
from tests.support.settlement import merchant_balance, open_merchant
from tests.support.stub import Stub

__all__ = ["parts"]  # the fixture, on both ledgers
S = SettleOutcome


def authorised(p: Payment, amount: int, currency: str = "usd") -> Event:
    return p.stripe("payment_intent.amount_capturable_updated", {
        "id": p.pi, "amount": amount, "amount_capturable": amount, "currency": currency,
        "capture_method": "manual", "metadata": {"merchant_id": p.merchant}})  # fmt: skip


def canceled(p: Payment, amount: int) -> Event:
    return p.stripe("payment_intent.canceled", {
        "id": p.pi, "amount": amount, "amount_capturable": 0, "currency": "usd",
        "status": "canceled", "metadata": {"merchant_id": p.merchant}})  # fmt: skip


def charge_captured(p: Payment, amount: int) -> Event:
    return p.stripe("charge.captured", {
        "id": f"ch_{p.tag}", "payment_intent": p.pi, "amount": amount + 1,
        "amount_captured": amount, "currency": "usd", "captured": True,
        "metadata": {"merchant_id": p.merchant}})  # fmt: skip


def internal(p: Payment, event_type: str, amount: int) -> Event:
    event = p.internal(event_type, amount)
    if event_type == "payment.authorized":  # names its merchant, as a capture does
        import orjson

        doc = orjson.loads(event.body)
        doc["data"]["merchant_id"] = p.merchant
        event = event.__class__(**{**event.__dict__, "body": orjson.dumps(doc)})
    return event


async def reserved(parts: SettlementParts, merchant: str, currency: str = "USD") -> int:
    balance = await parts.ledger.balance(merchant_account_id(merchant, currency))
    assert balance is not None
    return balance.credits_pending


Scenario = Callable[[Payment], list[Event]]

#: Each scenario's events, the merchant's balance and what stays reserved at the end.
SCENARIOS: dict[str, tuple[Scenario, int, int]] = {
    "an authorisation then a partial capture": (
        lambda p: [authorised(p, 5000), p.capture(3000)], 3000, 0),
    "an authorisation, captured whole, told by the intent and by the charge": (
        lambda p: [authorised(p, 5000), p.capture(5000), charge_captured(p, 5000)], 5000, 0),
    "an authorisation then its void": (
        lambda p: [authorised(p, 5000), canceled(p, 5000)], 0, 0),
    "an authorisation alone stays reserved": (
        lambda p: [authorised(p, 5000)], 0, 5000),
    "a capture over the authorised amount": (
        lambda p: [authorised(p, 5000), p.capture(5500)], 5500, 0),
    "a partial capture, then refunds of it": (
        lambda p: [authorised(p, 5000), p.capture(4000), p.charge_refunded(1000),
                   p.charge_refunded(1500)], 2500, 0),
    "a void of an intent never authorised": (
        lambda p: [canceled(p, 5000)], 0, 0),
    "internal: authorised, captured in part": (
        lambda p: [internal(p, "payment.authorized", 8000),
                   internal(p, "payment.captured", 6000)], 6000, 0),
    "internal: authorised, voided": (
        lambda p: [internal(p, "payment.authorized", 8000),
                   internal(p, "payment.voided", 8000)], 0, 0),
}  # fmt: skip


@pytest.mark.parametrize(("scenario", "balance", "left"), SCENARIOS.values(), ids=SCENARIOS)
async def test_every_arrival_order_ends_in_the_same_balance_and_reservation(
    parts: SettlementParts, scenario: Scenario, balance: int, left: int
) -> None:
    n = len(scenario(Payment()))
    for order in orders(n, seed=n) if n > 1 else [[0]]:
        payment = Payment()
        await open_merchant(parts, payment.merchant)
        events = scenario(payment)
        ended = await settle_in_order(parts, [events[i] for i in order])
        assert all(isinstance(e, SettleOutcome) for e in ended), (order, ended)
        assert await merchant_balance(parts, payment.merchant) == balance, order
        # In natural order the authorisation reserves first; in another, what arrives
        # after the capture or the void reserves nothing. Either way nothing stays
        # reserved for a payment captured or voided.
        assert await reserved(parts, payment.merchant) == left, order
        again = await settle_in_order(parts, events)  # redelivered: nothing moves
        assert set(again) <= {S.DUPLICATE}, again
        assert await merchant_balance(parts, payment.merchant) == balance
    verify_totals(await parts.ledger.check())


async def test_a_converted_authorisation_is_captured_at_its_own_rate(
    parts: SettlementParts, stub: Stub
) -> None:
    """EUR 100.00 authorised at 1.08 reserves USD 108.00; the rate moves to 1.20; the
    capture of EUR 50.00 posts USD 54.00 (the authorisation's rate) and releases the
    rest; its full refund brings the merchant back to zero exactly."""
    p = Payment()
    await open_merchant(parts, p.merchant)
    assert await settle_in_order(parts, [authorised(p, 10_000, "eur")]) == [S.SETTLED]
    assert await reserved(parts, p.merchant) == 10_800
    await stub.control(rates={"EUR/USD": "1.20"})
    assert await settle_in_order(parts, [p.capture(5_000, "eur")]) == [S.SETTLED]
    assert (await merchant_balance(parts, p.merchant), await reserved(parts, p.merchant)) == (
        5_400,
        0,
    )
    assert await settle_in_order(parts, [p.charge_refunded(5_000, "eur")]) == [S.SETTLED]
    assert await merchant_balance(parts, p.merchant) == 0


async def test_an_authorisation_and_its_capture_in_one_batch(parts: SettlementParts) -> None:
    """Fetched together, the capture settles alone after the authorisation and posts it."""
    p = Payment()
    await open_merchant(parts, p.merchant)
    batch = [authorised(p, 5000), p.capture(2000), canceled(p, 5000)]
    results = await settle_batch(parts.settler, [(e, 1) for e in batch])
    assert results == [S.SETTLED, S.SETTLED, S.DUPLICATE], results
    assert (await merchant_balance(parts, p.merchant), await reserved(parts, p.merchant)) == (
        2000,
        0,
    )
