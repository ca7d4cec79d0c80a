"""GoCardless's events confirmed by a fetch: what is fetched, what the answer becomes,
and what each confirmed event moves. Table-driven, pure; the shapes are those of
developer.gocardless.com's API reference and `gocardless-pro-python`'s fixtures
(`tests/fixtures/payments.json`, `refunds.json`, `payouts.json`)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from gateway.core.providers.gocardless.answer import (
    API_VERSION,
    AWAITED,
    METADATA_BYTES_MAX,
    auth,
    awaits,
    confirmed,
    locate,
)
from gateway.core.providers.gocardless.webhooks import KINDS, instruction
from gateway.core.settlement.instructions import SettlementKind
from gateway.errors import ConfirmationMismatch, InvalidAmount, PayloadInvalid

K = SettlementKind


def item(resource: str, action: str, **links: str) -> dict[str, Any]:
    """A recorded item as the batch was split: one event and the request's meta."""
    return {"events": [{"id": "EV0001", "created_at": "2026-12-06T10:00:00.000Z",
                        "resource_type": resource, "action": action, "links": links}],
            "meta": {"webhook_id": "WB0001"}}  # fmt: skip


PAYMENT = {"id": "PM0001", "amount": 1_250, "currency": "GBP", "status": "confirmed",
           "metadata": {"merchant_id": "m_1"}, "links": {"creditor": "CR0001"}}  # fmt: skip
REFUND = {"id": "RF0001", "amount": 300, "currency": "GBP", "metadata": {},
          "links": {"payment": "PM0001", "mandate": "MD0001"}}  # fmt: skip
PAYOUT = {"id": "PO0001", "amount": 9_000, "currency": "EUR",
          "metadata": {"merchant_id": "m_1"}, "links": {"creditor": "CR0001"}}  # fmt: skip


@pytest.mark.parametrize(
    ("event_type", "owed"),
    [("payments.confirmed", True), ("payments.charged_back", True),
     ("payments.chargeback_cancelled", True), ("refunds.created", True),
     ("refunds.failed", True), ("refunds.funds_returned", True), ("payouts.paid", True),
     ("payments.paid_out", False), ("payments.created", False), ("mandates.created", False),
     ("refunds.paid", False), ("payouts.tax_exchange_rates_confirmed", False)],
)  # fmt: skip
def test_only_the_events_that_move_money_wait_for_a_fetch(event_type: str, owed: bool) -> None:
    assert awaits(event_type) is owed
    assert (event_type in KINDS) is owed


@pytest.mark.parametrize(
    ("doc", "path"),
    [(item("payments", "confirmed", payment="PM0001", mandate="MD1"), "/payments/PM0001"),
     (item("refunds", "failed", refund="RF0001", payment="PM0001"), "/refunds/RF0001"),
     (item("payouts", "paid", payout="PO0001"), "/payouts/PO0001")],
)  # fmt: skip
def test_locate_fetches_the_object_the_event_links(doc: Any, path: str) -> None:
    assert locate(doc) == path


@pytest.mark.parametrize(
    ("doc", "problem"),
    [(item("payments", "confirmed"), "links.payment"),
     (item("payments", "confirmed", payment="PM0001/../../creditors"), "links.payment"),
     (item("payments", "confirmed", payment="pm0001"), "links.payment"),
     (item("payments", "confirmed", payment="PM" + "0" * 63), "links.payment"),
     (item("refunds", "created", payment="PM0001"), "links.refund"),
     (item("mandates", "created", mandate="MD0001"), "is not fetched"),
     ({"events": []}, "not one GoCardless event"),
     ({"events": [item("payments", "confirmed")["events"][0]] * 2}, "not one"),
     ({"events": "x"}, "not one"), ([], "not one"), ("id=tr_1", "not one"),
     ({"events": [{"resource_type": "payments", "action": "confirmed"}]}, "id is not")],
)  # fmt: skip
def test_locate_refuses_what_names_nothing_to_fetch(doc: Any, problem: str) -> None:
    with pytest.raises(PayloadInvalid, match=problem):
        locate(doc)


def test_the_answer_becomes_the_event_again_with_the_objects_amount() -> None:
    (found,) = confirmed(item("payments", "confirmed", payment="PM0001"), {"payments": PAYMENT})
    assert (found.event_id, found.event_type) == ("EV0001:confirmed", "payments.confirmed")
    assert orjson.loads(found.body) == {
        "event_id": "EV0001", "event_type": "payments.confirmed",
        "created_at": "2026-12-06T10:00:00.000Z", "payment_id": "PM0001",
        "object_id": "PM0001", "amount": 1_250, "currency": "GBP",
        "metadata": {"merchant_id": "m_1"}, "creditor": "CR0001",
    }  # fmt: skip


@pytest.mark.parametrize(
    ("doc", "answer", "kind", "settlement_id", "own_id", "amount", "merchant"),
    [(item("payments", "confirmed", payment="PM0001"), {"payments": PAYMENT},
      K.CAPTURE, "PM0001", None, 1_250, "m_1"),
     (item("payments", "charged_back", payment="PM0001"), {"payments": PAYMENT},
      K.CHARGEBACK, "PM0001", "PM0001:chargeback", 1_250, "m_1"),
     (item("payments", "chargeback_cancelled", payment="PM0001"), {"payments": PAYMENT},
      K.CHARGEBACK_REVERSAL, "PM0001", "PM0001:chargeback", 1_250, "m_1"),
     (item("refunds", "created", refund="RF0001"), {"refunds": REFUND},
      K.REFUND, "PM0001", "RF0001", 300, None),
     (item("refunds", "failed", refund="RF0001"), {"refunds": REFUND},
      K.REFUND_REVERSAL, "PM0001", "RF0001", 300, None),
     (item("refunds", "funds_returned", refund="RF0001"), {"refunds": REFUND},
      K.REFUND_REVERSAL, "PM0001", "RF0001", 300, None),
     (item("payouts", "paid", payout="PO0001"), {"payouts": PAYOUT},
      K.PAYOUT, "PO0001", "PO0001", 9_000, "m_1")],
)  # fmt: skip
def test_each_confirmed_event_moves_the_fetched_amount(
    doc: Any, answer: Any, kind: K, settlement_id: str, own_id: str | None, amount: int,
    merchant: str | None,
) -> None:  # fmt: skip
    (found,) = confirmed(doc, answer)
    got = instruction(found.event_type, orjson.loads(found.body))
    assert got is not None
    assert (got.kind, got.settlement_id, got.refund_id) == (kind, settlement_id, own_id)
    assert (got.amount_minor, got.currency, got.merchant_id) == (
        amount,
        answer[next(iter(answer))]["currency"],
        merchant,
    )
    assert got.source_event_id == "EV0001"


def test_an_event_published_as_it_came_moves_nothing() -> None:
    """Without an API key nothing is fetched: the webhook event has no amount."""
    assert instruction("payments.confirmed", item("payments", "confirmed", payment="PM1")) is None
    assert instruction("mandates.created", {"amount": 1}) is None


@pytest.mark.parametrize(
    ("answer", "error", "problem"),
    [({"payments": {**PAYMENT, "id": "PM0002"}}, ConfirmationMismatch, "PM0002"),
     ({"payments": {**PAYMENT, "id": None}}, ConfirmationMismatch, "NoneType"),
     ({"payments": {**PAYMENT, "id": "PM" + "9" * 500}}, ConfirmationMismatch, "PM9999"),
     ({"refunds": PAYMENT}, PayloadInvalid, "no payments object"),
     ({"payments": [PAYMENT]}, PayloadInvalid, "no payments object"),
     ([PAYMENT], PayloadInvalid, "no payments object"),
     ({"payments": {**PAYMENT, "amount": "12.50"}}, PayloadInvalid, "not an integer"),
     ({"payments": {**PAYMENT, "amount": 12.5}}, PayloadInvalid, "not an integer"),
     ({"payments": {**PAYMENT, "amount": True}}, PayloadInvalid, "not an integer"),
     ({"payments": {k: v for k, v in PAYMENT.items() if k != "amount"}}, PayloadInvalid,
      "not an integer"),
     ({"payments": {**PAYMENT, "currency": "POUNDS"}}, PayloadInvalid, "currency"),
     ({"payments": {**PAYMENT, "metadata": ["m_1"]}}, PayloadInvalid, "metadata"),
     ({"payments": {**PAYMENT, "metadata": {"k": "x" * METADATA_BYTES_MAX}}}, PayloadInvalid,
      "metadata")],
)  # fmt: skip
def test_an_answer_that_is_not_this_events_object_is_refused(
    answer: Any, error: type[Exception], problem: str
) -> None:
    with pytest.raises(error, match=problem):
        confirmed(item("payments", "confirmed", payment="PM0001"), answer)


def test_a_refund_must_name_a_payment() -> None:
    refund = {**REFUND, "links": {"payment": "not-a-payment"}}
    with pytest.raises(PayloadInvalid, match=r"links\.payment"):
        confirmed(item("refunds", "created", refund="RF0001"), {"refunds": refund})


def test_a_bad_amount_reaches_settlement_which_refuses_it() -> None:
    """The answer is taken as written; the ledger's bounds are settlement's to apply."""
    (found,) = confirmed(item("payments", "confirmed", payment="PM0001"),
                         {"payments": {**PAYMENT, "amount": -5}})  # fmt: skip
    with pytest.raises(InvalidAmount, match="amount is -5"):
        instruction(found.event_type, orjson.loads(found.body))


def test_every_awaited_type_has_a_movement_and_the_token_travels_with_the_version() -> None:
    assert set(AWAITED) == set(KINDS)
    assert auth("tok") == {"Authorization": "Bearer tok", "GoCardless-Version": API_VERSION}
