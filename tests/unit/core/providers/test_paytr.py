"""PayTR's scheme and provider (`core.signatures.paytr`, `core.providers.paytr`), held
to the rule of PayTR's callback sample code, recomputed here with `hmac` and `base64`:
`base64(HMAC-SHA256(key=merchant_key, msg=merchant_oid + merchant_salt + status +
total_amount))`, a payment link's `callback_id` in front. PayTR's pages show no worked
example with values, so three are pinned as `openssl dgst -sha256 -hmac KEY -binary |
base64` prints them, with the placeholder credentials of PayTR's samples."""

from __future__ import annotations

import base64
import hashlib
import hmac
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

import pytest

from gateway.core.events.shaper import webhook_shaper
from gateway.core.ordering.keys import order_key_of, parse_rules
from gateway.core.providers import PROVIDERS
from gateway.core.providers.movements import instruction_of
from gateway.core.providers.paytr import BODY_BYTES_MAX, PAYTR, document, instruction
from gateway.core.settlement.instructions import SettlementKind
from gateway.core.signatures.base import ParamProblem, SchemeParams
from gateway.core.signatures.paytr import SCHEME, key_pairs, signed_form
from gateway.errors import (
    FieldTypeInvalid,
    InvalidAmount,
    MissingField,
    PayloadInvalid,
    ProviderAmountInvalid,
    SignatureMalformed,
    SignatureMismatch,
    SignatureMissing,
)

#: The placeholders PayTR's sample code writes for the key and the salt.
KEY, SALT = "YYYYYYYYYYYYYY", "ZZZZZZZZZZZZZZ"
OLD_KEY, OLD_SALT = "oldKey4x9Tq2Lm", "oldSalt7Hd5Ry8"
SECRET, OLD = f"{KEY}:{SALT}", f"{OLD_KEY}:{OLD_SALT}"
#: A reason as PayTR writes it, in Turkish ("payment not approved").
REASON = "Ödeme onaylanmadı"  # noqa: RUF001 - Turkish's dotless i, as PayTR sends it


def paytr_hash(fields: dict[str, str], key: str = KEY, salt: str = SALT) -> str:
    """The rule as PayTR's sample writes it, on the posted text."""
    message = (
        fields.get("callback_id", "")
        + fields["merchant_oid"]
        + salt
        + fields["status"]
        + fields["total_amount"]
    )
    mac = hmac.new(key.encode(), message.encode(), hashlib.sha256).digest()
    return base64.b64encode(mac).decode()


def callback(status: str = "success", **extra: str) -> dict[str, str]:
    """A callback's fields as PayTR posts them (unsigned)."""
    fields = {"merchant_oid": "ORD20261201A1", "status": status,
              "total_amount": "3456" if status == "success" else "0"}  # fmt: skip
    if status == "success":
        fields |= {"payment_type": "card", "currency": "TL", "payment_amount": "3400"}
    else:
        fields |= {"failed_reason_code": "2", "failed_reason_msg": REASON,
                   "payment_type": "card"}  # fmt: skip
    return fields | extra


def form(fields: dict[str, str], key: str = KEY, salt: str = SALT) -> bytes:
    return urlencode({**fields, "hash": paytr_hash(fields, key, salt)}).encode()


def verify(body: bytes, *secrets: str) -> None:
    SCHEME.verify(SchemeParams(secrets=secrets or (SECRET,)), {}, body, 0.0)


# --- the hash ---------------------------------------------------------------------------

PINNED = [
    pytest.param({"merchant_oid": "ORD20261201A1", "status": "success", "total_amount": "3456"},
                 "gbuSnCyLQ72ifSXQF6TzwI5EjJVcwUyy0zVfYz0vym4=", id="a success"),
    pytest.param({"merchant_oid": "ORD20261201A2", "status": "failed", "total_amount": "0"},
                 "PRwzcghpJ+G5ZigyI3ZAWCZeQ/47qadq8Hx6jckt/Uc=", id="a failure, + and / in it"),
    pytest.param({"merchant_oid": "LNK9", "status": "success", "total_amount": "10000",
                  "callback_id": "cb77"},
                 "3528oKMcvMrVQrcZnNibaDfY+QxDt/DTVhbrl5EVJNs=", id="a payment link's"),
]  # fmt: skip


@pytest.mark.parametrize(("fields", "expected"), PINNED)
def test_the_pinned_hashes_are_the_rules_and_verify(fields: dict[str, str], expected: str) -> None:
    assert paytr_hash(fields) == expected
    verify(urlencode({**fields, "hash": expected}).encode())


# (intent, fields): each signed by the rule above, each accepted.
GENUINE = [
    ("a success in TL, with the unsigned fields", callback()),
    ("a failure, its Turkish reason outside the hash", callback("failed")),
    ("a success in USD, test mode", callback(currency="USD", test_mode="1")),
    ("a payment link's, its callback_id signed first",
     callback(callback_id="cb77", merchant_id="123456")),
    ("an instalment: more collected than asked", callback(total_amount="3612")),
]  # fmt: skip


@pytest.mark.parametrize(("intent", "fields"), GENUINE, ids=[g[0] for g in GENUINE])
def test_genuine_callbacks_verify(intent: str, fields: dict[str, str]) -> None:
    verify(form(fields))


def with_hash(fields: dict[str, str], hash_text: str) -> bytes:
    return urlencode({**fields, "hash": hash_text}).encode()


GOOD = callback()
GOOD_HASH = paytr_hash(GOOD)
#: A genuine hash with a `+` in it (the pinned failure's).
WITH_PLUS = "PRwzcghpJ+G5ZigyI3ZAWCZeQ/47qadq8Hx6jckt/Uc="
# (intent, body, error)
REFUSED = [
    ("the amount changed after signing",
     with_hash({**GOOD, "total_amount": "345600"}, GOOD_HASH), SignatureMismatch),
    ("a failure turned into a success",
     with_hash(callback("failed") | {"status": "success"}, paytr_hash(callback("failed"))),
     SignatureMismatch),
    ("another order's number", with_hash({**GOOD, "merchant_oid": "ORD2"}, GOOD_HASH),
     SignatureMismatch),
    ("signed with another key", form(GOOD, key="someone-elses"), SignatureMismatch),
    ("signed with another salt", form(GOOD, salt="someone-elses"), SignatureMismatch),
    ("a callback_id added to a signed form", with_hash({**GOOD, "callback_id": "x"}, GOOD_HASH),
     SignatureMismatch),
    ("a link's callback_id taken away",
     with_hash(GOOD, paytr_hash({**GOOD, "callback_id": "cb77"})), SignatureMismatch),
    ("no hash", urlencode(GOOD).encode(), SignatureMissing),
    ("an empty hash", with_hash(GOOD, ""), SignatureMissing),
    ("no merchant_oid", form(GOOD).replace(b"merchant_oid=ORD20261201A1&", b""),
     SignatureMissing),
    ("no total_amount", with_hash({k: v for k, v in GOOD.items() if k != "total_amount"},
                                  GOOD_HASH), SignatureMissing),
    ("an empty body", b"", SignatureMissing),
    ("base64 garbage", with_hash(GOOD, "not*base64!"), SignatureMalformed),
    ("hex, not base64", with_hash(GOOD, "ab" * 32), SignatureMalformed),
    ("31 bytes, not 32", with_hash(GOOD, base64.b64encode(b"x" * 31).decode()),
     SignatureMalformed),
    ("a + sent bare, read as a blank", f"{urlencode(GOOD)}&hash={WITH_PLUS}".encode(),
     SignatureMalformed),
    ("the hash given twice", form(GOOD) + b"&hash=" + GOOD_HASH.encode(), SignatureMalformed),
    ("a body that is not UTF-8", b"merchant_oid=\xff&status=success", SignatureMalformed),
    ("a body that is not a form", b'{"merchant_oid": "A1"}', SignatureMalformed),
]  # fmt: skip


@pytest.mark.parametrize(("intent", "body", "error"), REFUSED, ids=[r[0] for r in REFUSED])
def test_bad_callbacks_are_refused(intent: str, body: bytes, error: type[Exception]) -> None:
    with pytest.raises(error):
        verify(body)


def test_a_rotation_accepts_either_pair_and_signing_uses_the_first() -> None:
    verify(form(GOOD, OLD_KEY, OLD_SALT), SECRET, OLD)
    verify(form(GOOD), SECRET, OLD)
    with pytest.raises(SignatureMismatch):
        verify(form(GOOD, OLD_KEY, OLD_SALT))  # the new pair alone
    assert PAYTR.sign_body is not None
    signed = PAYTR.sign_body(SchemeParams(secrets=(SECRET, OLD)), urlencode(GOOD).encode())
    verify(signed, SECRET)
    with pytest.raises(SignatureMismatch):
        verify(signed, OLD)


def test_every_pair_is_compared_even_after_a_match(monkeypatch: pytest.MonkeyPatch) -> None:
    """No early exit: the time taken does not tell which pair matched."""
    compared: list[bytes] = []
    real = hmac.compare_digest

    def counting(a: bytes, b: bytes) -> bool:
        compared.append(a)
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", counting)  # as the scheme calls it
    verify(form(GOOD), SECRET, OLD, "third:pair")
    assert len(compared) == 3


@pytest.mark.parametrize("secret", ["nocolon", ":salt", "key:", "key :salt", "key:salt\n", ""])
def test_a_secret_that_is_not_key_and_salt_stops_the_start_up(secret: str) -> None:
    with pytest.raises(ParamProblem) as info:
        key_pairs((secret,))
    assert info.value.key == "secrets"
    assert secret.strip() == "" or secret.strip() not in str(info.value)
    with pytest.raises(ValueError, match="MERCHANT_KEY:MERCHANT_SALT"):
        SCHEME.verifier(SchemeParams(secrets=(SECRET, secret)))


def test_signing_builds_the_form_paytr_posts() -> None:
    """`gateway sign paytr` takes the unsigned form and gives it PayTR's hash (replacing
    a stale one), the fields in their order; the scheme only names the content type."""
    params = SchemeParams(secrets=(SECRET,))
    body = urlencode(GOOD).encode()
    assert PAYTR.sign_body is not None
    assert PAYTR.sign_body(params, body) == form(GOOD)
    assert PAYTR.sign_body(params, with_hash(GOOD, "stale")) == form(GOOD)
    assert signed_form(GOOD, SECRET) == form(GOOD)
    headers = SCHEME.sign(params, form(GOOD), 0)
    assert headers == {"Content-Type": "application/x-www-form-urlencoded"}


@pytest.mark.parametrize(
    ("params", "body", "message"),
    [
        (SchemeParams(secrets=()), urlencode(GOOD).encode(), "secrets is empty"),
        (SchemeParams(secrets=("no-pair",)), urlencode(GOOD).encode(), "MERCHANT_KEY"),
        (SchemeParams(secrets=(SECRET,)), b"status=success&total_amount=1", "merchant_oid"),
        (SchemeParams(secrets=(SECRET,)), b"\xff", "not a PayTR callback's form"),
    ],
)
def test_signing_refuses_what_it_cannot_sign(
    params: SchemeParams, body: bytes, message: str
) -> None:
    assert PAYTR.sign_body is not None
    with pytest.raises(ValueError, match=message):
        PAYTR.sign_body(params, body)
    if not params.secrets:
        with pytest.raises(ValueError, match=message):
            SCHEME.sign(params, body, 0)


# --- the form, its id, type and order key ------------------------------------------------


def test_the_provider_is_registered_as_paytr_answers_ok_and_signs_its_id() -> None:
    assert PROVIDERS["paytr"] is PAYTR and PAYTR.title == "PayTR"
    assert PAYTR.answer.body == b"OK" and PAYTR.answer.content_type.startswith(b"text/plain")
    assert PAYTR.refused_status == 401 and PAYTR.document is document
    params = SchemeParams(secrets=(SECRET,))
    assert SCHEME.authenticates_id(params) and SCHEME.replay_digest(params, {}, b"") is None
    assert SCHEME.required_headers(params) == () == SCHEME.signature_headers(params)


@pytest.mark.parametrize(
    ("fields", "event_id", "event_type"),
    [
        (callback(), "ORD20261201A1:success", "success"),
        (callback("failed"), "ORD20261201A1:failed", "failed"),
        (callback(callback_id="cb77"), "ORD20261201A1:success", "success"),
    ],
)
def test_each_outcome_of_an_order_is_its_own_event(
    fields: dict[str, str], event_id: str, event_type: str
) -> None:
    """A failed result and a later success of one order are two events; a repeat of
    either is the same one (a duplicate at the gate)."""
    params = SchemeParams(secrets=(SECRET,))
    shape = webhook_shaper("paytr", SCHEME.id_ref(params), SCHEME.type_ref(params),
                           order_rules=PAYTR.order_keys, ordered=lambda _: True,
                           decode=document)  # fmt: skip
    event = shape({}, form(fields), datetime.now(UTC), None)
    assert (event.event_id, event.event_type, event.failure) == (event_id, event_type, None)
    assert event.subject == f"webhooks.paytr.{event_type}"
    assert event.order_key == "ORD20261201A1"
    assert order_key_of(PAYTR.order_keys, event_type, document(form(fields))) == "ORD20261201A1"


def test_the_form_is_read_as_fields_extra_ones_kept() -> None:
    doc = document(form(callback(installment_count="3", utoken="u1")))
    assert (doc["installment_count"], doc["utoken"], doc["currency"]) == ("3", "u1", "TL")
    assert document(form(callback("failed")))["failed_reason_msg"] == REASON


BAD_FORMS = [
    ("over the size bound", urlencode({**GOOD, "pad": "x" * BODY_BYTES_MAX}).encode()),
    ("a field given twice", urlencode(GOOD).encode() + b"&status=failed"),
    ("not UTF-8", b"merchant_oid=A1&failed_reason_msg=%FF%FE&status=failed"),
    ("raw bytes not UTF-8", b"merchant_oid=\xc3\x28&status=failed"),
    ("more fields than any callback", "&".join(f"f{i}=1" for i in range(40)).encode()),
    ("an item without =", b"merchant_oid=A1&status"),
]


@pytest.mark.parametrize(("intent", "body"), BAD_FORMS, ids=[b[0] for b in BAD_FORMS])
def test_bodies_that_are_not_a_callbacks_form_are_payload_invalid(intent: str, body: bytes) -> None:
    with pytest.raises(PayloadInvalid):
        document(body)


# --- money ------------------------------------------------------------------------------

K = SettlementKind


@pytest.mark.parametrize(
    ("fields", "amount", "currency"),
    [
        pytest.param(callback(), 3456, "TRY", id="TL is TRY, 34.56 is 3456 kurus"),
        pytest.param(callback(currency="TRY"), 3456, "TRY", id="TRY as step 1 accepts it"),
        pytest.param({k: v for k, v in callback().items() if k != "currency"}, 3456, "TRY",
                     id="no currency is TL"),
        pytest.param(callback(currency=""), 3456, "TRY", id="a blank currency is TL"),
        pytest.param(callback(currency="USD"), 3456, "USD", id="USD"),
        pytest.param(callback(currency="EUR", total_amount="1"), 1, "EUR", id="one cent of EUR"),
        pytest.param(callback(currency="RUB", test_mode="0"), 3456, "RUB", id="RUB, live"),
        pytest.param(callback(total_amount="3612", payment_amount="3456"), 3612, "TRY",
                     id="instalments: what was collected, not what was asked"),
        pytest.param(callback(total_amount="9223372036854775807"), 2**63 - 1, "TRY",
                     id="the ledgers' largest amount"),
    ],
)  # fmt: skip
def test_a_success_is_the_capture_of_total_amount(
    fields: dict[str, str], amount: int, currency: str
) -> None:
    found = instruction("success", document(form(fields)))
    assert found is not None
    assert (found.kind, found.settlement_id, found.refund_id) == (K.CAPTURE, "ORD20261201A1", None)
    assert (found.amount_minor, found.currency) == (amount, currency)
    assert found.source_event_id == "ORD20261201A1:success" and found.merchant_id is None


@pytest.mark.parametrize(
    ("event_type", "fields"),
    [
        ("failed", callback("failed")),
        ("success", callback(test_mode="1")),  # a test payment is never paid out
        ("pending", callback()),  # no such outcome: nothing guessed
    ],
)
def test_what_moves_nothing(event_type: str, fields: dict[str, str]) -> None:
    assert instruction(event_type, document(form(fields))) is None


BAD_MONEY: list[tuple[str, Any, type[Exception]]] = [
    ("a decimal amount", callback(total_amount="34.56"), FieldTypeInvalid),
    ("a negative amount", callback(total_amount="-3456"), FieldTypeInvalid),
    ("a blank amount", callback(total_amount=" 3456"), FieldTypeInvalid),
    ("a zero success", callback(total_amount="0"), InvalidAmount),
    ("wider than the ledgers", callback(total_amount="9223372036854775808"), InvalidAmount),
    ("21 digits", callback(total_amount="1" * 21), InvalidAmount),
    ("no amount", {k: v for k, v in callback().items() if k != "total_amount"}, MissingField),
    ("no order", {k: v for k, v in callback().items() if k != "merchant_oid"}, MissingField),
    ("a currency without decimals", callback(currency="JPY"), ProviderAmountInvalid),
    ("a currency of thousandths", callback(currency="KWD"), ProviderAmountInvalid),
    ("not a currency code", callback(currency="T"), FieldTypeInvalid),
    ("lira in lower case", callback(currency="tl"), FieldTypeInvalid),
    ("not a form at all", ["merchant_oid"], PayloadInvalid),
]  # fmt: skip


@pytest.mark.parametrize(("intent", "doc", "error"), BAD_MONEY, ids=[b[0] for b in BAD_MONEY])
def test_amounts_and_currencies_it_cannot_read_exactly_are_refused(
    intent: str, doc: Any, error: type[Exception]
) -> None:
    with pytest.raises(error):
        instruction("success", doc)


SCHEMES = {"paytr": "paytr"}


def test_the_merchant_comes_from_the_setting_or_the_success_is_parked() -> None:
    """A callback names no merchant: `[providers.NAME] merchant` says where one is (a
    link's `merchant_id`); without it a success is `MissingField` (parked), and a
    failure, which moves nothing, needs none."""
    link = form(callback(callback_id="cb77", merchant_id="123456"))
    merchants = {"paytr": parse_rules(("/merchant_id",))}
    found = instruction_of("paytr", "success", link, SCHEMES, merchants)
    assert found is not None and found.merchant_id == "123456"
    with pytest.raises(MissingField, match="merchant_id"):
        instruction_of("paytr", "success", form(callback()), SCHEMES)
    with pytest.raises(MissingField, match="merchant_id"):  # pointed at, but absent
        instruction_of("paytr", "success", form(callback()), SCHEMES, merchants)
    assert instruction_of("paytr", "failed", form(callback("failed")), SCHEMES) is None
