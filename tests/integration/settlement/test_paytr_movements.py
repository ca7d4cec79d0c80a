"""PayTR's callbacks as money on a real ledger: each callback signed and shaped by the
real provider module (`core.providers.paytr`: its hash, its form, its id
`merchant_oid:status`), then settled one at a time in every order of arrival (the
machinery of `test_money_movements`), on PostgreSQL and on TigerBeetle (when
`TIGERBEETLE_ADDRESS` names a server). The ledger's currency is USD; TRY is quoted at
`RATE` by a currency stub of this module's own (the shared fixture quotes EUR and GBP
only), so every converted balance below is exact.
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
from gateway.core.events.model import Event
from gateway.core.events.shaper import webhook_shaper
from gateway.core.ledger.port import verify_totals
from gateway.core.providers.paytr import PAYTR
from gateway.core.signatures.base import SchemeParams
from gateway.errors import MissingField
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

SECRET = "moneyKey5Tq2Lm9P:moneySalt8Hd5Ry3"
#: USD for one TRY at the stub: 3,456.00 TRY is 103.68 USD, to the cent.
RATE = Decimal("0.03")
S = SettleOutcome
#: A reason as PayTR writes it, in Turkish ("payment not approved").
REASON = "Ödeme onaylanmadı"  # noqa: RUF001 - Turkish's dotless i, as PayTR sends it
PARAMS = SchemeParams(secrets=(SECRET,))
SHAPE = webhook_shaper("paytr", PAYTR.scheme.id_ref(PARAMS), PAYTR.scheme.type_ref(PARAMS),
                       order_rules=PAYTR.order_keys, ordered=lambda _: True,
                       decode=PAYTR.document)  # fmt: skip


@pytest.fixture(params=["postgres", "tigerbeetle"])
async def paytr_parts(
    request: pytest.FixtureRequest, database_url: str, nats_url: str, redis_url: str
) -> AsyncIterator[SettlementParts]:
    """Settlement parts with a `paytr` provider whose merchant is the callback's
    `merchant_id` (a callback names none otherwise), and TRY/USD quoted."""
    async with running_stub({"TRY/USD": str(RATE)}) as stub:
        sections = settlement_sections(stub.url, redis_url, ledger=ledger_section(request.param))
        doc = config(database_url, nats_url, **sections)
        doc["providers"]["paytr"] = {"scheme": "paytr", "secrets": [SECRET],
                                     "merchant": ["/merchant_id"]}  # fmt: skip
        async with settlement_parts(settings_mod.parse(doc, env={})) as p:
            await p.settler.open_clearing_accounts()
            yield p


class Order:
    """One PayTR order's callbacks, under ids of its own (TigerBeetle keeps every run's)."""

    def __init__(self) -> None:
        self.tag = uuid.uuid4().hex[:12]
        self.oid = f"ORD{self.tag}"  # PayTR's order numbers: letters and digits
        self.merchant = f"m_paytr_{self.tag}"
        self._n = 0

    def callback(self, status: str, total: int, **extra: str) -> Event:
        """The callback as PayTR posts it, signed and shaped as the gateway records it."""
        fields = {"merchant_oid": self.oid, "status": status, "total_amount": str(total),
                  "payment_type": "card", "merchant_id": self.merchant, **extra}  # fmt: skip
        assert PAYTR.sign_body is not None
        body = PAYTR.sign_body(PARAMS, urlencode(fields).encode())
        PAYTR.scheme.verify(PARAMS, {}, body, 0.0)
        event = SHAPE({}, body, datetime.now(UTC), None)
        assert event.failure is None and event.event_id == f"{self.oid}:{status}"
        return event

    def success(self, total: int = 345_600, currency: str = "TL", **extra: str) -> Event:
        return self.callback("success", total, currency=currency, **extra)

    def failed(self) -> Event:
        return self.callback("failed", 0, failed_reason_code="2", failed_reason_msg=REASON)

    def refunded(self, amount: int, refund: str = "r1") -> Event:
        """A refund told by an internal service: PayTR sends none (`core.providers.paytr`)."""
        self._n += 1
        data = {"settlement_id": self.oid, "amount_minor": amount, "currency": "TRY",
                "refund_id": f"{self.oid}_{refund}"}  # fmt: skip
        body = orjson.dumps({"type": "payment.refunded", "data": data})
        return Event("service:billing", f"e_{self.tag}_{self._n}", "payment.refunded",
                     "events.billing.payment.refunded", {}, body, datetime.now(UTC))  # fmt: skip


def usd(try_minor: int) -> int:
    """A TRY amount in USD cents at `RATE` (exact for every amount below)."""
    cents = Decimal(try_minor) * RATE
    assert cents == cents.to_integral_value()
    return int(cents)


Scenario = Callable[[Order], list[Event]]

# name: (the callbacks, the merchant's balance in USD cents)
SCENARIOS: dict[str, tuple[Scenario, int]] = {
    "a success in TL": (lambda o: [o.success()], usd(345_600)),
    "a success told again (PayTR repeats it until it reads OK)":
        (lambda o: [o.success(), o.success(), o.success()], usd(345_600)),
    "a failure, then the order paid": (lambda o: [o.failed(), o.success()], usd(345_600)),
    "a failure told twice moves nothing": (lambda o: [o.failed(), o.failed()], 0),
    "a failure and a repeated success": (
        lambda o: [o.failed(), o.success(), o.failed(), o.success()], usd(345_600)),
    "instalments: what was collected, above what was asked": (
        lambda o: [o.success(360_000, payment_amount="345600")], usd(360_000)),
    "a success in TRY, as step 1 also writes it": (
        lambda o: [o.success(currency="TRY")], usd(345_600)),
    "a success without a currency is TRY": (
        lambda o: [o.callback("success", 345_600)], usd(345_600)),
    "a success in USD is not converted": (lambda o: [o.success(3_456, "USD")], 3_456),
    "a test payment moves nothing": (lambda o: [o.success(test_mode="1"), o.failed()], 0),
    "a success, then part refunded by an internal service": (
        lambda o: [o.success(), o.refunded(100_000)], usd(345_600 - 100_000)),
}  # fmt: skip


@pytest.mark.parametrize(("scenario", "balance"), SCENARIOS.values(), ids=SCENARIOS)
async def test_every_arrival_order_ends_in_the_same_balance(
    paytr_parts: SettlementParts, scenario: Scenario, balance: int
) -> None:
    parts = paytr_parts
    size = len(scenario(Order()))
    for order in orders(size, seed=size):
        o = Order()
        await open_merchant(parts, o.merchant)
        events = scenario(o)
        ended = await settle_in_order(parts, [events[i] for i in order])
        assert all(isinstance(e, SettleOutcome) for e in ended), (order, ended)
        assert await merchant_balance(parts, o.merchant) == balance, order
    verify_totals(await parts.ledger.check())


async def test_each_callback_ends_as_paytr_means_it(paytr_parts: SettlementParts) -> None:
    """The first success settles, its repeats are duplicates, a failure and a test
    payment are ignored (nothing moved, nothing parked)."""
    o = Order()
    await open_merchant(paytr_parts, o.merchant)
    told = [o.failed(), o.success(), o.success(), o.failed()]
    assert await settle_in_order(paytr_parts, told) == [S.IGNORED, S.SETTLED, S.DUPLICATE,
                                                        S.IGNORED]  # fmt: skip
    t = Order()
    assert await settle_in_order(paytr_parts, [t.success(test_mode="1")]) == [S.IGNORED]


async def test_a_success_whose_merchant_is_nowhere_is_parked(
    paytr_parts: SettlementParts,
) -> None:
    """Without a merchant (the setting points at `merchant_id`, absent here) the capture
    is a permanent `MissingField`: parked to be replayed, never guessed."""
    o = Order()
    fields = {"merchant_oid": o.oid, "status": "success", "total_amount": "100"}
    assert PAYTR.sign_body is not None
    body = PAYTR.sign_body(PARAMS, urlencode(fields).encode())
    event = SHAPE({}, body, datetime.now(UTC), None)
    assert await settle_in_order(paytr_parts, [event]) == [MissingField]
    assert await merchant_balance(paytr_parts, o.merchant) is None
