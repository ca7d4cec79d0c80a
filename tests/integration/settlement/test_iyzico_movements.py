"""iyzico's payments as money on a real ledger: each payment's webhook and the answer
`POST /payment/detail` gives for it (built by the stand-in, `tests.support.iyzico_api`,
signed there, and parsed as the confirm stage parses it) read by the real provider module
(`core.providers.iyzico`: `confirmer` checks the answer's signature and names the
events), shaped as the confirm stage records them, then settled one at a time in every
order of arrival (the machinery of `test_money_movements`), on PostgreSQL and on
TigerBeetle (when `TIGERBEETLE_ADDRESS` names a server).

Balances are per currency: TRY stays TRY, and nothing asks the currency service (it is
stopped). Refunds are an internal service's `payment.refunded`: iyzico notifies none.
"""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest

from gateway import settings as settings_mod
from gateway.core.confirm.events import Shaping, confirmed_events
from gateway.core.events.model import Event
from gateway.core.ledger.port import verify_totals
from gateway.core.providers.iyzico.answer import confirmer
from gateway.core.providers.iyzico.webhooks import IYZICO
from gateway.settlement.parts import SettlementParts
from gateway.settlement.settler import SettleOutcome
from gateway.wiring.settlement import settlement_parts
from tests.integration.settlement.test_money_movements import orders, settle_in_order
from tests.support.gateway import config
from tests.support.iyzico_api import SECRET_KEY, IyzicoApi
from tests.support.settlement import (
    ledger_section,
    merchant_balance,
    open_merchant,
    settlement_sections,
)
from tests.support.stub import Stub

S = SettleOutcome
#: How the confirm stage shapes the `iyzico` provider's events (its default order key).
SHAPING = Shaping("iyzico", order_rules=IYZICO.order_keys, ordered=lambda _: True)
READ = confirmer((SECRET_KEY,))


@functools.cache
def iyzico_payments() -> IyzicoApi:
    """iyzico's payments, answered in the stand-in's shapes (never served here: only its
    answers are used). One for the module: each `Payment` has ids of its own."""
    return IyzicoApi()


@pytest.fixture(params=["postgres", "tigerbeetle"])
async def parts(
    request: pytest.FixtureRequest, database_url: str, nats_url: str, stub: Stub, redis_url: str
) -> AsyncIterator[SettlementParts]:
    """Settlement parts with an `iyzico` provider and per-currency balances (the
    currency service stopped: nothing may ask it)."""
    sections = settlement_sections(stub.url, redis_url, ledger=ledger_section(request.param),
                                   settlement={"balances": "per_currency"})  # fmt: skip
    doc = config(database_url, nats_url, **sections)
    doc["providers"]["iyzico"] = {"scheme": "iyzico", "secrets": [SECRET_KEY]}
    await stub.control(mode="fail")
    async with settlement_parts(settings_mod.parse(doc, env={})) as p:
        await p.settler.open_clearing_accounts()
        yield p


class Payment:
    """One iyzico payment's events, under ids of its own (TigerBeetle keeps every run's):
    iyzico's ids are digits, so are these."""

    def __init__(self) -> None:
        digits = str(uuid.uuid4().int)
        # No leading zero: the webhook carries both ids as JSON numbers.
        self.payment_id = "1" + digits[:11]
        self.merchant = "9" + digits[11:20]  # iyzico's merchantId of the account
        self.tag = digits[20:28]
        self._n = 0

    def told(self, paid_price: str, price: str | None = None, phase: str = "AUTH") -> list[Event]:
        """The payment moved to `phase` (paid `paid_price`), its webhook, the answer a
        fetch of it gets, and the events the confirm stage records from them."""
        iyzico_payments().pay(self.payment_id, paid_price, price, phase=phase)
        webhook = {"paymentConversationId": f"conv-{self.tag}", "merchantId": int(self.merchant),
                   "paymentId": int(self.payment_id), "status": "SUCCESS",
                   "iyziReferenceCode": str(uuid.uuid4()), "iyziEventType": "API_AUTH",
                   "iyziEventTime": 1_796_000_000_000,
                   "iyziPaymentId": int(self.payment_id)}  # fmt: skip
        sent = iyzico_payments().answer_body(self.payment_id, f"conv-{self.tag}")
        answer: Any = json.loads(sent)  # as the confirm stage reads it: prices as floats
        return confirmed_events(SHAPING, READ(webhook, answer), datetime.now(UTC))

    def paid(self, paid_price: str = "150.50", price: str | None = None) -> list[Event]:
        return self.told(paid_price, price)

    def pre_authorised(self, paid_price: str = "150.50") -> list[Event]:
        return self.told(paid_price, phase="PRE_AUTH")

    def post_authorised(self, paid_price: str = "150.50") -> list[Event]:
        return self.told(paid_price, phase="POST_AUTH")

    def refunded(self, amount_minor: int, refund: str = "r1") -> Event:
        """A refund told by the merchant's service: iyzico sends none."""
        self._n += 1
        data = {"settlement_id": self.payment_id, "amount_minor": amount_minor,
                "currency": "TRY", "refund_id": f"{self.payment_id}_{refund}"}  # fmt: skip
        body = orjson.dumps({"type": "payment.refunded", "data": data})
        return Event("service:billing", f"e_{self.tag}_{self._n}", "payment.refunded",
                     "events.billing.payment.refunded", {}, body, datetime.now(UTC))  # fmt: skip


Scenario = Callable[[Payment], list[Event]]

# name: (the events, the merchant's TRY balance in kuruş)
SCENARIOS: dict[str, tuple[Scenario, int]] = {
    "a sale": (lambda p: p.paid(), 15_050),
    "a sale told again (iyzico's retries, each fetched)":
        (lambda p: [*p.paid(), *p.paid(), *p.paid()], 15_050),
    "instalments: the card charged above the basket": (lambda p: p.paid("110.00", "100.00"),
                                                       11_000),
    "a pre-auth not captured yet: reserved, not in the balance": (lambda p: p.pre_authorised(), 0),
    "a pre-auth, then its post-auth": (lambda p: [*p.pre_authorised(), *p.post_authorised()],
                                       15_050),
    "a sale, then two refunds by an internal service": (
        lambda p: [*p.paid(), p.refunded(5_000, "r1"), p.refunded(2_550, "r2")], 7_500),
    "a post-auth, then a refund of part of it": (
        lambda p: [*p.pre_authorised(), *p.post_authorised(), p.refunded(10_050)], 5_000),
    "a sale refunded whole": (lambda p: [*p.paid(), p.refunded(15_050)], 0),
}  # fmt: skip


@pytest.mark.parametrize(("scenario", "balance"), SCENARIOS.values(), ids=SCENARIOS)
async def test_every_arrival_order_ends_in_the_same_balance(
    parts: SettlementParts, scenario: Scenario, balance: int
) -> None:
    size = len(scenario(Payment()))
    for order in orders(size, seed=size):
        p = Payment()
        await open_merchant(parts, p.merchant, "TRY")
        events = scenario(p)
        ended = await settle_in_order(parts, [events[i] for i in order])
        assert all(isinstance(e, SettleOutcome) for e in ended), (order, ended)
        assert await merchant_balance(parts, p.merchant, "TRY") == balance, order
        assert await merchant_balance(parts, p.merchant, "USD") is None, order
    verify_totals(await parts.ledger.check())


async def test_each_event_ends_as_iyzico_means_it(parts: SettlementParts) -> None:
    """A sale settles once, each later answer about it is a duplicate; a post-auth's
    answer names the authorisation again (a duplicate) and the capture."""
    p = Payment()
    await open_merchant(parts, p.merchant, "TRY")
    told = [*p.paid(), *p.paid()]
    assert [e.event_id for e in told] == [f"{p.payment_id}:paid"] * 2
    assert await settle_in_order(parts, told) == [S.SETTLED, S.DUPLICATE]

    q = Payment()
    await open_merchant(parts, q.merchant, "TRY")
    told = [*q.pre_authorised(), *q.post_authorised()]
    assert [e.event_type for e in told] == ["payment.authorized", "payment.authorized",
                                            "payment.paid"]  # fmt: skip
    assert await settle_in_order(parts, told) == [S.SETTLED, S.DUPLICATE, S.SETTLED]
    assert await merchant_balance(parts, q.merchant, "TRY") == 15_050
