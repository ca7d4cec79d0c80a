"""Braintree's scheme and movements (`core.signatures.braintree`,
`core.providers.braintree.webhooks`), held to Braintree's own library (`braintree`, a
development dependency): `WebhookTestingGateway.sample_notification` signs the pairs
our verifier must accept, `WebhookNotification.parse` must accept what our signer
signs, and both must read the same content."""

from __future__ import annotations

import base64
from decimal import Decimal
from typing import Any
from urllib.parse import parse_qs, urlencode

import braintree  # type: ignore[import-untyped]  # dev lock only: Braintree's own library
import pytest

from gateway.core.bodies.fields import get_decimal_amount
from gateway.core.providers import PROVIDERS
from gateway.core.providers.braintree.payload import ELEMENTS_MAX, document
from gateway.core.providers.braintree.webhooks import BRAINTREE, instruction
from gateway.core.settlement.instructions import SettlementInstruction, SettlementKind
from gateway.core.signatures import braintree as braintree_scheme
from gateway.core.signatures.base import ParamProblem, SchemeParams
from gateway.core.signatures.braintree import PAIRS_MAX, signed_form
from gateway.errors import (
    FieldTypeInvalid,
    PayloadInvalid,
    SignatureMalformed,
    SignatureMismatch,
    SignatureMissing,
)

K = SettlementKind
Kind = braintree.WebhookNotification.Kind
PUBLIC, PRIVATE = "integration_public_key", "integration_private_key"
OTHER_PUBLIC, OTHER_PRIVATE = "rotated_public_key", "rotated_private_key"


def gateway_for(public: str = PUBLIC, private: str = PRIVATE) -> braintree.BraintreeGateway:
    return braintree.BraintreeGateway(
        braintree.Configuration(
            braintree.Environment.Sandbox,
            merchant_id="integration_merchant_id",
            public_key=public,
            private_key=private,
        )
    )


def sample(kind: str, object_id: str = "my_id", gateway: Any = None) -> bytes:
    """The form Braintree's library signs for a sample notification of `kind`."""
    signed = (gateway or gateway_for()).webhook_testing.sample_notification(kind, object_id)
    return urlencode(signed).encode()


def params(*secrets: str) -> SchemeParams:
    return SchemeParams(secrets=secrets or (f"{PUBLIC}:{PRIVATE}",))


def verify(body: bytes, *secrets: str) -> None:
    BRAINTREE.scheme.verify(params(*secrets), {}, body, 0.0)


MONEY_KINDS = (
    Kind.TransactionSettled,
    Kind.TransactionSettlementDeclined,
    Kind.DisputeOpened,
    Kind.DisputeWon,
    Kind.DisputeLost,
    Kind.DisputeAccepted,
    Kind.Disbursement,
    Kind.DisbursementException,
    Kind.RefundFailed,
    Kind.Check,
)


@pytest.mark.parametrize("kind", MONEY_KINDS)
def test_the_librarys_signed_samples_verify(kind: str) -> None:
    verify(sample(kind))


def test_a_rotation_verifies_either_key_pair() -> None:
    rotated = sample(Kind.DisputeOpened, gateway=gateway_for(OTHER_PUBLIC, OTHER_PRIVATE))
    both = (f"{PUBLIC}:{PRIVATE}", f"{OTHER_PUBLIC}:{OTHER_PRIVATE}")
    verify(rotated, *both)
    verify(sample(Kind.DisputeOpened), *both)
    with pytest.raises(SignatureMismatch):
        verify(rotated)  # the old pair alone


def test_a_pair_is_checked_against_its_own_public_key() -> None:
    """A signature made with our private key but offered under another public key does
    not count: the library picks the pair by public key, and so does the verifier."""
    fields = parse_qs(sample(Kind.DisputeOpened).decode())
    signature = fields["bt_signature"][0].replace(PUBLIC, "someone_else")
    body = urlencode({"bt_signature": signature, "bt_payload": fields["bt_payload"][0]})
    with pytest.raises(SignatureMismatch):
        verify(body.encode())


def test_a_tampered_payload_is_refused_by_both() -> None:
    fields = {k: v[0] for k, v in parse_qs(sample(Kind.DisputeOpened).decode()).items()}
    xml = base64.b64decode(fields["bt_payload"]).replace(b"100.00", b"900.00")
    fields["bt_payload"] = base64.encodebytes(xml).decode()
    with pytest.raises(SignatureMismatch):
        verify(urlencode(fields).encode())
    with pytest.raises(braintree.exceptions.InvalidSignatureError):
        gateway_for().webhook_notification.parse(fields["bt_signature"], fields["bt_payload"])


def test_a_payload_whose_final_newline_was_lost_verifies_as_the_library_allows() -> None:
    """Signed with the final newline base64 text ends with, sent without it: the
    library's second try (`payload + b"\n"`), and the verifier's."""
    fields = {k: v[0] for k, v in parse_qs(sample(Kind.Disbursement).decode()).items()}
    assert fields["bt_payload"].endswith("\n")
    fields["bt_payload"] = fields["bt_payload"].rstrip("\n")
    verify(urlencode(fields).encode())
    library_reads(urlencode(fields).encode())
    fields["bt_payload"] += "\n\n"  # two added is another payload, for both
    with pytest.raises(SignatureMismatch):
        verify(urlencode(fields).encode())
    with pytest.raises(braintree.exceptions.InvalidSignatureError):
        library_reads(urlencode(fields).encode())


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (b"", SignatureMissing),
        (b"bt_payload=abc", SignatureMissing),
        (b"bt_signature=a%7Cb", SignatureMissing),
        (b"bt_signature=a&bt_signature=b&bt_payload=x", SignatureMalformed),
        (b"\xff\xfe", SignatureMalformed),
        (b"&".join([b"f%d=1" % i for i in range(40)]), SignatureMalformed),
        (b"bt_signature=" + b"%26".join([b"p%7Cs"] * 17) + b"&bt_payload=x", SignatureMalformed),
        (b"bt_signature=nopipe&bt_payload=abcd", SignatureMismatch),
        # Text `hmac.compare_digest` refuses: never compared, so a mismatch, not a crash.
        (urlencode({"bt_signature": f"{PUBLIC}|{'é' * 40}", "bt_payload": "x"}).encode(),
         SignatureMismatch),
    ],
)  # fmt: skip
def test_bad_forms_are_refused(body: bytes, error: type[Exception]) -> None:
    with pytest.raises(error):
        verify(body)


def test_many_pairs_for_one_key_cost_two_hmacs_of_the_payload(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The payload may be a whole body long: what it is signed with under one key is
    worked out once, however many signatures a form offers for that key."""
    computed: list[bytes] = []
    real = braintree_scheme.signature_of

    def counted(hmac_key: bytes, payload: bytes) -> str:
        computed.append(payload)
        return real(hmac_key, payload)

    monkeypatch.setattr(braintree_scheme, "signature_of", counted)
    offered = "&".join([f"{PUBLIC}|{'0' * 40}"] * PAIRS_MAX)
    body = urlencode({"bt_signature": offered, "bt_payload": "A" * 100_000}).encode()
    with pytest.raises(SignatureMismatch):
        verify(body)
    assert len(computed) == 2  # the payload, and the payload with a newline


@pytest.mark.parametrize("secret", ["no-colon", ":private", "public:", "a|b:c"])
def test_a_secret_that_is_not_a_key_pair_is_a_problem_of_secrets(secret: str) -> None:
    with pytest.raises(ParamProblem) as caught:
        BRAINTREE.scheme.verifier(params(secret))
    assert caught.value.key == "secrets"


def test_what_our_signer_signs_the_library_parses() -> None:
    xml = base64.b64decode(parse_qs(sample(Kind.DisputeWon, "dsp_9").decode())["bt_payload"][0])
    form = {k: v[0] for k, v in parse_qs(signed_form(xml, f"{PUBLIC}:{PRIVATE}").decode()).items()}
    parsed = gateway_for().webhook_notification.parse(form["bt_signature"], form["bt_payload"])
    assert parsed.kind == Kind.DisputeWon and parsed.dispute.id == "dsp_9"
    verify(urlencode(form).encode())


# --- the document, against the library's reading --------------------------------------


def library_reads(body: bytes) -> Any:
    fields = {k: v[0] for k, v in parse_qs(body.decode()).items()}
    return gateway_for().webhook_notification.parse(fields["bt_signature"], fields["bt_payload"])


@pytest.mark.parametrize("kind", MONEY_KINDS)
def test_the_document_reads_what_the_library_reads(kind: str) -> None:
    body = sample(kind, "obj_1")
    ours, theirs = document(body), library_reads(body)
    assert ours["kind"] == theirs.kind
    assert ours["event_id"].startswith(f"{kind}:")
    subject = next(iter(ours["subject"].values()))
    if kind == Kind.Check:  # the Control Panel's test: no subject id
        assert ours["event_id"] == f"check:{ours['timestamp']}"
    else:
        assert subject["id"] == "obj_1"
    for name in ("transaction", "dispute", "disbursement"):
        if name in ours["subject"] and getattr(theirs, name, None) is not None:
            mine, lib = ours["subject"][name], getattr(theirs, name)
            assert Decimal(mine["amount"]) == lib.amount


def test_the_derived_id_is_kind_subject_and_timestamp() -> None:
    doc = document(sample(Kind.DisputeWon, "dsp_7"))
    assert doc["event_id"] == f"dispute_won:dsp_7:{doc['timestamp']}"


_ENTITY = '<!DOCTYPE n [<!ENTITY a "b">]><notification><kind>&a;</kind></notification>'


@pytest.mark.parametrize(
    ("xml", "problem"),
    [
        (b"<notification><kind>x</kind>", "not XML"),
        (b"<other/>", "not a notification"),
        (b'<!DOCTYPE n [<!ENTITY a "b">]><notification>&a;</notification>', "document type"),
        (b"<notification>" + b"<a>" * 20 + b"</a>" * 20 + b"</notification>", "deeper"),
        (b"<notification>" + b"<a/>" * ELEMENTS_MAX + b"</notification>", "elements"),
        # Entities in UTF-16, which a check of the bytes cannot read but expat does:
        # with a byte-order mark, and without one (expat knows it by `<` and a NUL).
        (_ENTITY.encode("utf-16"), "not UTF-8"),
        (_ENTITY.encode("utf-16-le"), "NUL"),
    ],
)  # fmt: skip
def test_a_payload_that_is_not_a_notification_is_payload_invalid(xml: bytes, problem: str) -> None:
    body = urlencode({"bt_signature": "p|s", "bt_payload": base64.encodebytes(xml)}).encode()
    with pytest.raises(PayloadInvalid, match=problem):
        document(body)


def test_a_payload_in_utf8_is_read_as_utf8_whatever_it_declares() -> None:
    xml = '<?xml version="1.0" encoding="ISO-8859-1"?><notification><kind>café</kind>'
    body = urlencode({"bt_payload": base64.encodebytes((xml + "</notification>").encode())})
    assert document(body.encode())["kind"] == "café"


def test_a_payload_outside_base64_is_payload_invalid() -> None:
    with pytest.raises(PayloadInvalid, match="outside base64"):
        document(b"bt_signature=p%7Cs&bt_payload=%3Cxml%3E")


# --- movements ---------------------------------------------------------------------------


def movement(kind: str, object_id: str = "obj_1") -> SettlementInstruction | None:
    doc = document(sample(kind, object_id))
    return instruction(doc["kind"], doc)


def test_money_kinds_are_the_movements_the_module_lists() -> None:
    assert PROVIDERS["braintree"] is BRAINTREE
    settled = movement(Kind.TransactionSettled, "txn_1")
    assert settled is not None
    assert (settled.kind, settled.settlement_id, settled.amount_minor, settled.currency) == (
        K.CAPTURE, "txn_1", 10000, "USD"
    )  # fmt: skip
    assert settled.merchant_id == "ogaotkivejpfayqfeaimuktty"
    opened = movement(Kind.DisputeOpened, "dsp_1")
    assert opened is not None
    assert (opened.kind, opened.settlement_id, opened.refund_id, opened.amount_minor) == (
        K.CHARGEBACK, "dsp_1", "dsp_1", 10000
    )  # fmt: skip
    won = movement(Kind.DisputeWon, "dsp_1")
    assert won is not None and won.kind is K.CHARGEBACK_REVERSAL and won.refund_id == "dsp_1"
    payout = movement(Kind.Disbursement, "dsb_1")
    assert payout is not None
    assert (payout.kind, payout.refund_id, payout.amount_minor, payout.merchant_id) == (
        K.PAYOUT, "dsb_1", 10000, "merchant_account_token"
    )  # fmt: skip
    for silent in (
        Kind.TransactionSettlementDeclined,
        Kind.DisputeLost,
        Kind.DisputeAccepted,
        Kind.DisbursementException,
        Kind.RefundFailed,
        Kind.Check,
    ):
        assert movement(silent) is None, silent


def test_a_settled_credit_is_the_refund_of_its_transaction() -> None:
    doc = document(sample(Kind.TransactionSettled, "txn_r"))
    txn = doc["subject"]["transaction"]
    txn.update(type="credit", refunded_transaction_id="txn_1", amount="25.50")
    found = instruction("transaction_settled", doc)
    assert found is not None
    assert (found.kind, found.settlement_id, found.refund_id, found.amount_minor) == (
        K.REFUND, "txn_1", "txn_r", 2550
    )  # fmt: skip


def test_a_retrieval_moves_nothing() -> None:
    doc = document(sample(Kind.DisputeOpened, "dsp_2"))
    doc["subject"]["dispute"]["kind"] = "retrieval"
    assert instruction("dispute_opened", doc) is None


@pytest.mark.parametrize(
    ("text", "currency", "minor"),
    [
        ("100.00", "USD", 10000),
        ("100", "USD", 10000),
        ("0.5", "USD", 50),
        ("100.000", "USD", 10000),
        ("1500", "JPY", 1500),
        ("1.234", "KWD", 1234),
        ("92233720368547758.07", "USD", 2**63 - 1),
    ],
)
def test_decimal_amounts_are_exact(text: str, currency: str, minor: int) -> None:
    assert get_decimal_amount({"amount": text}, "amount", currency) == minor


@pytest.mark.parametrize(
    ("value", "currency"),
    [
        ("10.005", "USD"),
        ("5.5", "JPY"),
        ("-1.00", "USD"),
        ("1e3", "USD"),
        (" 1.00", "USD"),
        ("1,000.00", "USD"),
        (10.0, "USD"),
        (1000, "USD"),
        ("", "USD"),
        (".5", "USD"),
    ],
)
def test_decimal_amounts_that_are_not_exact_are_refused(value: object, currency: str) -> None:
    with pytest.raises(FieldTypeInvalid):
        get_decimal_amount({"amount": value}, "amount", currency)
