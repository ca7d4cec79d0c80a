"""Zarinpal's verified payments as money on a real ledger: each callback read by the real
provider module (`core.providers.zarinpal`: its signed order, its document), verified by
an answer in Zarinpal's shape (`confirmed`, codes 100 and 101), shaped as the confirm
stage records it, then settled one at a time in every order of arrival (the machinery
of `test_money_movements`), on PostgreSQL and on TigerBeetle (when
`TIGERBEETLE_ADDRESS` names a server).

The ledger's currency is USD and rials are quoted at `RATE` by a currency stub of this
module's own, so every converted balance is exact; tomans settle as ten rials each.
With `balances = "per_currency"` the rials stay rials.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from decimal import Decimal
from urllib.parse import urlencode

import orjson
import pytest

from gateway import settings as settings_mod
from gateway.core.confirm.events import Shaping, confirmed_events
from gateway.core.events.model import Event
from gateway.core.ledger.port import verify_totals
from gateway.core.providers.zarinpal import ZARINPAL, confirmed, document, sign_callback
from gateway.core.signatures.base import SchemeParams
from gateway.settlement.parts import SettlementParts
from gateway.settlement.settler import SettleOutcome
from gateway.wiring.settlement import settlement_parts
from tests.integration.settlement.test_money_movements import orders, settle_in_order
from tests.support.gateway import config
from tests.support.settlement import (
    ledger_section,
    merchant_balance,
    open_merchant,
    settlement_sections,
)
from tests.support.stub import running_stub

SECRET = "zp-money-secret"
#: USD for one rial at the stub: 1,000,000 rials are one dollar.
RATE = Decimal("0.000001")
PARAMS = SchemeParams(secrets=(SECRET,))
SHAPING = Shaping("zarinpal", order_rules=ZARINPAL.order_keys, ordered=lambda _: True)


async def _parts(
    ledger: str, database_url: str, nats_url: str, redis_url: str, **settlement: str
) -> AsyncIterator[SettlementParts]:
    async with running_stub({"IRR/USD": str(RATE)}) as stub:
        sections = settlement_sections(stub.url, redis_url, ledger=ledger_section(ledger),
                                       settlement=settlement)  # fmt: skip
        doc = config(database_url, nats_url, **sections)
        doc["providers"]["zarinpal"] = {
            "scheme": "zarinpal", "secrets": [SECRET], "return_url": "https://s.example/",
            "api_key_env": "ZP_MERCHANT", "api_url": "http://127.0.0.1:9",
            "insecure_api_url": True, "api_hosts": ["127.0.0.1"],
        }  # fmt: skip
        settings = settings_mod.parse(doc, env={"ZP_MERCHANT": "m-uuid"})
        async with settlement_parts(settings) as p:
            await p.settler.open_clearing_accounts()
            yield p


@pytest.fixture(params=["postgres", "tigerbeetle"])
async def zarinpal_parts(
    request: pytest.FixtureRequest, database_url: str, nats_url: str, redis_url: str
) -> AsyncIterator[SettlementParts]:
    async for p in _parts(request.param, database_url, nats_url, redis_url):
        yield p


@pytest.fixture(params=["postgres", "tigerbeetle"])
async def per_currency(
    request: pytest.FixtureRequest, database_url: str, nats_url: str, redis_url: str
) -> AsyncIterator[SettlementParts]:
    async for p in _parts(request.param, database_url, nats_url, redis_url,
                          balances="per_currency"):  # fmt: skip
        yield p


class Payment:
    """One Zarinpal payment's verified events, under ids of its own."""

    def __init__(self) -> None:
        self.tag = uuid.uuid4().hex[:12]
        self.authority = f"A{self.tag}{'0' * 23}"
        self.merchant = f"m_zp_{self.tag}"
        self._n = 0

    def verified(self, amount: int, currency: str = "IRR", code: int = 100) -> Event:
        """The callback read as the gateway reads it, and verify's answer with `code`,
        shaped as the confirm stage records the payment it confirms."""
        order = {"order": f"o_{self.tag}", "amount": str(amount), "currency": currency,
                 "merchant": self.merchant}  # fmt: skip
        query = urlencode({**order, "Authority": self.authority, "Status": "OK"}).encode()
        body = sign_callback(PARAMS, query)
        ZARINPAL.scheme.verify(PARAMS, {}, body, 0.0)
        answer = {"data": {"code": code, "message": "Verified", "ref_id": 201}, "errors": []}
        items = confirmed(document(body), answer)
        (event,) = confirmed_events(SHAPING, items, datetime.now(UTC))
        return event

    def refunded(self, amount_minor: int, refund: str = "r1") -> Event:
        """A refund told by an internal service: Zarinpal sends none."""
        self._n += 1
        data = {"settlement_id": self.authority, "amount_minor": amount_minor,
                "currency": "IRR", "refund_id": f"{self.authority}_{refund}"}  # fmt: skip
        body = orjson.dumps({"type": "payment.refunded", "data": data})
        return Event("service:billing", f"e_{self.tag}_{self._n}", "payment.refunded",
                     "events.billing.payment.refunded", {}, body, datetime.now(UTC))  # fmt: skip


Scenario = Callable[[Payment], list[Event]]

# name: (the events, the merchant's balance in USD cents)
SCENARIOS: dict[str, tuple[Scenario, int]] = {
    "a payment in rials": (lambda p: [p.verified(10_000_000)], 1_000),
    "a payment in tomans is ten times as many rials": (
        lambda p: [p.verified(1_000_000, "IRT")], 1_000),
    "verified, then verified before (101): one capture": (
        lambda p: [p.verified(10_000_000), p.verified(10_000_000, code=101)], 1_000),
    "a payment and part of it refunded by an internal service": (
        lambda p: [p.verified(10_000_000), p.refunded(250_000_000)], 750),
}  # fmt: skip


@pytest.mark.parametrize(("scenario", "balance"), SCENARIOS.values(), ids=SCENARIOS)
async def test_every_arrival_order_ends_in_the_same_balance(
    zarinpal_parts: SettlementParts, scenario: Scenario, balance: int
) -> None:
    parts = zarinpal_parts
    size = len(scenario(Payment()))
    for order in orders(size, seed=size):
        p = Payment()
        await open_merchant(parts, p.merchant)
        events = scenario(p)
        ended = await settle_in_order(parts, [events[i] for i in order])
        assert all(isinstance(e, SettleOutcome) for e in ended), (order, ended)
        assert await merchant_balance(parts, p.merchant) == balance, order
    verify_totals(await parts.ledger.check())


async def test_rials_and_tomans_stay_rials_per_currency(per_currency: SettlementParts) -> None:
    """Per currency, one merchant's rial and toman payments and a refund land in its IRR
    account, in any order."""
    for order in orders(3, seed=3):
        first, second = Payment(), Payment()
        second.merchant = first.merchant
        await open_merchant(per_currency, first.merchant, "IRR")
        events = [first.verified(1_500_000), second.verified(25_000, "IRT"),
                  first.refunded(50_000_000)]  # fmt: skip
        ended = await settle_in_order(per_currency, [events[i] for i in order])
        assert all(isinstance(e, SettleOutcome) for e in ended), (order, ended)
        rials = 1_500_000 + 25_000 * 10 - 500_000
        assert await merchant_balance(per_currency, first.merchant, "IRR") == rials * 100
    verify_totals(await per_currency.ledger.check())
