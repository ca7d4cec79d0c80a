"""Square's events as money movements (`core.providers.square`), table-driven from the
examples of Square's own API definition (`payloads/square/README.md`), each also read
by Square's official models (`squareup`, a development dependency)."""

from __future__ import annotations

import copy
import itertools
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pytest
from pydantic import BaseModel
from square.types.dispute_created_event import DisputeCreatedEvent
from square.types.dispute_state_changed_event import DisputeStateChangedEvent
from square.types.dispute_state_updated_event import DisputeStateUpdatedEvent
from square.types.payment_created_event import PaymentCreatedEvent
from square.types.payment_updated_event import PaymentUpdatedEvent
from square.types.payout_failed_event import PayoutFailedEvent
from square.types.payout_paid_event import PayoutPaidEvent
from square.types.payout_sent_event import PayoutSentEvent
from square.types.refund_created_event import RefundCreatedEvent
from square.types.refund_updated_event import RefundUpdatedEvent

from gateway.core.providers import square as mapping
from gateway.core.settlement.follow_ups import Claim, Payment, Pool, decide, held
from gateway.core.settlement.instructions import SettlementInstruction, SettlementKind
from gateway.errors import FieldTypeInvalid, InvalidAmount, MissingField

K = SettlementKind
PAYLOADS = Path(__file__).parent / "payloads" / "square"
SELLER = "6SSW7HV8K2ST5"
DISPUTE_SELLER = "0HPGX5JYE6EE1"
PAYMENT = "hYy9pRFVxpDsO1FB05SunFWUe9JZY"
REFUND = "KkAkhdMsgzn59SM8A89WgKwekxLZY_ptNBVqHYxt5gAdfcobBe4u1AZsXhoz06KTtuq9Ls24P"
REFUNDED_PAYMENT = "KkAkhdMsgzn59SM8A89WgKwekxLZY"
DISPUTE = "ORSEVtZAJxb37RA1EiGw"
DISPUTED_PAYMENT = "fbmsaEOpoARDKxiSGH1fqPuqoqFZY"
PAYOUT = "po_070431e4-e351-11eb-a8bb-02420a140009"
#: Each file and Square's own model of its event.
MODELS: dict[str, type[BaseModel]] = {
    "payment_created": PaymentCreatedEvent,
    "payment_updated": PaymentUpdatedEvent,
    "refund_created": RefundCreatedEvent,
    "refund_updated": RefundUpdatedEvent,
    "dispute_created": DisputeCreatedEvent,
    "dispute_state_updated": DisputeStateUpdatedEvent,
    "dispute_state_changed": DisputeStateChangedEvent,
    "payout_sent": PayoutSentEvent,
    "payout_paid": PayoutPaidEvent,
    "payout_failed": PayoutFailedEvent,
}


def load(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = orjson.loads((PAYLOADS / f"{name}.json").read_bytes())
    return doc


def changed(name: str, where: str, **fields: Any) -> dict[str, Any]:
    """The payload `name` with fields of `data.object.<where>` replaced (None removes)."""
    doc = copy.deepcopy(load(name))
    obj = doc["data"]["object"][where]
    for key, value in fields.items():
        if value is None:
            obj.pop(key, None)
        else:
            obj[key] = value
    return doc


def dispute_in_schema_shape(name: str) -> dict[str, Any]:
    """The dispute under `data.object.object`, as Square's schema and SDK place it."""
    doc = copy.deepcopy(load(name))
    doc["data"]["object"] = {"object": doc["data"]["object"]["dispute"]}
    return doc


def moved(doc: dict[str, Any]) -> SettlementInstruction | None:
    return mapping.instruction(doc["type"], doc)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_payload_is_read_by_squares_own_model(name: str) -> None:
    """The files are Square's shapes: its generated models take them without an error."""
    event = MODELS[name].model_validate(load(name))
    assert event.model_dump()["type"] == load(name)["type"]


def test_square_models_agree_on_the_amounts_read() -> None:
    """What Square's models read as the payment's total and the refund's amount is what
    the mapping moves."""
    event = PaymentUpdatedEvent.model_validate(load("payment_updated")).model_dump()
    refund = RefundUpdatedEvent.model_validate(load("refund_updated")).model_dump()
    captured, refunded = moved(load("payment_updated")), moved(load("refund_updated"))
    assert captured is not None and refunded is not None
    assert event["data"]["object"]["payment"]["total_money"]["amount"] == captured.amount_minor
    assert refund["data"]["object"]["refund"]["amount_money"]["amount"] == refunded.amount_minor


@pytest.mark.parametrize(
    ("case", "doc", "kind", "settlement_id", "key", "amount", "currency", "merchant"),
    [
        ("an approved payment reserves approved_money, keyed by the payment",
         load("payment_created"), K.AUTHORISATION, PAYMENT, PAYMENT, 100, "USD", SELLER),
        ("without approved_money, the total",
         changed("payment_created", "payment", approved_money=None,
                 total_money={"amount": 150, "currency": "USD"}),
         K.AUTHORISATION, PAYMENT, PAYMENT, 150, "USD", SELLER),
        ("a completed payment is its capture of total_money",
         load("payment_updated"), K.CAPTURE, PAYMENT, PAYMENT, 100, "USD", SELLER),
        ("the tip is the seller's too: the capture is amount plus tip",
         changed("payment_updated", "payment", tip_money={"amount": 20, "currency": "USD"},
                 total_money={"amount": 120, "currency": "USD"}),
         K.CAPTURE, PAYMENT, PAYMENT, 120, "USD", SELLER),
        ("a payment created completed is captured at once",
         changed("payment_created", "payment", status="COMPLETED"),
         K.CAPTURE, PAYMENT, PAYMENT, 100, "USD", SELLER),
        ("a canceled payment voids its reservation",
         changed("payment_updated", "payment", status="CANCELED"),
         K.VOID, PAYMENT, PAYMENT, 100, "USD", SELLER),
        ("so does a failed one",
         changed("payment_updated", "payment", status="FAILED"),
         K.VOID, PAYMENT, PAYMENT, 100, "USD", SELLER),
        ("a completed refund is keyed by the refund, of its payment",
         load("refund_updated"), K.REFUND, REFUNDED_PAYMENT, REFUND, 1000, "USD", SELLER),
        ("a failed refund is its reversal",
         changed("refund_updated", "refund", status="FAILED"),
         K.REFUND_REVERSAL, REFUNDED_PAYMENT, REFUND, 1000, "USD", SELLER),
        ("so is a rejected one",
         changed("refund_updated", "refund", status="REJECTED"),
         K.REFUND_REVERSAL, REFUNDED_PAYMENT, REFUND, 1000, "USD", SELLER),
        ("a won dispute is the reversal of its chargeback",
         load("dispute_state_updated"), K.CHARGEBACK_REVERSAL, DISPUTED_PAYMENT, DISPUTE, 8801,
         "USD", DISPUTE_SELLER),
        ("the deprecated event names the dispute by dispute_id",
         load("dispute_state_changed"), K.CHARGEBACK_REVERSAL, DISPUTED_PAYMENT, DISPUTE, 8801,
         "USD", DISPUTE_SELLER),
        ("a lost dispute is a chargeback",
         changed("dispute_state_updated", "dispute", state="LOST"),
         K.CHARGEBACK, DISPUTED_PAYMENT, DISPUTE, 8801, "USD", DISPUTE_SELLER),
        ("so is one the seller accepted",
         changed("dispute_state_updated", "dispute", state="ACCEPTED"),
         K.CHARGEBACK, DISPUTED_PAYMENT, DISPUTE, 8801, "USD", DISPUTE_SELLER),
        ("the dispute where Square's schema puts it",
         dispute_in_schema_shape("dispute_state_updated"),
         K.CHARGEBACK_REVERSAL, DISPUTED_PAYMENT, DISPUTE, 8801, "USD", DISPUTE_SELLER),
        ("a paid payout, its currency written currency_code",
         load("payout_paid"), K.PAYOUT, PAYOUT, PAYOUT, 457, "EUR", "MLEWJTMNJN37Z"),
        ("JPY's base unit is the yen, as in ISO",
         changed("payment_updated", "payment", total_money={"amount": 500, "currency": "JPY"}),
         K.CAPTURE, PAYMENT, PAYMENT, 500, "JPY", SELLER),
    ],
)  # fmt: skip
def test_each_mapped_type_moves_what_square_says(
    case: str, doc: dict[str, Any], kind: SettlementKind, settlement_id: str, key: str,
    amount: int, currency: str, merchant: str,
) -> None:  # fmt: skip
    found = moved(doc)
    assert found is not None, case
    assert (found.kind, found.settlement_id, found.key) == (kind, settlement_id, key), case
    assert (found.amount_minor, found.currency, found.merchant_id) == (amount, currency, merchant)
    assert found.source_event_id == doc["event_id"], case
    assert found.kind in mapping.MOVEMENT_TYPES[doc["type"]], case


@pytest.mark.parametrize(
    ("case", "doc"),
    [
        ("a pending refund has moved nothing yet", load("refund_created")),
        ("a pending payment neither", changed("payment_updated", "payment", status="PENDING")),
        ("a payment created declined moved nothing",
         changed("payment_created", "payment", status="FAILED")),
        ("an approval updated (a tip, a reauthorisation) is not a second reservation",
         changed("payment_created", "payment", status="APPROVED") | {"type": "payment.updated"}),
        ("a refund created failed moved nothing",
         changed("refund_created", "refund", status="FAILED")),
        ("an open dispute is not decided", load("dispute_created")),
        ("nor one processing its evidence",
         changed("dispute_state_updated", "dispute", state="PROCESSING")),
        ("a closed inquiry took nothing",
         changed("dispute_state_updated", "dispute", state="INQUIRY_CLOSED")),
        ("a negative payout is a withdrawal, not a payout",
         changed("payout_paid", "payout", amount_money={"amount": -457, "currency": "EUR"})),
    ],
)  # fmt: skip
def test_listed_types_in_states_that_move_nothing(case: str, doc: dict[str, Any]) -> None:
    assert doc["type"] in mapping.MOVEMENT_TYPES, case
    assert moved(doc) is None, case


@pytest.mark.parametrize("name", ["payout_sent", "payout_failed"])
def test_a_payout_moves_money_once_paid(name: str) -> None:
    assert moved(load(name)) is None
    assert load(name)["type"] not in mapping.MOVEMENT_TYPES


@pytest.mark.parametrize(
    ("case", "doc", "error", "field"),
    [
        ("no payment", {"event_id": "e", "type": "payment.updated", "data": {"object": {}}},
         MissingField, "data.object.payment"),
        ("no status", changed("payment_updated", "payment", status=None), MissingField,
         "data.object.payment.status"),
        ("no total", changed("payment_updated", "payment", total_money=None), MissingField,
         "data.object.payment.total_money"),
        ("a total that is not Money", changed("payment_updated", "payment", total_money=100),
         FieldTypeInvalid, "data.object.payment.total_money"),
        ("an amount as text", changed("payment_updated", "payment",
                                      total_money={"amount": "100", "currency": "USD"}),
         FieldTypeInvalid, "data.object.payment.total_money.amount"),
        ("no currency", changed("payment_updated", "payment", total_money={"amount": 100}),
         MissingField, "data.object.payment.total_money.currency"),
        ("a refund without its payment", changed("refund_updated", "refund", payment_id=None),
         MissingField, "data.object.refund.payment_id"),
        ("a refund without its id", changed("refund_updated", "refund", id=None),
         MissingField, "data.object.refund.id"),
        ("a decided dispute without its payment",
         changed("dispute_state_updated", "dispute", disputed_payment=None), MissingField,
         "data.object.dispute.disputed_payment"),
        ("a dispute without its id", changed("dispute_state_updated", "dispute", id=None),
         MissingField, "data.object.dispute.id"),
        ("no dispute at all", {"event_id": "e", "type": "dispute.state.updated",
                               "data": {"object": {"thing": {}}}},
         MissingField, "data.object.dispute"),
        ("a payout without its id", changed("payout_paid", "payout", id=None), MissingField,
         "data.object.payout.id"),
    ],
)  # fmt: skip
def test_missing_or_garbled_fields_are_permanent_errors_naming_the_field(
    case: str, doc: dict[str, Any], error: type[Exception], field: str
) -> None:
    with pytest.raises(error) as raised:
        moved(doc)
    assert field in str(raised.value), case


def test_a_zero_capture_is_refused() -> None:
    doc = changed("payment_updated", "payment", total_money={"amount": 0, "currency": "USD"})
    with pytest.raises(InvalidAmount):
        moved(doc)


def test_square_writes_no_currency_unlike_iso() -> None:
    assert dict(mapping.UNITS) == {}


@pytest.mark.parametrize(
    ("case", "states", "taken"),
    [
        ("won: nothing taken", ["WON"], 0),
        ("lost, then won on appeal: given back, in any order", ["LOST", "WON"], 0),
        ("accepted, told twice: taken once", ["ACCEPTED", "ACCEPTED"], 8801),
    ],
)  # fmt: skip
def test_every_arrival_order_of_a_dispute_ends_in_the_same_balance(
    case: str, states: list[str], taken: int
) -> None:
    payment = Payment(DISPUTED_PAYMENT, 10000, "USD", "USD", Decimal(1))
    events = [changed("dispute_state_updated", "dispute", state=s) for s in states]
    instructions = [i for i in map(moved, events) if i is not None]
    for order in itertools.permutations(instructions):
        claims: list[Claim] = []
        for found in order:
            due = decide(claims, found, payment)
            if due is not None:
                claims.append(due.claim)
        assert held(claims, Pool.DISPUTES)[0] == taken, case
