"""Zarinpal's pure parts: the callback read strictly, the merchant's order signature,
what each verify answer means, the settled amount in rials, the unverified list read
as callbacks, and where the payer's browser is sent."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

import orjson
import pytest

from gateway import settings as settings_mod
from gateway.adapters.provider_api.zarinpal_unverified import callback_of, listed_payment
from gateway.core.confirm.decisions import within_deadline
from gateway.core.providers.base import ApiCredentials
from gateway.core.providers.zarinpal import (
    NOK_TYPE,
    OK_TYPE,
    VERIFIED_TYPE,
    ZARINPAL,
    confirmed,
    document,
    inquiry_status,
    instruction,
    kept_answer,
    sign_callback,
    verify_request,
    vouched,
)
from gateway.core.signatures.base import SchemeParams
from gateway.core.signatures.zarinpal import SCHEME, order_signature
from gateway.errors import (
    ConfigError,
    ConfirmationMismatch,
    ConfirmationNotFound,
    ErrorClass,
    PayloadInvalid,
    SignatureMalformed,
    SignatureMismatch,
    SignatureMissing,
    VerifyAmountMismatch,
)
from gateway.ingest.callbacks import return_location

SECRET = "order-secret"
#: The order signature of `ORDER` with `SECRET`, pinned: computed once with
#: `printf 'zarinpal-order\no_1\n150000\nIRT\nm_1' | openssl dgst -sha256 -hmac order-secret`,
#: so a change of what is signed, which every merchant's integration signs the same
#: way, fails here.
SIG = "5692a09a65c8615a76397803bfe06d04c40873f99be050bc2eca0b3b190bf942"
AUTH = "A00000000000000000000000000000123456"
ORDER = {"order": "o_1", "amount": "150000", "currency": "IRT", "merchant": "m_1"}


def query(**changes: str | None) -> bytes:
    fields: dict[str, str] = {**ORDER, "sig": order_signature(SECRET, ORDER),
                              "Authority": AUTH, "Status": "OK"}  # fmt: skip
    for name, value in changes.items():
        if value is None:
            fields.pop(name, None)
        else:
            fields[name] = value
    return urlencode(fields).encode()


def test_an_ok_callback_reads_as_its_authority_and_order() -> None:
    assert document(query()) == {
        "id": f"{AUTH}:order:o_1", "type": OK_TYPE, "authority": AUTH, "order": "o_1",
        "amount": 150_000, "currency": "IRT", "merchant": "m_1", "sig": SIG,
    }  # fmt: skip


def test_a_nok_callback_is_keyed_apart_from_the_ok() -> None:
    doc = document(query(Status="NOK"))
    assert (doc["id"], doc["type"]) == (f"{AUTH}:order:o_1:NOK", NOK_TYPE)
    assert not ZARINPAL.confirmation or not ZARINPAL.confirmation.owed(NOK_TYPE)
    assert ZARINPAL.confirmation is not None and ZARINPAL.confirmation.owed(OK_TYPE)


@pytest.mark.parametrize(
    "body",
    [
        query(Status="ok"),
        query(Status=None),
        query(Authority="A-1"),
        query(Authority="A1"),  # too short
        query(Authority=None),
        query(amount="0150000"),
        query(amount="1.5"),
        query(amount="-1"),
        query(amount="1" * 19),
        query(currency="USD"),
        query(currency="irr"),
        query(order="o 1"),
        query(merchant=""),
        query(extra="1"),
        query() + b"&Status=OK",  # a field twice
        b"\xff=1",
        b"x" * 3000,
        b'{"id": "A1", "type": "payment.verified"}',  # JSON may never carry an id
        b"{not json",
    ],
)
def test_a_callback_that_is_not_zarinpals_is_refused(body: bytes) -> None:
    with pytest.raises(PayloadInvalid):
        document(body)


def verify(body: bytes, secrets: tuple[str, ...] = (SECRET,)) -> None:
    SCHEME.verify(SchemeParams(secrets=secrets), {}, body, 0.0)


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (query(sig=None), SignatureMissing),
        (query(order=None), SignatureMissing),
        (query(sig="00"), SignatureMalformed),
        (query(sig="A" * 64), SignatureMalformed),  # upper-case hex is not what we write
        (query(amount="15"), SignatureMismatch),
        (query(currency="IRR"), SignatureMismatch),  # the same number, rials not tomans
        (query(merchant="m_2"), SignatureMismatch),
        (query(order="o_1\nx"), SignatureMalformed),
        (b"a=1&a=2", SignatureMalformed),
    ],
)
def test_an_order_not_signed_by_the_merchant_is_refused(
    body: bytes, error: type[Exception]
) -> None:
    with pytest.raises(error):
        verify(body)


def test_the_order_signature_verifies_with_any_secret_of_a_rotation() -> None:
    verify(query(), (SECRET,))
    verify(query(), ("new-secret", SECRET))
    verify(query(Authority="Aanother1234", Status="NOK"))  # Authority and Status unsigned
    with pytest.raises(SignatureMismatch):
        verify(query(), ("new-secret",))


def test_gateway_sign_writes_the_signed_order() -> None:
    unsigned = urlencode(ORDER).encode()
    signed = sign_callback(SchemeParams(secrets=(SECRET,)), unsigned)
    verify(signed + f"&Authority={AUTH}&Status=OK".encode())


OK_DOC = document(query())


def answer(code: int, ok: bool = True) -> dict[str, Any]:
    if ok:
        data = {"code": code, "message": "Verified", "ref_id": 201,
                "card_pan": "502229******5995", "card_hash": "1E"}  # fmt: skip
        return {"data": data, "errors": []}
    return {"data": [], "errors": {"code": code, "message": "no", "validations": []}}


@pytest.mark.parametrize("code", [100, 101])
def test_verified_now_or_before_is_the_payment_verified(code: int) -> None:
    (found,) = confirmed(OK_DOC, answer(code))
    assert (found.event_id, found.event_type) == (f"{AUTH}:verified", VERIFIED_TYPE)
    body = orjson.loads(found.body)
    assert body == {"authority": AUTH, "order": "o_1", "merchant": "m_1", "amount": 150_000,
                    "currency": "IRT", "ref_id": 201, "code": code}  # fmt: skip
    assert "card_pan" not in body and "card_hash" not in body  # no card data kept


@pytest.mark.parametrize(
    ("doc", "error"),
    [
        (answer(-50, ok=False), VerifyAmountMismatch),
        (answer(-51, ok=False), ConfirmationNotFound),
        (answer(-54, ok=False), ConfirmationNotFound),
        (answer(-55, ok=False), ConfirmationNotFound),
        (answer(-9, ok=False), ConfirmationMismatch),
        (answer(-11, ok=False), ConfirmationMismatch),
        ({"data": {"code": 100}}, PayloadInvalid),  # verified, but no ref_id
        ({"data": [], "errors": []}, PayloadInvalid),
        ([], PayloadInvalid),
    ],
)
def test_each_refusal_has_its_class(doc: Any, error: type[Exception]) -> None:
    with pytest.raises(error):
        confirmed(OK_DOC, doc)


def test_the_classes_of_the_refusals() -> None:
    assert VerifyAmountMismatch.error_class is ErrorClass.VERIFY_AMOUNT_MISMATCH
    assert ConfirmationNotFound.error_class is ErrorClass.CONFIRMATION_NOT_FOUND


def test_verify_sends_the_orders_amount_in_its_own_unit() -> None:
    credentials = ApiCredentials("merchant-uuid", (SECRET,), "n")
    asked = verify_request(OK_DOC, credentials)
    assert (asked.method, asked.path) == ("POST", "/pg/v4/payment/verify.json")
    assert asked.content is not None
    assert orjson.loads(asked.content) == {
        "merchant_id": "merchant-uuid", "amount": 150_000, "authority": AUTH}  # fmt: skip
    assert asked.headers == {"Content-Type": "application/json"}
    with pytest.raises(PayloadInvalid):
        verify_request(document(query(Status="NOK")), credentials)


@pytest.mark.parametrize(
    ("amount", "currency", "minor"),
    [(150_000, "IRT", 150_000_000), (150_000, "IRR", 15_000_000), (1, "IRR", 100)],
)
def test_a_verified_payment_settles_in_rials(amount: int, currency: str, minor: int) -> None:
    body = {"authority": AUTH, "order": "o", "merchant": "m_1", "amount": amount,
            "currency": currency, "ref_id": 1, "code": 100}  # fmt: skip
    found = instruction(VERIFIED_TYPE, body)
    assert found is not None
    assert (found.amount_minor, found.currency, found.merchant_id) == (minor, "IRR", "m_1")
    assert instruction(OK_TYPE, OK_DOC) is None


@pytest.mark.parametrize(
    ("doc", "status"),
    [
        ({"data": {"code": 100, "status": "PAID"}}, "PAID"),
        ({"data": {"code": 100, "status": "REVERSED"}}, "REVERSED"),
        ({"data": [], "errors": {"code": -54}}, "unknown (code -54)"),
        ({"data": {"status": "x" * 200}}, "unknown"),
        ("nonsense", "unknown"),
    ],
)
def test_the_inquirys_status_is_read_or_said_unknown(doc: Any, status: str) -> None:
    assert inquiry_status(doc) == status


def test_an_unverified_payment_reads_as_the_callback_its_payer_would_have_brought() -> None:
    url = "https://gw.example/callbacks/zarinpal?" + query(Authority=None, Status=None).decode()
    entry = {"authority": AUTH, "amount": 150_000, "callback_url": url, "date": "x"}
    assert document(callback_of(entry)) == OK_DOC
    listed = listed_payment(entry, SCHEME.verifier(SchemeParams(secrets=(SECRET,))))
    assert (listed.event_id, listed.event_type, listed.failure) == (
        f"{AUTH}:order:o_1", OK_TYPE, None)  # fmt: skip


@pytest.mark.parametrize(
    "entry",
    [
        {"authority": AUTH, "callback_url": "https://shop.example/cb?id=9"},
        # An order nobody signed, or signed with another secret: never taken.
        {
            "authority": AUTH,
            "callback_url": "https://gw.example/callbacks/zarinpal?"
            "order=o1&amount=1000&currency=IRR&merchant=anyone",
        },
        {
            "authority": AUTH,
            "callback_url": "https://gw.example/callbacks/zarinpal?"
            + query(Authority=None, Status=None, sig=order_signature("other", ORDER)).decode(),
        },
        {"authority": AUTH},
        {"callback_url": "https://gw.example/callbacks/zarinpal"},
        "not an object",
    ],
)
def test_an_unverified_payment_of_another_integration_is_parked(entry: Any) -> None:
    listed = listed_payment(entry, SCHEME.verifier(SchemeParams(secrets=(SECRET,))))
    assert listed.failure is not None and listed.event_type is None


@pytest.mark.parametrize(
    ("url", "location"),
    [
        ("https://shop.example/done", "https://shop.example/done?order=o_1&status=OK"),
        ("https://shop.example/done?lang=fa",
         "https://shop.example/done?lang=fa&order=o_1&status=OK"),
    ],
)  # fmt: skip
def test_the_browser_is_sent_on_with_its_order_and_status(url: str, location: str) -> None:
    assert return_location(url, query()) == location


NOW = datetime(2026, 12, 7, 10, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("deadline_s", "age_s", "delay_s", "delay"),
    [(None, 10_000, 10, 10), (900, 0, 10, 10), (900, 880, 10, 10),
     (900, 890, 10, 5),  # shortened: the try still comes 5 s before the deadline
     (900, 895, 10, None), (900, 1000, 0, None),
     (2, 0, 10, 1.8)],  # a short deadline keeps a tenth of itself
)  # fmt: skip
def test_a_retry_is_fitted_before_the_deadline_or_not_made(
    deadline_s: float | None, age_s: float, delay_s: float, delay: float | None
) -> None:
    received = NOW - timedelta(seconds=age_s)
    found = within_deadline(deadline_s, received, delay_s, NOW.timestamp())
    assert found == (None if delay is None else pytest.approx(delay))


def base(**provider: Any) -> dict[str, Any]:
    return {"database": {"url": "postgresql://127.0.0.1/x"}, "nats": {"url": "nats://x"},
            "providers": {"zp": {"scheme": "zarinpal", "secrets": [SECRET],
                                 "api_key_env": "ZP", **provider}}}  # fmt: skip


@pytest.mark.parametrize(
    ("keys", "problem"),
    [
        ({}, "return_url"),
        ({"return_url": "ftp://shop.example/x"}, "return_url"),
        ({"return_url": "/done"}, "return_url"),
        ({"return_url": "https://shop.example/x#top"}, "return_url"),
        ({"return_url": "https://shop.example/x\r\nSet-Cookie: a=b"}, "return_url"),
        ({"return_url": "https://shop.example/ä"}, "return_url"),
        ({"return_url": "https://shop.example/" + "x" * 2000}, "return_url"),
        ({"return_url": "https://s.example/", "verify_deadline_s": 0}, "verify_deadline_s"),
        ({"return_url": "https://s.example/", "verify_deadline_s": 90_000}, "verify_deadline_s"),
        ({"return_url": "https://s.example/", "verify_deadline_s": True}, "verify_deadline_s"),
    ],
)
def test_the_providers_settings_are_checked(keys: dict[str, Any], problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        settings_mod.parse(base(**keys), env={"ZP": "merchant"})


def test_the_deadline_setting_replaces_the_providers_own() -> None:
    settings = settings_mod.parse(
        base(return_url="https://s.example/", verify_deadline_s=60), env={"ZP": "m"}
    )
    provider = settings.providers["zp"]
    assert provider.return_url == "https://s.example/"
    assert provider.confirmation is not None and provider.confirmation.deadline_s == 60
    other = {"database": {"url": "postgresql://127.0.0.1/x"}, "nats": {"url": "nats://x"},
             "providers": {"s": {"scheme": "stripe", "secrets": ["whsec_x"],
                                 "return_url": "https://s.example/"}}}  # fmt: skip
    with pytest.raises(ConfigError, match="return_url"):
        settings_mod.parse(other, env={})


def test_the_order_signature_is_the_pinned_one() -> None:
    assert order_signature(SECRET, ORDER) == SIG


def listing(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"data": {"code": 100, "message": "Success", "authorities": list(entries)},
            "errors": []}  # fmt: skip


def entry(authority: str = AUTH, **changes: str | None) -> dict[str, Any]:
    url = "https://gw.example/callbacks/zarinpal?" + query(
        Authority=None, Status=None, **changes).decode()  # fmt: skip
    return {"authority": authority, "amount": 150_000, "callback_url": url, "referer": "",
            "date": "2026-12-07 10:00:00"}  # fmt: skip


@pytest.mark.parametrize(
    ("answer", "vouches"),
    [
        (listing(entry()), True),
        (listing(entry("Aother000000"), entry()), True),
        (listing(), False),  # never paid, forged, or verified already
        (listing(entry("Aother000000")), False),
    ],
)
def test_the_list_of_unverified_payments_vouches_for_the_callbacks_order(
    answer: dict[str, Any], vouches: bool
) -> None:
    assert vouched(OK_DOC, answer) is vouches


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        # The Authority was paid for another order: a signed order sent with it.
        (listing(entry(order="o_2", sig=order_signature(SECRET, {**ORDER, "order": "o_2"}))),
         ConfirmationMismatch),
        (listing(entry(amount="15")), ConfirmationMismatch),
        (listing(entry(sig="0" * 64)), ConfirmationMismatch),
        (listing({"authority": AUTH, "callback_url": 7}), ConfirmationMismatch),
        ({"data": [], "errors": {"code": -11, "message": "no"}}, PayloadInvalid),
        ({"data": {"code": 100, "authorities": "x"}}, PayloadInvalid),
    ],
)  # fmt: skip
def test_a_list_that_does_not_vouch_for_the_order_is_refused(
    answer: dict[str, Any], error: type[Exception]
) -> None:
    with pytest.raises(error):
        vouched(OK_DOC, answer)


def test_no_card_data_is_kept_of_an_answer() -> None:
    kept = orjson.loads(kept_answer(orjson.dumps(answer(100))))
    assert kept["data"] == {"code": 100, "message": "Verified", "ref_id": 201}
    assert kept_answer(b"not json") == b"not json"


@pytest.mark.parametrize(
    ("scheme", "value"),
    [("iyzico", "33821x2"), ("iyzico", "1" * 21), ("iyzico", ""), ("paddle", "3382172")],
)
def test_iyzicos_merchant_id_is_digits_and_iyzicos_alone(scheme: str, value: str) -> None:
    """`iyzico_merchant_id` (iyzico's MID, signed into subscription notifications)."""
    doc = {"database": {"url": "postgresql://127.0.0.1/x"}, "nats": {"url": "nats://x"},
           "providers": {"p": {"scheme": scheme, "secrets": ["k"],
                               "iyzico_merchant_id": value}}}  # fmt: skip
    with pytest.raises(ConfigError, match="iyzico_merchant_id"):
        settings_mod.parse(doc, env={})
