"""Razorpay: the `razorpay` scheme held to Razorpay's own library and its published
vector, and its events as money movements, table-driven.

The vector is razorpay/razorpay-python's `tests/mocks/fake_payment_authorized_webhook.json`
(MIT), kept byte for byte in `vectors/razorpay_payment_authorized.json`: its signature
with the secret `key_secret` is `d60e67fd…66e9` (that repository's
`tests/test_client_utility.py`), and it covers the file's trailing newline, which a
verifier that re-serialises the body loses.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import orjson
import pytest
import razorpay  # type: ignore[import-untyped]  # dev lock only: Razorpay's own verifier

from gateway.core.providers import get_scheme
from gateway.core.providers import razorpay as mapping
from gateway.core.providers.movements import instruction_of
from gateway.core.settlement.instructions import SettlementKind
from gateway.core.signatures import SchemeParams
from gateway.errors import FieldTypeInvalid, MissingField, SignatureMalformed, SignatureMismatch

VECTOR = (Path(__file__).parent / "vectors" / "razorpay_payment_authorized.json").read_bytes()
VECTOR_SIG = "d60e67fd884556c045e9be7dad57903e33efc7172c17c6e3ef77db42d2b366e9"
SCHEME = get_scheme("razorpay")
K = SettlementKind


def theirs(body: bytes, signature: str, secret: str) -> bool:
    """Razorpay's library's answer (it takes the body as text: razorpay-python #121)."""
    try:
        razorpay.Utility(None).verify_webhook_signature(body.decode(), signature, secret)
    except razorpay.errors.SignatureVerificationError:
        return False
    return True


def ours(body: bytes, signature: str, *secrets: str) -> bool:
    headers = {"x-razorpay-signature": signature, "x-razorpay-event-id": "evt_1"}
    try:
        SCHEME.verify(SchemeParams(secrets=secrets), headers, body, 0)
    except (SignatureMismatch, SignatureMalformed):
        return False
    return True


def test_the_published_vector_verifies_with_its_trailing_newline_only() -> None:
    assert VECTOR.endswith(b"}\n")
    assert ours(VECTOR, VECTOR_SIG, "key_secret") and theirs(VECTOR, VECTOR_SIG, "key_secret")
    assert not ours(VECTOR.rstrip(b"\n"), VECTOR_SIG, "key_secret")
    assert not theirs(VECTOR.rstrip(b"\n"), VECTOR_SIG, "key_secret")


@pytest.mark.parametrize(
    ("case", "body", "signed_with", "secrets"),
    [
        ("valid", VECTOR, "s3cret", ("s3cret",)),
        ("tampered", VECTOR.replace(b"1000000", b"1000001"), "s3cret", ("s3cret",)),
        ("rotated: the old secret still accepted", VECTOR, "old", ("new", "old")),
        ("rotated out", VECTOR, "old", ("new",)),
        ("another body", b'{"event":"payment.captured"}', "s3cret", ("s3cret",)),
    ],
)
def test_our_verifier_agrees_with_razorpays(
    case: str, body: bytes, signed_with: str, secrets: tuple[str, ...]
) -> None:
    """Signed by our `sign` over the vector (or a tampered copy), judged by both."""
    headers = SCHEME.sign(SchemeParams(secrets=(signed_with,)), VECTOR, 0, event_id="evt_1")
    signature = headers["X-Razorpay-Signature"]
    agreed = {secret: theirs(body, signature, secret) for secret in secrets}
    assert ours(body, signature, *secrets) == any(agreed.values()), case


def test_a_signature_that_is_not_hex_is_malformed_and_the_type_comes_from_the_body() -> None:
    with pytest.raises(SignatureMalformed):
        SCHEME.verify(SchemeParams(secrets=("s",)), {"x-razorpay-signature": "zz"}, VECTOR, 0)
    params = SchemeParams(secrets=("s",))
    assert (SCHEME.type_ref(params).source, SCHEME.type_ref(params).name) == ("json", "event")
    assert SCHEME.id_ref(params).name == "x-razorpay-event-id"
    assert "x-razorpay-signature" not in SCHEME.stored_headers(params)


def event(event_type: str, **payload: Any) -> dict[str, Any]:
    return {"entity": "event", "event": event_type, "payload": payload, "created_at": 1}


def payment(**extra: Any) -> dict[str, Any]:
    return {"entity": {"id": "pay_1", "amount": 50_000, "currency": "INR",
                       "notes": {"merchant_id": "m_1"}, **extra}}  # fmt: skip


def refund(**extra: Any) -> dict[str, Any]:
    return {"entity": {"id": "rfnd_1", "payment_id": "pay_1", "amount": 10_000,
                       "currency": "INR", **extra}}  # fmt: skip


def dispute(**extra: Any) -> dict[str, Any]:
    return {"entity": {"id": "disp_1", "payment_id": "pay_1", "amount": 50_000,
                       "currency": "INR", "phase": "chargeback", **extra}}  # fmt: skip


# (event type, body, (kind, payment, own id, amount, currency) or None)
CASES = [
    ("payment.authorized", event("payment.authorized", payment=payment()),
     (K.AUTHORISATION, "pay_1", "pay_1", 50_000, "INR")),
    ("payment.captured", event("payment.captured", payment=payment()),
     (K.CAPTURE, "pay_1", None, 50_000, "INR")),
    ("refund.processed", event("refund.processed", refund=refund(), payment=payment()),
     (K.REFUND, "pay_1", "rfnd_1", 10_000, "INR")),
    ("refund.failed", event("refund.failed", refund=refund(), payment=payment()),
     (K.REFUND_REVERSAL, "pay_1", "rfnd_1", 10_000, "INR")),
    ("payment.dispute.lost", event("payment.dispute.lost", dispute=dispute()),
     (K.CHARGEBACK, "pay_1", "disp_1", 50_000, "INR")),
    ("payment.dispute.won", event("payment.dispute.won", dispute=dispute()),
     (K.CHARGEBACK_REVERSAL, "pay_1", "disp_1", 50_000, "INR")),
    # An open dispute holds the amount at Razorpay: the ledger moves it once decided.
    ("payment.dispute.created", event("payment.dispute.created", dispute=dispute()), None),
    ("refund.created", event("refund.created", refund=refund()), None),
    ("order.paid", event("order.paid", payment=payment()), None),
    # Razorpay writes JPY in yen, as ISO does: nothing is shifted.
    ("payment.captured", event("payment.captured", payment=payment(amount=1500, currency="JPY")),
     (K.CAPTURE, "pay_1", None, 1500, "JPY")),
]  # fmt: skip


@pytest.mark.parametrize(("event_type", "doc", "expected"), CASES)
def test_razorpay_events_are_the_movements_they_report(
    event_type: str, doc: dict[str, Any], expected: tuple[object, ...] | None
) -> None:
    got = mapping.instruction(event_type, doc)
    summary = None if got is None else (got.kind, got.settlement_id, got.refund_id,
                                         got.amount_minor, got.currency)  # fmt: skip
    assert summary == expected


def test_the_merchant_is_the_payments_notes_and_a_refund_takes_it_from_there() -> None:
    schemes = {"rzp": "razorpay"}
    body = orjson.dumps(event("payment.captured", payment=payment()))
    got = instruction_of("rzp", "payment.captured", body, schemes)
    assert got is not None and got.merchant_id == "m_1"
    bare = event("payment.captured", payment=payment(notes=[]))
    with pytest.raises(MissingField, match=r"payload\.payment\.entity\.notes\.merchant_id"):
        instruction_of("rzp", "payment.captured", orjson.dumps(bare), schemes)
    refunded = orjson.dumps(event("refund.processed", refund=refund(), payment=payment()))
    got = instruction_of("rzp", "refund.processed", refunded, schemes)
    assert got is not None and got.merchant_id == "m_1"


def test_bad_amounts_are_field_errors_naming_the_field() -> None:
    doc = event("payment.captured", payment=payment())
    as_text = copy.deepcopy(doc)
    as_text["payload"]["payment"]["entity"]["amount"] = "500.00"
    with pytest.raises(FieldTypeInvalid, match=r"payload\.payment\.entity\.amount"):
        mapping.instruction("payment.captured", as_text)
    with pytest.raises(MissingField, match=r"payload\.refund"):
        mapping.instruction("refund.processed", event("refund.processed"))
