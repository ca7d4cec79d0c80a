"""Checkout.com's events as money movements (`core.providers.checkout`), table-driven from
Checkout.com's own bodies: real sandbox deliveries and its documentation's examples
(`payloads/checkout/README.md` names each one's source)."""

from __future__ import annotations

import copy
import itertools
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pytest

from gateway.core.providers import checkout as mapping
from gateway.core.settlement.follow_ups import Claim, Payment, Pool, decide, held
from gateway.core.settlement.instructions import SettlementInstruction, SettlementKind
from gateway.errors import FieldTypeInvalid, InvalidAmount, MissingField, ProviderAmountInvalid
from tests.support.corpus import CORPUS, corpus_items

K = SettlementKind
PAYLOADS = Path(__file__).parent / "payloads" / "checkout"
DISPUTE_PAYMENT = "pay_cnhuomagalglgozxy5zm"
DISPUTE = "dsp_9rjdlsd4epepfjyyf9vl"


def load(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = orjson.loads((PAYLOADS / f"{name}.json").read_bytes())
    return doc


def changed(name: str, event_type: str | None = None, **data: Any) -> dict[str, Any]:
    """The payload `name` with another `type` and some `data` fields replaced (a value of
    None removes the field)."""
    doc = copy.deepcopy(load(name))
    if event_type is not None:
        doc["type"] = event_type
    for key, value in data.items():
        if value is None:
            doc["data"].pop(key, None)
        else:
            doc["data"][key] = value
    return doc


def with_merchant(name: str) -> dict[str, Any]:
    doc = copy.deepcopy(load(name))
    doc["data"]["metadata"]["merchant_id"] = "m_1"
    return doc


def second_capture() -> dict[str, Any]:
    """`payment_captured.json` as a second capture of 5,000 after one of 7,000."""
    balances = {**load("payment_captured")["data"]["balances"], "total_captured": 12000}
    return changed("payment_captured", amount=5000, action_id="act_second", balances=balances)


def moved(doc: dict[str, Any]) -> SettlementInstruction | None:
    return mapping.instruction(doc["type"], doc)


@pytest.mark.parametrize(
    ("case", "doc", "kind", "settlement_id", "key", "amount", "currency", "merchant"),
    [
        ("an approval reserves the authorised amount, keyed by its payment",
         load("payment_approved"), K.AUTHORISATION, "pay_oogtk3sugdxu7bilm4dbvzlmcy",
         "pay_oogtk3sugdxu7bilm4dbvzlmcy", 88000, "EUR", None),
        ("the merchant is the payment's metadata.merchant_id",
         with_merchant("payment_approved"), K.AUTHORISATION, "pay_oogtk3sugdxu7bilm4dbvzlmcy",
         "pay_oogtk3sugdxu7bilm4dbvzlmcy", 88000, "EUR", "m_1"),
        ("a first (here: whole) capture is the payment's own, carrying its action id",
         load("payment_captured"), K.CAPTURE, "pay_ht4n7ohvpc7epirpfco6wdou24",
         "act_24iebe4b2atuhj4iemx7a4dx6q", 12000, "EUR", None),
        ("a first partial capture is the payment's own too",
         changed("payment_captured", amount=7000,
                 balances={"total_captured": 7000, "available_to_capture": 5000}),
         K.CAPTURE, "pay_ht4n7ohvpc7epirpfco6wdou24", "act_24iebe4b2atuhj4iemx7a4dx6q", 7000,
         "EUR", None),
        ("a later capture is a settlement of its own, keyed payment:action",
         second_capture(), K.CAPTURE, "pay_ht4n7ohvpc7epirpfco6wdou24:act_second",
         "act_second", 5000, "EUR", None),
        ("a capture without balances is the payment's own",
         changed("payment_captured", balances=None), K.CAPTURE,
         "pay_ht4n7ohvpc7epirpfco6wdou24", "act_24iebe4b2atuhj4iemx7a4dx6q", 12000, "EUR", None),
        ("a void releases the payment's reservation",
         load("payment_voided"), K.VOID, "pay_rvaqaesek3eejfly4gt7d7eopa",
         "pay_rvaqaesek3eejfly4gt7d7eopa", 6000, "EUR", None),
        ("a refund is keyed by its action",
         load("payment_refunded"), K.REFUND, "pay_234iojjumr4ejphuvcsnpnugs4",
         "act_v3ap4uxinl6exk5hdgetatbywi", 40000, "EUR", None),
        ("the dispute debits the merchant as evidence is asked for",
         load("dispute_evidence_required"), K.CHARGEBACK, DISPUTE_PAYMENT, DISPUTE, 8150,
         "GBP", None),
        ("a lost dispute is the same chargeback",
         load("dispute_lost"), K.CHARGEBACK, DISPUTE_PAYMENT, DISPUTE, 8150, "GBP", None),
        ("so is an expired one",
         changed("dispute_lost", "dispute_expired"), K.CHARGEBACK, DISPUTE_PAYMENT, DISPUTE,
         8150, "GBP", None),
        ("and an accepted one",
         changed("dispute_lost", "dispute_accepted"), K.CHARGEBACK, DISPUTE_PAYMENT, DISPUTE,
         8150, "GBP", None),
        ("a won dispute credits it back",
         changed("dispute_lost", "dispute_won"), K.CHARGEBACK_REVERSAL, DISPUTE_PAYMENT,
         DISPUTE, 8150, "GBP", None),
        ("so does one the issuer canceled",
         changed("dispute_lost", "dispute_canceled"), K.CHARGEBACK_REVERSAL, DISPUTE_PAYMENT,
         DISPUTE, 8150, "GBP", None),
        ("CLP is written in hundredths: 1,500,000 is 15,000 pesos",
         changed("payment_captured", amount=1500000, currency="CLP", balances=None),
         K.CAPTURE, "pay_ht4n7ohvpc7epirpfco6wdou24", "act_24iebe4b2atuhj4iemx7a4dx6q", 15000,
         "CLP", None),
        ("JPY is a full amount, as in ISO",
         changed("payment_refunded", amount=5000, currency="JPY"), K.REFUND,
         "pay_234iojjumr4ejphuvcsnpnugs4", "act_v3ap4uxinl6exk5hdgetatbywi", 5000, "JPY", None),
    ],
)  # fmt: skip
def test_each_mapped_type_moves_what_checkout_com_says(
    case: str, doc: dict[str, Any], kind: SettlementKind, settlement_id: str, key: str,
    amount: int, currency: str, merchant: str | None,
) -> None:  # fmt: skip
    found = moved(doc)
    assert found is not None, case
    assert (found.kind, found.settlement_id, found.key) == (kind, settlement_id, key), case
    assert (found.amount_minor, found.currency, found.merchant_id) == (amount, currency, merchant)
    assert found.source_event_id == doc["id"], case
    assert found.kind in mapping.MOVEMENT_TYPES[doc["type"]], case


@pytest.mark.parametrize(
    ("case", "doc"),
    [
        ("an authentication moves nothing", {"id": "evt_1", "type": "authentication_approved",
                                             "data": {"amount": "88000", "currency": "EUR"}}),
        ("a dispute already refunded has no financial implication", load("dispute_resolved")),
        ("a declined capture moved nothing",
         changed("payment_captured", "payment_capture_declined")),
        ("a declined refund moved nothing",
         changed("payment_refunded", "payment_refund_declined")),
        ("a declined void moved nothing", changed("payment_voided", "payment_void_declined")),
    ],
)  # fmt: skip
def test_the_types_that_move_nothing(case: str, doc: dict[str, Any]) -> None:
    assert moved(doc) is None, case
    assert doc["type"] not in mapping.MOVEMENT_TYPES, case


def test_an_approval_of_nothing_reserves_nothing() -> None:
    assert moved(changed("payment_approved", amount=0)) is None


@pytest.mark.parametrize(
    ("case", "doc", "error", "field"),
    [
        ("no data", {"id": "evt_1", "type": "payment_captured"}, MissingField, "data"),
        ("no payment id", changed("payment_captured", id=None), MissingField, "data.id"),
        ("no amount", changed("payment_approved", amount=None), MissingField, "data.amount"),
        ("an amount as text", changed("payment_captured", amount="12000"), FieldTypeInvalid,
         "data.amount"),
        ("a float amount", changed("payment_refunded", amount=400.5), FieldTypeInvalid,
         "data.amount"),
        ("no refund action", changed("payment_refunded", action_id=None), MissingField,
         "data.action_id"),
        ("no currency", changed("payment_voided", currency=None), MissingField, "data.currency"),
        ("not a currency", changed("payment_voided", currency="EURO"), FieldTypeInvalid,
         "data.currency"),
        ("a dispute without its payment", changed("dispute_lost", payment_id=None),
         MissingField, "data.payment_id"),
        ("a dispute without its id", changed("dispute_lost", id=None), MissingField, "data.id"),
        ("garbled balances", changed("payment_captured", balances=[12000]), FieldTypeInvalid,
         "data.balances"),
        ("a captured total as text", changed("payment_captured",
                                            balances={"total_captured": "12000"}),
         FieldTypeInvalid, "data.balances.total_captured"),
        ("a later capture without its action", changed(
            "payment_captured", action_id=None, balances={"total_captured": 24000}),
         MissingField, "data.action_id"),
    ],
)  # fmt: skip
def test_missing_or_garbled_fields_are_permanent_errors_naming_the_field(
    case: str, doc: dict[str, Any], error: type[Exception], field: str
) -> None:
    with pytest.raises(error) as raised:
        moved(doc)
    assert field in str(raised.value), case


@pytest.mark.parametrize(
    ("doc", "error"),
    [
        (changed("payment_captured", amount=-1), InvalidAmount),
        (changed("payment_captured", amount=1500050, currency="CLP", balances=None),
         ProviderAmountInvalid),  # not whole pesos: an amount Checkout.com never sends
    ],
)  # fmt: skip
def test_amounts_checkout_com_never_sends_are_refused(
    doc: dict[str, Any], error: type[Exception]
) -> None:
    with pytest.raises(error):
        moved(doc)


def test_units_lists_only_currencies_written_unlike_iso() -> None:
    assert set(mapping.UNITS) == {"CLP", "CLF"}
    assert all(rule.exponent == 2 for rule in mapping.UNITS.values())


def settle_in_order(instructions: list[SettlementInstruction]) -> int:
    """What the dispute pool holds after `instructions` arrive in this order."""
    payment = Payment(DISPUTE_PAYMENT, 10000, "GBP", "GBP", Decimal(1))
    claims: list[Claim] = []
    for found in instructions:
        due = decide(claims, found, payment)
        if due is not None:
            claims.append(due.claim)
    return held(claims, Pool.DISPUTES)[0]


@pytest.mark.parametrize(
    ("case", "types", "taken"),
    [
        ("won after the debit: the money comes back", ["dispute_evidence_required",
                                                        "dispute_won"], 0),
        ("canceled after the debit", ["dispute_evidence_required", "dispute_canceled"], 0),
        ("lost: debited once, however often told",
         ["dispute_evidence_required", "dispute_lost", "dispute_expired"], 8150),
        ("lost with no evidence asked", ["dispute_lost"], 8150),
    ],
)  # fmt: skip
def test_every_arrival_order_of_a_dispute_ends_in_the_same_balance(
    case: str, types: list[str], taken: int
) -> None:
    events = [changed("dispute_evidence_required", t) for t in types]
    instructions = [i for i in map(moved, events) if i is not None]
    for order in itertools.permutations(instructions):
        assert settle_in_order(list(order)) == taken, case


@pytest.mark.skipif(not CORPUS.exists(), reason="the corpus of real deliveries is absent")
def test_the_delivered_payloads_are_the_corpus_bodies_byte_for_byte() -> None:
    bodies = {i["name"].rsplit("/", 1)[-1]: i["body"] for i in corpus_items()
              if i["provider"] == "checkout"}  # fmt: skip
    for name in ("payment_approved", "payment_captured", "payment_voided"):
        assert (PAYLOADS / f"{name}.json").read_text() == bodies[f"{name}.json"]
