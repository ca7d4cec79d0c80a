"""Mollie's classic webhooks, pure: the unsigned scheme, the webhook's form read strictly,
the fetch it asks for, the changes Mollie's answer holds (their ids stable from one
answer to the next), and each change's money movement with exact decimal amounts.

The answers are built from mollie/mollie-api-python's own fixtures (BSD-2-Clause;
`tests/responses/`, commit 32f57a18): `payment_single.json` (the payment, its `_links`
left out), `refunds_list.json` and `refund_single.json` (a refund), and
`payment_chargebacks_list.json` and `chargeback_single.json` (a chargeback, open and
reversed). `payment_canceled.json` is the payment as a cancellation leaves it. Those
fixtures show an `open` payment; its paid and authorised states add the fields
docs.mollie.com's payment object names (`paidAt`, `authorizedAt`, `amountCaptured`).
"""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest

from gateway.core.providers import PROVIDERS, get_provider
from gateway.core.providers.base import Confirmed
from gateway.core.providers.mollie.answer import FOLLOW_UPS_MAX, METADATA_BYTES_MAX, confirmed
from gateway.core.providers.mollie.classic import (
    BODY_BYTES_MAX,
    MOVEMENT_TYPES,
    WEBHOOK_TYPE,
    auth,
    document,
    instruction,
    locate,
)
from gateway.core.providers.movements import instruction_of
from gateway.core.settlement.instructions import SettlementKind
from gateway.core.signatures import SchemeParams
from gateway.core.signatures.mollie.classic import SCHEME
from gateway.errors import (
    ConfirmationMismatch,
    FieldTypeInvalid,
    InvalidAmount,
    MissingField,
    PayloadInvalid,
)

_K = SettlementKind
PAYMENT_ID = "tr_7UhSN1zuXS"
WEBHOOK = {"id": PAYMENT_ID, "type": WEBHOOK_TYPE}

# payment_single.json, without its `_links`.
PAYMENT_SINGLE: dict[str, Any] = {
    "resource": "payment", "id": "tr_7UhSN1zuXS", "mode": "test",
    "createdAt": "2018-03-20T09:13:37+00:00",
    "amount": {"value": "10.00", "currency": "EUR"},
    "description": "Order #12345", "method": "ideal", "metadata": {"order_id": "12345"},
    "status": "open", "isCancelable": False, "expiresAt": "2018-03-20T09:28:37+00:00",
    "details": None, "profileId": "pfl_QkEhN94Ba", "customerId": "cst_8wmqcHMN4U",
    "sequenceType": "recurring", "redirectUrl": "https://webshop.example.org/order/12345/",
    "webhookUrl": "https://webshop.example.org/payments/webhook/",
    "mandateId": "mdt_h3gAaD5zP", "subscriptionId": "sub_rVKGtNd6s3",
}  # fmt: skip
# refunds_list.json's `_embedded.refunds[0]`, without its `_links`.
REFUND: dict[str, Any] = {
    "resource": "refund", "id": "re_4qqhO89gsT", "amount": {"currency": "EUR", "value": "5.95"},
    "status": "pending", "createdAt": "2018-03-14T17:09:02.0Z", "description": "Order",
    "paymentId": "tr_7UhSN1zuXS",
}  # fmt: skip
# payment_chargebacks_list.json's `_embedded.chargebacks[0]`, without its `_links`; its
# amount is in USD, as the fixture has it.
CHARGEBACK: dict[str, Any] = {
    "resource": "chargeback", "id": "chb_n9z0tp", "amount": {"currency": "USD", "value": "43.38"},
    "settlementAmount": {"currency": "EUR", "value": "35.07"},
    "createdAt": "2018-03-14T17:00:52.0Z", "reversedAt": None, "paymentId": "tr_7UhSN1zuXS",
}  # fmt: skip
# chargeback_single.json's `reversedAt`.
REVERSED_AT = "2018-03-14T17:00:55.0Z"


def paid(**changes: Any) -> dict[str, Any]:
    """payment_single.json, paid, with `changes` (`_embedded` among them)."""
    answer = copy.deepcopy(PAYMENT_SINGLE)
    answer.update(status="paid", paidAt="2018-03-13T14:10:00+00:00", isCancelable=False)
    answer["metadata"] = {"order_id": "12345", "merchant_id": "m_1"}
    answer.update(changes)
    return answer


def refund(refund_id: str = "re_4qqhO89gsT", **changes: Any) -> dict[str, Any]:
    return {**copy.deepcopy(REFUND), "id": refund_id, **changes}


def chargeback(chargeback_id: str = "chb_n9z0tp", **changes: Any) -> dict[str, Any]:
    return {**copy.deepcopy(CHARGEBACK), "id": chargeback_id, **changes}


def ids(items: tuple[Confirmed, ...]) -> list[str]:
    return [item.event_id for item in items]


def bodies(items: tuple[Confirmed, ...]) -> list[dict[str, Any]]:
    return [orjson.loads(item.body) for item in items]


# --- the scheme -----------------------------------------------------------------------


def test_the_scheme_checks_nothing_and_sends_only_the_form_content_type() -> None:
    """Unsigned: every request verifies, no header is required or stored, and `gateway
    sign` sends the form's content type alone."""
    params = SchemeParams(secrets=())
    SCHEME.verify(params, {}, b"id=tr_x", 0)
    SCHEME.verifier(params)({}, b"anything", 0)
    assert SCHEME.required_headers(params) == ()
    assert SCHEME.signature_headers(params) == SCHEME.stored_headers(params) == ()
    assert SCHEME.sign(params, b"id=tr_x", 0) == {
        "Content-Type": "application/x-www-form-urlencoded"
    }
    assert SCHEME.authenticates_id(params) is False


def test_a_new_event_id_is_shaped_like_a_payment_id() -> None:
    """`tr_` and ten alphanumerics of the UUID, which the document then accepts."""
    made = SCHEME.new_event_id("0b3e5f1c-8d2a-4c7e-9f10-2a3b4c5d6e7f")
    assert made == "tr_0b3e5f1c8d"
    assert document(f"id={made}".encode())["id"] == made


def test_the_provider_is_registered_as_confirmed_by_a_fetch() -> None:
    provider = get_provider("mollie")
    assert PROVIDERS["mollie"] is provider and provider.scheme is SCHEME
    assert provider.confirmation is not None and provider.document is document
    assert provider.answer.body is None  # Mollie takes any 200: the gateway's JSON


# --- the webhook's form ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "payment_id"),
    [
        pytest.param(b"id=tr_d0b0E3EA3v", "tr_d0b0E3EA3v", id="mollie-guide-example"),
        pytest.param(b"id=tr_x", "tr_x", id="one-character-token"),
        pytest.param(b"id=tr_" + b"a" * 64, "tr_" + "a" * 64, id="64-characters"),
        pytest.param(b"id=%74r_abc", "tr_abc", id="percent-encoded"),
    ],
)
def test_a_webhook_names_its_payment(body: bytes, payment_id: str) -> None:
    assert document(body) == {"id": payment_id, "type": WEBHOOK_TYPE}


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b"", id="empty"),
        pytest.param(b"id=", id="empty-id"),
        pytest.param(b"id=tr_x&id=tr_y", id="two-ids"),
        pytest.param(b"id=tr_x&status=paid", id="an-extra-field"),
        pytest.param(b"status=paid", id="no-id"),
        pytest.param(b"id=tr_x&", id="a-trailing-separator"),
        pytest.param(b"id=ord_kEn1PlbGa", id="an-order-not-a-payment"),
        pytest.param(b"id=re_4qqhO89gsT", id="a-refund"),
        pytest.param(b"id=tr_", id="a-prefix-alone"),
        pytest.param(b"id=tr_" + b"a" * 65, id="65-characters"),
        pytest.param(b"id=tr_abc%0A", id="a-newline"),
        pytest.param(b"id=tr_abc:paid", id="a-confirmed-events-id"),
        pytest.param(b"id=tr_ab+c", id="a-space"),
        pytest.param("id=tr_ab\u00e9".encode(), id="non-ascii"),
        pytest.param(b"id=tr_ab\xff", id="not-utf8"),
        pytest.param(b"id=tr_ab%FF", id="percent-encoded-not-utf8"),
        pytest.param(b"id=tr_x&" + b"a" * BODY_BYTES_MAX, id="over-1-KiB"),
        pytest.param(b'{"id":"tr_x","type":"payment.paid"}', id="json-with-an-id"),
        pytest.param(b"[1]", id="json-not-an-object"),
        pytest.param(b"{not json", id="brace-not-json"),
    ],
)
def test_anything_but_one_payment_id_is_payload_invalid(body: bytes) -> None:
    with pytest.raises(PayloadInvalid):
        document(body)


def test_a_huge_body_is_refused_before_it_is_parsed() -> None:
    """Bounded: a body of 16 MiB is refused by its length (and a huge JSON one too)."""
    with pytest.raises(PayloadInvalid, match="bytes"):
        document(b"id=" + b"a" * (16 << 20))
    with pytest.raises(PayloadInvalid, match="bytes"):
        document(b"{" + b" " * (16 << 20) + b"}")


def test_a_confirmed_events_body_reads_as_itself_and_never_yields_an_id() -> None:
    """Settlement reads every `mollie` row through `document`: a confirmed body comes
    back as it is, without the `id` and `type` a webhook's id and type are read from."""
    (item,) = confirmed(WEBHOOK, paid(metadata=None))
    doc = document(item.body)
    assert doc == orjson.loads(item.body)
    assert "id" not in doc and "type" not in doc


# --- the fetch ------------------------------------------------------------------------


def test_the_fetch_is_the_payment_with_its_refunds_and_chargebacks() -> None:
    assert locate(document(b"id=tr_7UhSN1zuXS")) == (
        "/v2/payments/tr_7UhSN1zuXS?embed=refunds,chargebacks"
    )
    assert auth("test_dHar4XY7LxsDOtmnkVtjNVWXLSlXsM") == {
        "Authorization": "Bearer test_dHar4XY7LxsDOtmnkVtjNVWXLSlXsM"
    }


@pytest.mark.parametrize(
    "doc",
    [
        pytest.param({"id": "tr_x/../../v2/customers", "type": WEBHOOK_TYPE}, id="path"),
        pytest.param({"id": "tr_x?x=1", "type": WEBHOOK_TYPE}, id="query"),
        pytest.param({"id": "tr_x", "type": "payment.paid"}, id="a-confirmed-event"),
        pytest.param({"event_id": "tr_x:paid"}, id="a-confirmed-body"),
        pytest.param("tr_x", id="not-a-document"),
    ],
)
def test_only_a_webhooks_payment_id_is_ever_fetched(doc: Any) -> None:
    with pytest.raises(PayloadInvalid):
        locate(doc)


# --- the changes an answer holds -----------------------------------------------------

# (intent, answer, event ids and types in order)
CHANGES = [
    pytest.param(copy.deepcopy(PAYMENT_SINGLE), [], id="open-nothing"),
    pytest.param({**PAYMENT_SINGLE, "status": "pending"}, [], id="pending-nothing"),
    pytest.param({**PAYMENT_SINGLE, "status": "canceled",
                  "canceledAt": "2018-03-20T09:28:37+00:00"},
                 [], id="canceled-never-authorised-nothing"),
    pytest.param({**PAYMENT_SINGLE, "status": "expired"}, [], id="expired-nothing"),
    pytest.param({**PAYMENT_SINGLE, "status": "failed"}, [], id="failed-nothing"),
    pytest.param(paid(), [("tr_7UhSN1zuXS:paid", "payment.paid")], id="paid"),
    pytest.param({**PAYMENT_SINGLE, "status": "authorized",
                  "authorizedAt": "2018-03-20T09:14:00+00:00"},
                 [("tr_7UhSN1zuXS:authorized", "payment.authorized")], id="authorized"),
    pytest.param(paid(authorizedAt="2018-03-20T09:14:00+00:00"),
                 [("tr_7UhSN1zuXS:authorized", "payment.authorized"),
                  ("tr_7UhSN1zuXS:paid", "payment.paid")], id="authorized-then-captured"),
    pytest.param({**PAYMENT_SINGLE, "status": "canceled",
                  "authorizedAt": "2018-03-20T09:14:00+00:00",
                  "canceledAt": "2018-03-21T09:14:00+00:00"},
                 [("tr_7UhSN1zuXS:authorized", "payment.authorized"),
                  ("tr_7UhSN1zuXS:canceled", "payment.canceled")], id="authorization-released"),
    pytest.param({**PAYMENT_SINGLE, "status": "expired",
                  "authorizedAt": "2018-03-20T09:14:00+00:00"},
                 [("tr_7UhSN1zuXS:authorized", "payment.authorized"),
                  ("tr_7UhSN1zuXS:expired", "payment.expired")], id="authorization-expired"),
] + [
    pytest.param(paid(_embedded={"refunds": [refund(status=s)]}),
                 [("tr_7UhSN1zuXS:paid", "payment.paid")], id=f"refund-{s}-moves-nothing")
    for s in ("queued", "pending", "canceled", "a-status-mollie-adds-later")
] + [
    pytest.param(paid(_embedded={"refunds": [refund(status=s)]}),
                 [("tr_7UhSN1zuXS:paid", "payment.paid"),
                  ("tr_7UhSN1zuXS:refund:re_4qqhO89gsT", "refund.refunded")], id=f"refund-{s}")
    for s in ("processing", "refunded")
] + [
    pytest.param(paid(_embedded={"refunds": [refund(status="failed")]}),
                 [("tr_7UhSN1zuXS:paid", "payment.paid"),
                  ("tr_7UhSN1zuXS:refund:re_4qqhO89gsT", "refund.refunded"),
                  ("tr_7UhSN1zuXS:refund:re_4qqhO89gsT:failed", "refund.failed")],
                 id="refund-failed-is-the-refund-and-its-reversal"),
    pytest.param(paid(_embedded={"chargebacks": [chargeback()]}),
                 [("tr_7UhSN1zuXS:paid", "payment.paid"),
                  ("tr_7UhSN1zuXS:chargeback:chb_n9z0tp", "chargeback.received")],
                 id="chargeback"),
    pytest.param(paid(_embedded={"chargebacks": [chargeback(reversedAt=REVERSED_AT)]}),
                 [("tr_7UhSN1zuXS:paid", "payment.paid"),
                  ("tr_7UhSN1zuXS:chargeback:chb_n9z0tp", "chargeback.received"),
                  ("tr_7UhSN1zuXS:chargeback:chb_n9z0tp:reversed", "chargeback.reversed")],
                 id="chargeback-reversed"),
    pytest.param(paid(_embedded={"refunds": [], "chargebacks": []}),
                 [("tr_7UhSN1zuXS:paid", "payment.paid")], id="empty-lists"),
]  # fmt: skip


@pytest.mark.parametrize(("answer", "expected"), CHANGES)
def test_each_change_that_may_move_money_is_an_event(
    answer: dict[str, Any], expected: list[tuple[str, str]]
) -> None:
    items = confirmed(WEBHOOK, answer)
    assert [(i.event_id, i.event_type) for i in items] == expected
    assert all(orjson.loads(i.body)["event_id"] == i.event_id for i in items)


def test_follow_ups_come_in_the_order_they_happened() -> None:
    """The payment's own changes first, then refunds, chargebacks and reversals by time
    (whatever the order Mollie lists them in), a refund's failure after its refund."""
    answer = paid(_embedded={
        "refunds": [refund("re_late", status="refunded", createdAt="2018-04-02T00:00:00+00:00"),
                    refund("re_early", status="failed", createdAt="2018-03-14T17:09:02.0Z")],
        "chargebacks": [chargeback(reversedAt="2018-04-01T00:00:00Z")],
    })  # fmt: skip
    assert ids(confirmed(WEBHOOK, answer)) == [
        "tr_7UhSN1zuXS:paid",
        "tr_7UhSN1zuXS:chargeback:chb_n9z0tp",  # 2018-03-14T17:00:52
        "tr_7UhSN1zuXS:refund:re_early",  # 2018-03-14T17:09:02
        "tr_7UhSN1zuXS:refund:re_early:failed",
        "tr_7UhSN1zuXS:chargeback:chb_n9z0tp:reversed",  # 2018-04-01
        "tr_7UhSN1zuXS:refund:re_late",  # 2018-04-02
    ]


def test_a_later_answer_repeats_every_earlier_id_and_adds_the_new_ones() -> None:
    """Ids are the payment and what changed: a second webhook's answer, with one more
    refund and a chargeback reversed, names the first answer's changes under the same
    ids (duplicates at the gate) and only the new changes under new ones."""
    first = confirmed(WEBHOOK, paid(_embedded={
        "refunds": [refund(status="processing")], "chargebacks": [chargeback()]}))  # fmt: skip
    second = confirmed(WEBHOOK, paid(_embedded={
        "refunds": [refund(status="refunded"),
                    refund("re_second", status="refunded", createdAt="2018-05-01T00:00:00Z")],
        "chargebacks": [chargeback(reversedAt=REVERSED_AT)]}))  # fmt: skip
    assert set(ids(first)) < set(ids(second))
    assert sorted(set(ids(second)) - set(ids(first))) == [
        "tr_7UhSN1zuXS:chargeback:chb_n9z0tp:reversed",
        "tr_7UhSN1zuXS:refund:re_second",
    ]
    # The same answer twice: the same items, byte for byte.
    assert confirmed(WEBHOOK, paid()) == confirmed(WEBHOOK, paid())


def test_a_body_carries_what_settlement_needs() -> None:
    (capture, taken) = confirmed(WEBHOOK, paid(_embedded={"refunds": [refund(status="refunded")]}))
    assert orjson.loads(capture.body) == {
        "event_id": "tr_7UhSN1zuXS:paid", "event_type": "payment.paid",
        "payment_id": "tr_7UhSN1zuXS", "object": "payment", "object_id": "tr_7UhSN1zuXS",
        "status": "paid", "amount": {"value": "10.00", "currency": "EUR"},
        "at": "2018-03-13T14:10:00+00:00",
        "metadata": {"order_id": "12345", "merchant_id": "m_1"},
    }  # fmt: skip
    assert orjson.loads(taken.body)["object"] == "refund"
    assert orjson.loads(taken.body)["object_id"] == "re_4qqhO89gsT"
    assert orjson.loads(taken.body)["amount"] == {"currency": "EUR", "value": "5.95"}


def test_a_capture_of_part_of_an_authorisation_is_the_amount_captured() -> None:
    answer = paid(authorizedAt="2018-03-20T09:14:00+00:00",
                  amountCaptured={"value": "7.50", "currency": "EUR"})  # fmt: skip
    authorised, captured = bodies(confirmed(WEBHOOK, answer))
    assert authorised["amount"] == {"value": "10.00", "currency": "EUR"}
    assert captured["amount"] == {"value": "7.50", "currency": "EUR"}


def test_the_payments_own_fixture_states_read() -> None:
    """payment_single.json (open) and payment_canceled.json (canceled, never
    authorised) hold no change that moves money."""
    canceled = {**PAYMENT_SINGLE, "status": "canceled",
                "canceledAt": "2018-03-20T09:28:37+00:00", "sequenceType": "oneoff"}  # fmt: skip
    assert confirmed(WEBHOOK, PAYMENT_SINGLE) == ()
    assert confirmed(WEBHOOK, canceled) == ()


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param({**PAYMENT_SINGLE, "id": "tr_other"}, id="another-payment"),
        pytest.param(paid(_embedded={"refunds": [refund(paymentId="tr_other")]}),
                     id="a-refund-of-another-payment"),
        pytest.param(paid(_embedded={"chargebacks": [chargeback(paymentId="tr_other")]}),
                     id="a-chargeback-of-another-payment"),
    ],
)  # fmt: skip
def test_an_answer_about_another_payment_is_a_mismatch(answer: dict[str, Any]) -> None:
    with pytest.raises(ConfirmationMismatch):
        confirmed(WEBHOOK, answer)


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param([PAYMENT_SINGLE], id="a-list"),
        pytest.param({k: v for k, v in PAYMENT_SINGLE.items() if k != "id"}, id="no-id"),
        pytest.param({**PAYMENT_SINGLE, "resource": "order"}, id="an-order"),
        pytest.param({**PAYMENT_SINGLE, "status": None}, id="no-status"),
        pytest.param({**PAYMENT_SINGLE, "amount": "10.00"}, id="amount-not-an-object"),
        pytest.param({**PAYMENT_SINGLE, "amount": {"value": 10, "currency": "EUR"}},
                     id="amount-a-number"),
        pytest.param(paid(paidAt=12), id="a-time-not-a-string"),
        pytest.param(paid(_embedded=[]), id="embedded-a-list"),
        pytest.param(paid(_embedded={"refunds": {}}), id="refunds-an-object"),
        pytest.param(paid(_embedded={"refunds": ["re_x"]}), id="a-refund-not-an-object"),
        pytest.param(paid(_embedded={"refunds": [refund("tr_x")]}), id="a-refund-id-of-a-payment"),
        pytest.param(paid(_embedded={"refunds": [refund(resource="chargeback")]}),
                     id="a-refund-that-is-a-chargeback"),
        pytest.param(paid(_embedded={"refunds": [refund(status="refunded", createdAt="soon")]}),
                     id="a-time-not-iso-8601"),
        pytest.param(paid(_embedded={"chargebacks": [chargeback(createdAt=None)]}),
                     id="a-chargeback-without-time"),
        pytest.param(paid(_embedded={"refunds": [refund(status="pending")] * (FOLLOW_UPS_MAX + 1)}),
                     id="too-many-refunds"),
        pytest.param(paid(metadata={"note": "x" * METADATA_BYTES_MAX}), id="metadata-too-large"),
    ],
)  # fmt: skip
def test_an_answer_that_is_not_a_mollie_payment_is_payload_invalid(answer: Any) -> None:
    with pytest.raises(PayloadInvalid) as info:
        confirmed(WEBHOOK, answer)
    assert not isinstance(info.value, ConfirmationMismatch)


def test_a_document_that_names_no_payment_confirms_nothing() -> None:
    with pytest.raises(PayloadInvalid):
        confirmed({"id": "ord_x", "type": WEBHOOK_TYPE}, paid())


# --- money movements -------------------------------------------------------------------


def body_of(answer: dict[str, Any], event_id: str) -> bytes:
    (found,) = [i.body for i in confirmed(WEBHOOK, answer) if i.event_id == event_id]
    return found


EVERYTHING = paid(
    authorizedAt="2018-03-13T14:05:00+00:00",
    _embedded={
        "refunds": [refund(status="failed")],
        "chargebacks": [chargeback(reversedAt=REVERSED_AT)],
    },
)
ENDED = {**PAYMENT_SINGLE, "status": "expired", "authorizedAt": "2018-03-20T09:14:00+00:00",
         "metadata": {"merchant_id": "m_1"}}  # fmt: skip

# (intent, answer, event id, kind, payment, own id, minor units, currency)
MOVES = [
    pytest.param(EVERYTHING, "tr_7UhSN1zuXS:authorized", _K.AUTHORISATION, "tr_7UhSN1zuXS",
                 1000, "EUR", id="authorised-keyed-by-the-payment"),
    pytest.param(EVERYTHING, "tr_7UhSN1zuXS:paid", _K.CAPTURE, None, 1000, "EUR", id="paid"),
    pytest.param(ENDED, "tr_7UhSN1zuXS:expired", _K.VOID, "tr_7UhSN1zuXS", 1000, "EUR",
                 id="expired-voids"),
    pytest.param(EVERYTHING, "tr_7UhSN1zuXS:refund:re_4qqhO89gsT", _K.REFUND, "re_4qqhO89gsT",
                 595, "EUR", id="refund"),
    pytest.param(EVERYTHING, "tr_7UhSN1zuXS:refund:re_4qqhO89gsT:failed", _K.REFUND_REVERSAL,
                 "re_4qqhO89gsT", 595, "EUR", id="refund-failed"),
    pytest.param(EVERYTHING, "tr_7UhSN1zuXS:chargeback:chb_n9z0tp", _K.CHARGEBACK, "chb_n9z0tp",
                 4338, "USD", id="chargeback"),
    pytest.param(EVERYTHING, "tr_7UhSN1zuXS:chargeback:chb_n9z0tp:reversed",
                 _K.CHARGEBACK_REVERSAL, "chb_n9z0tp", 4338, "USD", id="chargeback-reversed"),
]  # fmt: skip


@pytest.mark.parametrize(("answer", "event_id", "kind", "own", "minor", "currency"), MOVES)
def test_each_event_is_its_movement(
    answer: dict[str, Any],
    event_id: str,
    kind: SettlementKind,
    own: str | None,
    minor: int,
    currency: str,
) -> None:
    """Every movement names the payment; refunds and chargebacks are keyed by their own
    id, the authorisation and its void by the payment; the merchant is the payment's
    `metadata.merchant_id`; the source is the event's id."""
    (item,) = [i for i in confirmed(WEBHOOK, answer) if i.event_id == event_id]
    found = instruction_of("mollie", item.event_type, item.body, {"mollie": "mollie"})
    assert found is not None
    assert (found.settlement_id, found.kind, found.refund_id) == ("tr_7UhSN1zuXS", kind, own)
    assert (found.amount_minor, found.currency) == (minor, currency)
    assert (found.merchant_id, found.source_event_id) == ("m_1", event_id)


def test_the_listed_types_are_the_ones_that_move_money() -> None:
    kinds = {item.event_type for item in confirmed(WEBHOOK, EVERYTHING)}
    kinds |= {item.event_type for item in confirmed(WEBHOOK, ENDED)}
    assert kinds <= set(MOVEMENT_TYPES)
    assert instruction(WEBHOOK_TYPE, WEBHOOK) is None  # the webhook itself never settles
    assert instruction("payment.open", {}) is None


def amount_body(value: object, currency: str) -> dict[str, Any]:
    return {"event_id": "tr_x:paid", "payment_id": "tr_x",
            "amount": {"value": value, "currency": currency}}  # fmt: skip


@pytest.mark.parametrize(
    ("value", "currency", "minor"),
    [
        pytest.param("10.00", "EUR", 1000, id="eur"),
        pytest.param("0.01", "EUR", 1, id="one-cent"),
        pytest.param("100.10", "EUR", 10010, id="payment-providers-md-example"),
        pytest.param("10", "EUR", 1000, id="whole-eur"),
        pytest.param("10.000", "EUR", 1000, id="trailing-zero"),
        pytest.param("1000", "JPY", 1000, id="jpy-no-decimals"),
        pytest.param("150", "ISK", 150, id="isk-no-decimals-as-mollie-writes-it"),
        pytest.param("2500.00", "HUF", 250000, id="huf-two-decimals-at-mollie"),
        pytest.param("1.234", "KWD", 1234, id="kwd-three"),
        pytest.param("92233720368547758.07", "EUR", 2**63 - 1, id="the-ledgers-largest"),
    ],
)
def test_amounts_are_exact(value: str, currency: str, minor: int) -> None:
    found = instruction("payment.paid", amount_body(value, currency) | {"metadata": None})
    assert found is not None and (found.amount_minor, found.currency) == (minor, currency)


@pytest.mark.parametrize(
    ("value", "currency", "error"),
    [
        pytest.param("10.005", "EUR", FieldTypeInvalid, id="too-many-decimals-not-rounded"),
        pytest.param("5.5", "JPY", FieldTypeInvalid, id="jpy-with-decimals"),
        pytest.param("-35.07", "EUR", FieldTypeInvalid, id="negative-settlement-amount"),
        pytest.param("0.00", "EUR", InvalidAmount, id="zero"),
        pytest.param("92233720368547758.08", "EUR", InvalidAmount, id="over-the-ledgers"),
        pytest.param("1" * 30, "EUR", FieldTypeInvalid, id="huge"),
        pytest.param("1e3", "EUR", FieldTypeInvalid, id="exponent"),
        pytest.param(" 10.00", "EUR", FieldTypeInvalid, id="blank"),
        pytest.param("1,000.00", "EUR", FieldTypeInvalid, id="separator"),
        pytest.param(10.0, "EUR", FieldTypeInvalid, id="a-json-number"),
        pytest.param("10.00", "EURO", FieldTypeInvalid, id="not-a-currency"),
        pytest.param(None, "EUR", MissingField, id="no-value"),
    ],
)
def test_amounts_that_are_not_exact_are_refused(
    value: object, currency: str, error: type[Exception]
) -> None:
    with pytest.raises(error):
        instruction("payment.paid", amount_body(value, currency))


def test_a_body_without_its_payment_or_amount_is_refused() -> None:
    with pytest.raises(MissingField):
        instruction("refund.refunded", {"amount": {"value": "1.00", "currency": "EUR"}})
    with pytest.raises(MissingField):
        instruction("refund.refunded", {"payment_id": "tr_x"})
    with pytest.raises(MissingField):
        instruction("refund.refunded", amount_body("1.00", "EUR"))  # no object_id
