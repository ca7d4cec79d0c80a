"""Which money movement each provider's event is (`core.mappings`), table-driven, and
every real Stripe and Paddle payload of the corpus read without a surprise."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest

from gateway import settings as settings_mod
from gateway.core.ordering.keys import parse_rules
from gateway.core.providers import paddle
from gateway.core.providers.movements import instruction_of, movement_types, settles
from gateway.core.providers.stripe import snapshot as stripe
from gateway.core.settlement.instructions import SettlementInstruction, SettlementKind
from gateway.errors import ConfigError, FieldTypeInvalid, MissingField, PermanentError
from tests.support.corpus import CORPUS, corpus_items

K = SettlementKind
SCHEMES = {"stripe": "stripe", "paddle": "paddle", "github": "github"}


def stripe_event(event_type: str, obj: dict[str, Any]) -> dict[str, Any]:
    return {"id": "evt_1", "type": event_type, "data": {"object": obj}}


def refund(status: str = "succeeded", **extra: Any) -> dict[str, Any]:
    return {"id": "re_1", "object": "refund", "amount": 700, "currency": "eur",
            "payment_intent": "pi_1", "status": status, **extra}  # fmt: skip


def dispute(**extra: Any) -> dict[str, Any]:
    return {"id": "dp_1", "object": "dispute", "amount": 900, "currency": "usd",
            "charge": "ch_1", "payment_intent": "pi_1", **extra}  # fmt: skip


def intent(**extra: Any) -> dict[str, Any]:
    return {"id": "pi_1", "object": "payment_intent", "amount": 1000, "currency": "usd",
            "capture_method": "manual", "metadata": {"merchant_id": "m_1"}, **extra}  # fmt: skip


def charge(**extra: Any) -> dict[str, Any]:
    return {"id": "ch_1", "object": "charge", "amount": 1000, "currency": "usd",
            "payment_intent": "pi_1", "captured": True, "metadata": {"merchant_id": "m_1"},
            **extra}  # fmt: skip


def paddle_adjustment(action: str = "refund", status: str = "approved") -> dict[str, Any]:
    return {
        "event_id": "evt_01",
        "event_type": "adjustment.updated",
        "data": {"id": "adj_1", "action": action, "status": status, "currency_code": "USD",
                 "transaction_id": "txn_1", "totals": {"total": "10887"}},
    }  # fmt: skip


def paddle_transaction(**custom: Any) -> dict[str, Any]:
    return {
        "event_id": "evt_02",
        "event_type": "transaction.completed",
        "data": {"id": "txn_1", "status": "completed", "currency_code": "JPY",
                 "custom_data": custom or None,
                 "details": {"totals": {"grand_total": "1500", "currency_code": "JPY"}}},
    }  # fmt: skip


# (event type, body, what it is: (kind, payment, own id, amount, currency) or None)
STRIPE = [
    ("refund.created", stripe_event("refund.created", refund()),
     (K.REFUND, "pi_1", "re_1", 700, "EUR")),
    ("refund.updated", stripe_event("refund.updated", refund("pending")),
     (K.REFUND, "pi_1", "re_1", 700, "EUR")),
    ("refund.updated", stripe_event("refund.updated", refund("failed")),
     (K.REFUND_REVERSAL, "pi_1", "re_1", 700, "EUR")),
    ("refund.updated", stripe_event("refund.updated", refund("canceled")),
     (K.REFUND_REVERSAL, "pi_1", "re_1", 700, "EUR")),
    ("refund.failed", stripe_event("refund.failed", refund("failed")),
     (K.REFUND_REVERSAL, "pi_1", "re_1", 700, "EUR")),
    ("charge.refund.updated", stripe_event("charge.refund.updated", refund()),
     (K.REFUND, "pi_1", "re_1", 700, "EUR")),
    ("refund.updated", stripe_event("refund.updated", refund("unknown_status")), None),
    ("refund.created", stripe_event("refund.created", refund(payment_intent={"id": "pi_x"})),
     (K.REFUND, "pi_x", "re_1", 700, "EUR")),
    ("charge.dispute.funds_withdrawn", stripe_event("x", dispute()),
     (K.CHARGEBACK, "pi_1", "dp_1", 900, "USD")),
    ("charge.dispute.funds_reinstated", stripe_event("x", dispute()),
     (K.CHARGEBACK_REVERSAL, "pi_1", "dp_1", 900, "USD")),
    ("charge.dispute.created", stripe_event("x", dispute()), None),
    ("charge.dispute.closed", stripe_event("x", dispute()), None),
    ("charge.dispute.closed", stripe_event("x", dispute(status="warning_closed")), None),
    ("charge.dispute.closed", stripe_event("x", dispute(status="lost")),
     (K.CHARGEBACK, "pi_1", "dp_1", 900, "USD")),
    ("charge.dispute.closed", stripe_event("x", dispute(status="won")),
     (K.CHARGEBACK_REVERSAL, "pi_1", "dp_1", 900, "USD")),
    ("customer.created", stripe_event("x", {"id": "cus_1"}), None),
    ("payout.paid", {**stripe_event("x", {"id": "po_1", "amount": 4200, "currency": "usd"}),
                     "account": "acct_9"}, (K.PAYOUT, "po_1", "po_1", 4200, "USD")),
    # The platform's own payout: no connected account, no merchant's money.
    ("payout.paid", stripe_event("x", {"id": "po_2", "amount": 4200, "currency": "usd"}), None),
    ("payment_intent.amount_capturable_updated", stripe_event("x", intent(amount_capturable=800)),
     (K.AUTHORISATION, "pi_1", "pi_1", 800, "USD")),
    # The reservation ended (captured or cancelled): that event tells it, not this one.
    ("payment_intent.amount_capturable_updated", stripe_event("x", intent(amount_capturable=0)),
     None),
    ("payment_intent.canceled", stripe_event("x", intent(status="canceled")),
     (K.VOID, "pi_1", "pi_1", 1000, "USD")),
    ("charge.captured", stripe_event("x", charge(amount_captured=600)),
     (K.CAPTURE, "pi_1", None, 600, "USD")),
    # A charge made without an intent is its own payment.
    ("charge.captured", stripe_event("x", charge(amount_captured=600, payment_intent=None)),
     (K.CAPTURE, "ch_1", None, 600, "USD")),
]  # fmt: skip


def summary(got: SettlementInstruction | None) -> tuple[object, ...] | None:
    if got is None:
        return None
    return (got.kind, got.settlement_id, got.refund_id, got.amount_minor, got.currency)


@pytest.mark.parametrize(("event_type", "doc", "expected"), STRIPE)
def test_stripe_events_are_the_movements_they_report(
    event_type: str, doc: dict[str, Any], expected: tuple[object, ...] | None
) -> None:
    assert summary(stripe.instruction(event_type, doc)) == expected


PADDLE = [
    ("adjustment.updated", paddle_adjustment(), (K.REFUND, "txn_1", "adj_1", 10887, "USD")),
    ("adjustment.created", paddle_adjustment("credit"), (K.REFUND, "txn_1", "adj_1", 10887, "USD")),
    ("adjustment.updated", paddle_adjustment("chargeback"),
     (K.CHARGEBACK, "txn_1", "adj_1", 10887, "USD")),
    ("adjustment.updated", paddle_adjustment("chargeback_reverse"),
     (K.CHARGEBACK_REVERSAL, "txn_1", "adj_1", 10887, "USD")),
    ("adjustment.created", paddle_adjustment(status="pending_approval"), None),
    ("adjustment.updated", paddle_adjustment(status="rejected"), None),
    ("adjustment.updated", paddle_adjustment("chargeback_warning"), None),
    ("transaction.completed", paddle_transaction(merchant_id="m_1"),
     (K.CAPTURE, "txn_1", None, 1500, "JPY")),
    ("transaction.paid", paddle_transaction(merchant_id="m_1"), None),
]  # fmt: skip


@pytest.mark.parametrize(("event_type", "doc", "expected"), PADDLE)
def test_paddle_events_are_the_movements_they_report(
    event_type: str, doc: dict[str, Any], expected: tuple[object, ...] | None
) -> None:
    got = paddle.instruction(event_type, doc)
    assert summary(got) == expected
    if got is not None and got.kind is K.CAPTURE:
        assert got.merchant_id == "m_1"


def _set(doc: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    node = out
    *parents, last = path.split(".")
    for key in parents:
        node = node[key]
    node[last] = value
    return out


@pytest.mark.parametrize(
    ("module", "event_type", "doc", "error", "field"),
    [
        (paddle, "transaction.completed",
         _set(paddle_transaction(merchant_id="m"), "data.details.totals.grand_total", 1500),
         FieldTypeInvalid, "data.details.totals.grand_total"),
        (paddle, "transaction.completed",
         _set(paddle_transaction(merchant_id="m"), "data.details.totals.grand_total", "15.00"),
         FieldTypeInvalid, "data.details.totals.grand_total"),
        (paddle, "transaction.completed",
         _set(paddle_transaction(merchant_id="m"), "data.details.totals.grand_total", "-1"),
         FieldTypeInvalid, "data.details.totals.grand_total"),
        (paddle, "adjustment.updated", _set(paddle_adjustment(), "data.totals.total", "0"),
         PermanentError, "data.totals.total"),
        (paddle, "adjustment.updated",
         _set(paddle_adjustment(), "data.totals.total", "99999999999999999999999"),
         PermanentError, "data.totals.total"),
        (stripe, "refund.created", stripe_event("x", refund(payment_intent=None)), MissingField,
         "data.object.payment_intent"),
        (stripe, "charge.dispute.funds_withdrawn", stripe_event("x", dispute(amount=-5)),
         PermanentError, "data.object.amount"),
    ],
)  # fmt: skip
def test_bad_fields_are_permanent_errors_naming_the_field(
    module: Any, event_type: str, doc: dict[str, Any], error: type[Exception], field: str
) -> None:
    with pytest.raises(error, match=field.replace(".", r"\.")):
        module.instruction(event_type, doc)


@pytest.mark.parametrize(
    ("merchants", "body", "merchant"),
    [
        ({}, paddle_transaction(merchant_id="m_1"), "m_1"),
        ({"paddle": parse_rules(("/data/customer_id",))},
         {**paddle_transaction(merchant_id="m_1"), "data": {
             **paddle_transaction()["data"], "customer_id": "ctm_9"}}, "ctm_9"),
        # The configured place finds nothing: the scheme's own is not looked at.
        ({"paddle": parse_rules(("/data/customer_id",))}, paddle_transaction(merchant_id="m_1"),
         "m_1"),
    ],
    ids=["the scheme's default", "configured", "configured, nothing there: the mapping's"],
)  # fmt: skip
def test_the_merchant_is_where_the_provider_says(
    merchants: dict[str, Any], body: dict[str, Any], merchant: str
) -> None:
    got = instruction_of("paddle", "transaction.completed", orjson.dumps(body), SCHEMES, merchants)
    assert got is not None and got.merchant_id == merchant


def test_a_capture_without_a_merchant_names_where_it_was_looked_for() -> None:
    with pytest.raises(MissingField, match=r"data\.custom_data\.merchant_id"):
        instruction_of("paddle", "transaction.completed", orjson.dumps(paddle_transaction()),
                       SCHEMES)  # fmt: skip
    rules = {"paddle": parse_rules(("/data/customer_id",))}
    with pytest.raises(MissingField, match=r"data\.customer_id"):
        instruction_of("paddle", "transaction.completed", orjson.dumps(paddle_transaction()),
                       SCHEMES, rules)  # fmt: skip


def test_only_payment_providers_and_services_settle() -> None:
    assert settles("stripe", SCHEMES) and settles("paddle", SCHEMES)
    assert settles("service:billing", SCHEMES)
    assert not settles("github", SCHEMES) and not settles("unknown", SCHEMES)
    assert instruction_of("github", "push", b"not json", SCHEMES) is None


def test_the_movement_table_names_every_kind() -> None:
    listed = {k for types in movement_types().values() for kinds in types.values() for k in kinds}
    operators = {SettlementKind.CREDIT_ADJUSTMENT, SettlementKind.DEBIT_ADJUSTMENT}
    assert listed == set(SettlementKind) - operators  # adjustments: `gateway ledger adjust`


@pytest.mark.skipif(not CORPUS.exists(), reason=f"no corpus at {CORPUS}")
def test_every_real_stripe_and_paddle_payload_is_read_or_parked_with_a_reason() -> None:
    """1,076 real deliveries: a type the mapping names is read into an instruction (or a
    field error naming what the fixture lacks); every other type moves nothing."""
    read: dict[str, int] = {}
    refused: dict[str, set[str]] = {}
    for item in corpus_items():
        if item["provider"] not in ("stripe", "paddle"):
            continue
        doc = orjson.loads(item["body"])
        event_type = doc.get("type") or doc.get("event_type")
        try:
            got = instruction_of(item["provider"], event_type, item["body"].encode(), SCHEMES)
        except PermanentError as exc:
            assert event_type in movement_types()[item["provider"]], (event_type, exc)
            refused.setdefault(event_type, set()).add(str(exc))
            continue
        if got is None:
            continue
        assert event_type in movement_types()[item["provider"]]
        assert got.kind in movement_types()[item["provider"]][event_type]
        assert got.amount_minor > 0 and len(got.currency) == 3
        read[event_type] = read.get(event_type, 0) + 1
    # Paddle's approved refund and Stripe's cancelled intent (a void: it needs no
    # merchant) are read; the payments carry no merchant in these fixtures, and are
    # parked for exactly that, naming the field.
    assert read == {"adjustment.updated": 1, "payment_intent.canceled": 1}
    assert refused["transaction.completed"] == {"missing field: data.custom_data.merchant_id"}
    assert refused["payment_intent.succeeded"] == {
        "missing field: data.object.metadata.merchant_id",
        "data.object.amount_received is 0; amounts must be positive",  # a failed intent
    }


def test_an_internal_payout_names_its_merchant_and_is_its_own_settlement() -> None:
    data: dict[str, Any] = {"payout_id": "po_7", "merchant_id": "m_7", "amount_minor": 900,
                            "currency": "eur"}  # fmt: skip
    doc = {"id": "e1", "data": data}
    got = instruction_of("service:billing", "payout.paid", orjson.dumps(doc), SCHEMES)
    assert summary(got) == (K.PAYOUT, "po_7", "po_7", 900, "EUR")
    assert got is not None and got.merchant_id == "m_7"
    with pytest.raises(MissingField, match=r"data\.merchant_id"):
        del data["merchant_id"]
        instruction_of("service:billing", "payout.paid", orjson.dumps(doc), SCHEMES)


@pytest.mark.parametrize(
    ("field", "body"),
    [
        ("payment id", stripe_event("payment_intent.succeeded",
                                    intent(id="pi_" + "x" * 300, amount_received=10))),
        ("merchant_id", stripe_event("payment_intent.succeeded", intent(
            amount_received=10, metadata={"merchant_id": "m" * 256}))),
        ("movement id", stripe_event("refund.created", refund(id="re_" + "y" * 253))),
    ],
)  # fmt: skip
def test_an_id_longer_than_any_providers_is_a_field_error(field: str, body: dict[str, Any]) -> None:
    """A signed event may carry ids of any length; one past `ID_CHARS_MAX` is parked
    with a field error naming it, never left to fail the database's index."""
    with pytest.raises(FieldTypeInvalid, match=field):
        instruction_of("stripe", body["type"], orjson.dumps(body), SCHEMES)
    at_bound = copy.deepcopy(body)
    obj = at_bound["data"]["object"]
    if field == "merchant_id":
        obj["metadata"]["merchant_id"] = "m" * 255
    else:
        obj["id"] = obj["id"][:255]
    assert instruction_of("stripe", body["type"], orjson.dumps(at_bound), SCHEMES) is not None


def test_an_internal_authorisation_names_its_merchant_and_a_void_need_not() -> None:
    data = {"settlement_id": "s_1", "amount_minor": 500, "currency": "usd"}
    with pytest.raises(MissingField, match="merchant_id"):
        instruction_of("service:billing", "payment.authorized",
                       orjson.dumps({"data": data}), SCHEMES)  # fmt: skip
    got = instruction_of("service:billing", "payment.voided", orjson.dumps({"data": data}), SCHEMES)
    assert summary(got) == (K.VOID, "s_1", "s_1", 500, "USD")


def withdrawal(amount: int, fee: int, currency: str = "usd") -> dict[str, Any]:
    return {"id": "txn_1", "object": "balance_transaction", "amount": amount, "fee": fee,
            "currency": currency, "type": "adjustment"}  # fmt: skip


@pytest.mark.parametrize(
    ("event_type", "transactions", "fee"),
    [
        # As in the corpus: the withdrawal charged Stripe's dispute fee of 15.00.
        ("charge.dispute.funds_withdrawn", [withdrawal(-900, 1500)],
         (K.DISPUTE_FEE, "pi_1", "dp_1", 1500, "USD")),
        # The reinstatement lists the withdrawal too; only a returned fee moves.
        ("charge.dispute.funds_reinstated", [withdrawal(-900, 1500), withdrawal(900, -1500)],
         (K.DISPUTE_FEE_REVERSAL, "pi_1", "dp_1", 1500, "USD")),
        ("charge.dispute.funds_reinstated", [withdrawal(-900, 1500), withdrawal(900, 0)], None),
        ("charge.dispute.funds_withdrawn", [], None),
        # Charged in the platform's balance currency, not the dispute's.
        ("charge.dispute.funds_withdrawn", [withdrawal(-900, 2000, "jpy")],
         (K.DISPUTE_FEE, "pi_1", "dp_1", 2000, "JPY")),
    ],
)  # fmt: skip
def test_a_dispute_carries_the_fee_its_balance_transactions_state(
    event_type: str, transactions: list[dict[str, Any]], fee: tuple[object, ...] | None
) -> None:
    got = stripe.instruction(event_type, stripe_event(event_type, dispute(
        balance_transactions=transactions)))  # fmt: skip
    assert got is not None and got.kind in (K.CHARGEBACK, K.CHARGEBACK_REVERSAL)
    assert summary(got.fee) == fee


def test_a_dispute_fee_in_two_currencies_is_a_field_error() -> None:
    doc = stripe_event("x", dispute(balance_transactions=[
        withdrawal(-900, 1500), withdrawal(-900, 1500, "eur")]))  # fmt: skip
    with pytest.raises(FieldTypeInvalid, match="balance_transactions"):
        stripe.instruction("charge.dispute.funds_withdrawn", doc)


def test_internal_and_paddle_chargebacks_carry_their_stated_fee() -> None:
    data = {"settlement_id": "s_1", "dispute_id": "d_1", "amount_minor": 500, "currency": "eur",
            "fee_minor": 1500, "fee_currency": "usd"}  # fmt: skip
    got = instruction_of("service:b", "payment.chargeback", orjson.dumps({"data": data}), SCHEMES)
    assert got is not None and summary(got.fee) == (K.DISPUTE_FEE, "s_1", "d_1", 1500, "USD")
    doc = paddle_adjustment("chargeback")
    fee = {"amount": "1250", "original": None}
    doc["data"]["payout_totals"] = {"currency_code": "GBP", "chargeback_fee": fee}
    got = paddle.instruction("adjustment.updated", doc)
    assert got is not None and summary(got.fee) == (K.DISPUTE_FEE, "txn_1", "adj_1", 1250, "GBP")
    doc["data"]["payout_totals"]["chargeback_fee"]["amount"] = "0"
    got = paddle.instruction("adjustment.updated", doc)
    assert got is not None and got.fee is None


def _merchant_rules(**provider: Any) -> Any:
    paddle_keys = {"scheme": "paddle", "secrets": ["pdl"], **provider}
    doc = {"database": {"url": "postgresql://127.0.0.1/x"}, "nats": {"url": "nats://x"},
           "providers": {"paddle": paddle_keys}}  # fmt: skip
    return settings_mod.parse(doc, env={}).providers["paddle"].merchant


@pytest.mark.parametrize(
    ("provider", "body", "merchant"),
    [
        # One account, one merchant: every event that names none is its.
        ({"merchant_id": "acme"}, paddle_transaction(), "acme"),
        # The account's merchant whatever the scheme's own pointers would read (a field
        # the provider may not sign).
        ({"merchant_id": "acme"}, paddle_transaction(merchant_id="m_1"), "acme"),
        # With `merchant` set, its pointers first; the fixed one where they find none.
        ({"merchant_id": "acme", "merchant": ["/data/custom_data/merchant_id"]},
         paddle_transaction(merchant_id="m_1"), "m_1"),
        ({"merchant_id": "acme", "merchant": ["/data/customer_id"]},
         paddle_transaction(merchant_id="m_1"), "acme"),
    ],
)  # fmt: skip
def test_a_fixed_merchant_is_the_merchant_of_events_that_name_none(
    provider: dict[str, Any], body: dict[str, Any], merchant: str
) -> None:
    rules = {"paddle": _merchant_rules(**provider)}
    got = instruction_of("paddle", "transaction.completed", orjson.dumps(body), SCHEMES, rules)
    assert got is not None and got.merchant_id == merchant


@pytest.mark.parametrize("value", ["", " acme", "a\nb", "x" * 256, 7])
def test_a_fixed_merchant_is_printable_text(value: Any) -> None:
    with pytest.raises(ConfigError, match="merchant_id"):
        _merchant_rules(merchant_id=value)
