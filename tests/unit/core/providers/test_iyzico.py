"""iyzico: the V3 webhook signature, the API's Authorization and answer signature, and
the payment answer read into the events it confirms. Table-driven, pure.

What each is held to:

- webhooks: iyzico's own worked examples (secretKey, body, header) in iyzico/iyzipay-php
  `samples/webhook_Signature_Validation.php` (commit 168839f9ccb2aebaa2cb9f07b883b1b2bb0cf87a,
  the file last changed in 40ee36688b94175b512faeaba7cd7d2d4954caa7), for the direct
  and HPP formats; the subscription order of docs.iyzico.com/en/advanced/webhook,
  recomputed here with the standard library;
- the Authorization: the vectors of iyzico/iyzipay-node `test/unit/UtilsTest.js`
  (cb4d1633c6ad2e59b32630457991da2673897f2b), iyzico/iyzipay-java
  `src/test/java/com/iyzipay/IyziAuthV2GeneratorTest.java`
  (85a63a28b383079904992a414f1eb44e534b032d) and iyzico/iyzipay-php
  `tests/Iyzipay/Tests/IyziAuthV2GeneratorTest.php` (its subscription cases), each
  body as its library serialises it; and, when installed, iyzipay 1.0.46's
  `IyzipayResource.generate_v2_hash` on the gateway's own request;
- the answer's signature: the joined text of docs.iyzico.com/en/advanced/
  response-signature-validation recomputed here, and, when installed, iyzipay 1.0.46's
  `calculate_hmac_sha256_signature` over `strip_zero(str(price))`, as its
  `samples/retrieve_payment_result.py` checks a `/payment/detail` answer;
- the answer's shape: docs.iyzico.com/en/advanced/retrieve-payment and iyzipay-php's
  `tests/Iyzipay/Tests/mock/create-payment.json` (prices as JSON numbers with trailing
  zeros: `0.33000000`, `0E-8`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import importlib
import json
from decimal import Decimal
from types import ModuleType
from typing import Any

import orjson
import pytest

from gateway.core.providers import PROVIDERS
from gateway.core.providers.iyzico.answer import (
    DETAIL_PATH,
    awaits,
    confirmed,
    confirmer,
    locate,
    payment_id_of,
    request_body,
    request_headers,
    unkeyed,
)
from gateway.core.providers.iyzico.webhooks import IYZICO, KINDS, instruction
from gateway.core.providers.movements import instruction_of
from gateway.core.settlement.instructions import SettlementKind
from gateway.core.signatures import SchemeParams
from gateway.core.signatures.iyzico import (
    HEADER,
    MERCHANT_ID,
    SCHEME,
    authorization,
    check_answer_signature,
    price_text,
    response_signature,
)
from gateway.errors import (
    ConfirmationMismatch,
    FieldTypeInvalid,
    PayloadInvalid,
    SignatureMalformed,
    SignatureMismatch,
    SignatureMissing,
)


def _library() -> ModuleType | None:
    """iyzico's Python library (iyzipay 1.0.46, a development dependency), if installed."""
    try:
        return importlib.import_module("iyzipay.iyzipay_resource")
    except ImportError:
        return None


LIBRARY = _library()
needs_library = pytest.mark.skipif(LIBRARY is None, reason="iyzipay is not installed")

# --- webhooks ---------------------------------------------------------------------------

#: The sandbox secretKey of iyzipay-php's worked examples.
SECRET = "sandbox-UuLnD7wZa0a3DmytfIrwHQqAMfqCNJrs"
#: Its "For CO Form and Pay with iyzico" example: body and X-Iyz-Signature-V3.
HPP_BODY = (b'{"paymentConversationId":"conversationId","merchantId":3382172,"token":"e828c62d-'
            b'fd12-4b1a-ad5a-380f15fe6596","status":"SUCCESS","iyziReferenceCode":"77e1635c-'
            b'6b39-475a-8b7b-ca15ad0cd4ac","iyziEventType":"CHECKOUT_FORM_AUTH","iyziEventTime'
            b'":1721825036103,"iyziPaymentId":22483975}')  # fmt: skip
HPP_SIGNATURE = "4031c575763486a2d2bf3f7ace0baebfcd6bed65393ab4df3fe80c00d5fd6878"
#: Its "For Direct Payments via API" example.
DIRECT_BODY = (b'{"paymentConversationId":"conversationId","merchantId":3382172,"paymentId":'
               b'22484059,"status":"SUCCESS","iyziReferenceCode":"a9af8e6b-4401-4928-b6b8-'
               b'40419aaa3d0f","iyziEventType":"API_AUTH","iyziEventTime":1721825828467,'
               b'"iyziPaymentId":22484059}')  # fmt: skip
DIRECT_SIGNATURE = "92c7a72b7741bc83eb696066605c894778c87297b2c88d6037670666230e18ae"
#: A subscription's webhook, in the shape of the documentation's table.
SUBSCRIPTION = {"orderReferenceCode": "ord-1", "customerReferenceCode": "cus-1",
                "subscriptionReferenceCode": "sub-1", "iyziReferenceCode": "ref-1",
                "iyziEventType": "subscription.order.success",
                "iyziEventTime": 1721825036103}  # fmt: skip
PARAMS = SchemeParams(secrets=(SECRET,))


def hexmac(secret: str, text: str) -> str:
    """HMAC-SHA256 in hex, written here from the rule."""
    return hmac.new(secret.encode(), text.encode(), hashlib.sha256).hexdigest()


def body_with(body: bytes, **changes: Any) -> bytes:
    doc = orjson.loads(body)
    doc.update(changes)
    return orjson.dumps({k: v for k, v in doc.items() if v is not None})


def verdict(body: bytes, header: str | None, params: SchemeParams = PARAMS) -> str:
    try:
        SCHEME.verify(params, {} if header is None else {HEADER: header}, body, 0)
    except (SignatureMissing, SignatureMalformed, SignatureMismatch) as exc:
        return type(exc).__name__
    return "ok"


@pytest.mark.parametrize(
    ("body", "signature"), [(HPP_BODY, HPP_SIGNATURE), (DIRECT_BODY, DIRECT_SIGNATURE)]
)
def test_iyzicos_worked_examples_verify_and_sign_alike(body: bytes, signature: str) -> None:
    """Both examples of iyzipay-php's sample, with its secretKey: verified as given, in
    upper case too, and signed to the same value."""
    assert verdict(body, signature) == "ok"
    assert verdict(body, signature.upper()) == "ok"
    assert SCHEME.sign(PARAMS, body, 0) == {"X-IYZ-SIGNATURE-V3": signature}


SUB_TEXT = "3382172" + SECRET + "subscription.order.successsub-1ord-1cus-1"


@pytest.mark.parametrize(
    ("doc", "extra", "expected"),
    [
        ({**SUBSCRIPTION, "merchantId": 3382172}, {}, "ok"),  # merchantId in the body
        (SUBSCRIPTION, {MERCHANT_ID: "3382172"}, "ok"),  # or configured
        ({**SUBSCRIPTION, "merchantId": "3382172"}, {MERCHANT_ID: "3382172"}, "ok"),
        ({**SUBSCRIPTION, "iyziEventType": None, "eventType": "subscription.order.success"},
         {MERCHANT_ID: "3382172"}, "ok"),  # the documentation's name for the type
        (SUBSCRIPTION, {}, "SignatureMalformed"),  # no merchant to put first
        (SUBSCRIPTION, {MERCHANT_ID: "999"}, "SignatureMismatch"),
        ({**SUBSCRIPTION, "merchantId": 999}, {MERCHANT_ID: "3382172"}, "SignatureMismatch"),
        ({**SUBSCRIPTION, "merchantId": 3382172, "orderReferenceCode": "ord-2"}, {},
         "SignatureMismatch"),
    ],
)  # fmt: skip
def test_subscription_webhooks_put_the_merchant_first(
    doc: dict[str, Any], extra: dict[str, str], expected: str
) -> None:
    """`merchantId + secretKey + eventType + subscriptionReferenceCode +
    orderReferenceCode + customerReferenceCode`, the merchant from the body or the
    provider's `merchant_id`."""
    body = orjson.dumps({k: v for k, v in doc.items() if v is not None})
    params = SchemeParams(secrets=(SECRET,), extra=extra)
    assert verdict(body, hexmac(SECRET, SUB_TEXT), params) == expected
    if expected == "ok":
        assert SCHEME.sign(params, body, 0) == {"X-IYZ-SIGNATURE-V3": hexmac(SECRET, SUB_TEXT)}


@pytest.mark.parametrize(
    ("body", "header", "secrets", "expected"),
    [
        pytest.param(DIRECT_BODY, DIRECT_SIGNATURE, ("new-secret", SECRET), "ok", id="rotation"),
        pytest.param(DIRECT_BODY, DIRECT_SIGNATURE, ("other",), "SignatureMismatch",
                     id="wrong-secret"),
        pytest.param(body_with(DIRECT_BODY, status="FAILURE"), DIRECT_SIGNATURE, (SECRET,),
                     "SignatureMismatch", id="status-tampered"),
        pytest.param(body_with(DIRECT_BODY, paymentId=22484058), DIRECT_SIGNATURE, (SECRET,),
                     "SignatureMismatch", id="payment-tampered"),
        pytest.param(body_with(HPP_BODY, token="x"), HPP_SIGNATURE, (SECRET,),
                     "SignatureMismatch", id="token-tampered"),
        pytest.param(HPP_BODY, DIRECT_SIGNATURE, (SECRET,), "SignatureMismatch",
                     id="another-webhooks-signature"),
        pytest.param(DIRECT_BODY, None, (SECRET,), "SignatureMissing", id="no-header"),
        pytest.param(DIRECT_BODY, "  ", (SECRET,), "SignatureMissing", id="blank-header"),
        pytest.param(DIRECT_BODY, DIRECT_SIGNATURE[:-2], (SECRET,), "SignatureMalformed",
                     id="short"),
        pytest.param(DIRECT_BODY, "zz" * 32, (SECRET,), "SignatureMalformed", id="not-hex"),
        pytest.param(DIRECT_BODY, base64.b64encode(bytes(32)).decode(), (SECRET,),
                     "SignatureMalformed", id="base64"),
        pytest.param(b"paymentId=1", DIRECT_SIGNATURE, (SECRET,), "SignatureMalformed",
                     id="not-json"),
        pytest.param(b"[1]", DIRECT_SIGNATURE, (SECRET,), "SignatureMalformed", id="not-object"),
        pytest.param(body_with(DIRECT_BODY, iyziEventType=None), DIRECT_SIGNATURE, (SECRET,),
                     "SignatureMalformed", id="no-type"),
        pytest.param(body_with(DIRECT_BODY, paymentId=None), DIRECT_SIGNATURE, (SECRET,),
                     "SignatureMalformed", id="no-payment"),
        pytest.param(body_with(DIRECT_BODY, paymentId=2.5), DIRECT_SIGNATURE, (SECRET,),
                     "SignatureMalformed", id="payment-a-float"),
        pytest.param(body_with(DIRECT_BODY, status=True), DIRECT_SIGNATURE, (SECRET,),
                     "SignatureMalformed", id="status-a-bool"),
        pytest.param(body_with(DIRECT_BODY, iyziReferenceCode="22484059:paid"),
                     DIRECT_SIGNATURE, (SECRET,), "SignatureMalformed", id="id-of-a-confirmed"),
    ],
)  # fmt: skip
def test_what_is_refused(body: bytes, header: str | None, secrets: tuple[str, ...],
                         expected: str) -> None:  # fmt: skip
    """Missing, malformed and mismatched signatures, each with its own error; a secret
    of a rotation still verifies."""
    assert verdict(body, header, SchemeParams(secrets=secrets)) == expected


def test_a_configured_merchant_pins_every_format() -> None:
    """With `merchant_id` set, a payment webhook naming another merchant is refused,
    though `merchantId` is not among the fields it signs."""
    params = SchemeParams(secrets=(SECRET,), extra={MERCHANT_ID: "3382172"})
    assert verdict(DIRECT_BODY, DIRECT_SIGNATURE, params) == "ok"
    moved = body_with(DIRECT_BODY, merchantId=1)
    assert verdict(moved, DIRECT_SIGNATURE) == "ok"  # unsigned: not caught by the HMAC
    assert verdict(moved, DIRECT_SIGNATURE, params) == "SignatureMismatch"


def test_the_id_is_not_signed_and_the_digest_covers_what_is() -> None:
    """`iyziReferenceCode` is outside the signature: a changed one verifies, so the id
    is not vouched for, and the replay digest is the same for both."""
    forged = body_with(DIRECT_BODY, iyziReferenceCode="0b3e5f1c-8d2a-4c7e-9f10-2a3b4c5d6e7f")
    assert verdict(forged, DIRECT_SIGNATURE) == "ok"
    assert SCHEME.authenticates_id(PARAMS) is False
    digest = SCHEME.replay_digest(PARAMS, {}, DIRECT_BODY)
    assert digest is not None and digest == SCHEME.replay_digest(PARAMS, {}, forged)
    assert digest != SCHEME.replay_digest(PARAMS, {}, body_with(DIRECT_BODY, status="FAILURE"))


def test_the_scheme_reads_its_id_type_and_header() -> None:
    doc = orjson.loads(HPP_BODY)
    assert SCHEME.id_ref(PARAMS).read({}, doc) == "77e1635c-6b39-475a-8b7b-ca15ad0cd4ac"
    assert SCHEME.type_ref(PARAMS).read({}, doc) == "CHECKOUT_FORM_AUTH"
    assert SCHEME.required_headers(PARAMS) == SCHEME.signature_headers(PARAMS) == (HEADER,)
    assert SCHEME.stored_headers(PARAMS) == ()
    assert SCHEME.new_event_id("0b3e5f1c-8d2a") == "0b3e5f1c-8d2a"
    with pytest.raises(ValueError, match="subscription webhook without merchantId"):
        SCHEME.sign(PARAMS, orjson.dumps(SUBSCRIPTION), 0)


# --- the API's Authorization ------------------------------------------------------------


@pytest.mark.parametrize(
    ("api_key", "secret", "random_key", "path", "body", "expected"),
    [
        # iyzipay-node UtilsTest: body "body", which it signs as JSON.stringify makes it.
        ("api_key", "secret_key", "random_string", "uri", b'"body"',
         "YXBpS2V5OmFwaV9rZXkmcmFuZG9tS2V5OnJhbmRvbV9zdHJpbmcmc2lnbmF0dXJlOjAxNzUwODkyMWEyOWVl"
         "NTYwMWJjZDFmYmU4M2VmZDJlMmJlNDNhZjAyZWNlZmYzMGNmMmU5MWE1MzlhYWIzNTU="),
        # iyzipay-java IyziAuthV2GeneratorTest: "[data=value]" as Gson writes it.
        ("apiKey", "secretKey", "random", "/v2/uri?test=true", b'"[data\\u003dvalue]"',
         "YXBpS2V5OmFwaUtleSZyYW5kb21LZXk6cmFuZG9tJnNpZ25hdHVyZToxYzQwNGY3MjgyN2MyNTQxMjM0MzNl"
         "YmYxM2Y1Nzc5NzVkODA1YjYxMDMzMTM5ZjIwZjVmMTNjYWI3ZWFiYjYx"),
        ("apiKey", "secretKey", "random", "/v2/uri", b'"[data\\u003dvalue]"',
         "YXBpS2V5OmFwaUtleSZyYW5kb21LZXk6cmFuZG9tJnNpZ25hdHVyZTphOTBlYzFhZWNkNjhlMzdjYzMwOTQy"
         "Zjg1Y2U2YjBkNTM0MzVhNGNhNDVlMDQ3NjliNDZlM2MzNWQ4MWJmNmZl"),
        ("apiKey", "secretKey", "random", "/v2/uri?test=true", b"",
         "YXBpS2V5OmFwaUtleSZyYW5kb21LZXk6cmFuZG9tJnNpZ25hdHVyZTpiN2EyZjYzNGRlOWNkNTkzYWNjZDlh"
         "NTNhZjI4Zjc4YjgyZWM3NmRjMjYyN2Y2NTdmNjY0M2NmNjYyYzI2Njdh"),
        # iyzipay-php IyziAuthV2GeneratorTest, subscription cases: the path, no body.
        ("test", "test", "123456789", "/v2/subscription/customers/", b"",
         "YXBpS2V5OnRlc3QmcmFuZG9tS2V5OjEyMzQ1Njc4OSZzaWduYXR1cmU6NmYzODQwOTlhYWUzMjhmNzJkYWY5"
         "Y2RhYjEwNWViMzdmYjI5NjIwMjUxYzQ3YjRjNTgzZDc0OGQ5ZDBhYjc2NA=="),
        ("test", "test", "123456789", "/v2/subscription/initialize", b"",
         "YXBpS2V5OnRlc3QmcmFuZG9tS2V5OjEyMzQ1Njc4OSZzaWduYXR1cmU6YmM0NGIyZjRkZmI4ZGY3NDE0N2Ix"
         "ZjUyN2ZmNjM2NDQ0YzNiM2QzYTFmZjk3ZGNiMzM2NmJjMjkzZmFjZjI5OA=="),
    ],
)  # fmt: skip
def test_authorization_reproduces_the_libraries_vectors(
    api_key: str, secret: str, random_key: str, path: str, body: bytes, expected: str
) -> None:
    found = authorization(api_key, secret, random_key, path, body)
    assert found == {"Authorization": f"IYZWSv2 {expected}", "x-iyzi-rnd": random_key}


@pytest.mark.parametrize(
    ("api_key", "secret", "random_key"),
    [("", "s", "r1"), ("k", "", "r1"), ("k", "s", ""), ("k", "s", "a&b"), ("k", "s", "x" * 65)],
)
def test_authorization_refuses_what_cannot_sign(api_key: str, secret: str, random_key: str) -> None:
    with pytest.raises(ValueError):
        authorization(api_key, secret, random_key, DETAIL_PATH, b"{}")


@needs_library
def test_the_request_is_signed_as_iyzipay_signs_it() -> None:
    """The gateway's own fetch of the direct example's payment, against iyzipay 1.0.46."""
    assert LIBRARY is not None
    body = request_body(orjson.loads(DIRECT_BODY))
    headers = request_headers("sandbox-key", SECRET, "a1B2c3D4", body)
    expected = LIBRARY.IyzipayResource.generate_v2_hash(
        "sandbox-key", DETAIL_PATH, SECRET, "a1B2c3D4", body.decode()
    )
    assert headers["Authorization"] == f"IYZWSv2 {expected}"
    assert headers["x-iyzi-rnd"] == "a1B2c3D4"
    assert headers["Content-Type"] == "application/json"


# --- the answer's signature -------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "text"),
    [(1, "1"), (Decimal("1.00000000"), "1"), (Decimal("0.33000000"), "0.33"), (1.1, "1.1"),
     (Decimal("100"), "100"), (Decimal("1E+2"), "100"), (Decimal("0E-8"), "0"), (1.0, "1"),
     ("15.340000", "15.34"), ("23.00450067", "23.00450067"), (12345678901.25, "12345678901.25")],
)  # fmt: skip
def test_prices_are_signed_without_trailing_zeros(value: Any, text: str) -> None:
    """As iyzipay-java's `stripTrailingZeros().toPlainString()` writes them."""
    assert price_text(value) == text


@pytest.mark.parametrize(
    "value", [True, None, "1,5", "abc", float("nan"), float("inf"), 0.1 + 0.2, [1], "1e400"]
)
def test_a_price_that_is_not_an_exact_number_is_refused(value: Any) -> None:
    """A float past 15 significant digits may have lost some (0.1 + 0.2)."""
    with pytest.raises(ValueError):
        price_text(value)


ANSWER_TEXT = """{"status": "success", "locale": "en", "systemTime": 1698048416625,
 "conversationId": "conversationId", "price": 1.00000000, "paidPrice": 1.10000000,
 "installment": 1, "paymentId": "22484059", "fraudStatus": 1, "merchantCommissionRate":
 10.00000000, "merchantCommissionRateAmount": 0.1, "iyziCommissionRateAmount": 0.03245000,
 "iyziCommissionFee": 0.29500000, "basketId": "B67832", "currency": "TRY", "phase": "AUTH",
 "paymentStatus": "SUCCESS", "itemTransactions": [{"itemId": "BI101", "paymentTransactionId":
 "4977", "transactionStatus": 2, "price": 1.0, "paidPrice": 1.10000000,
 "subMerchantPayoutRate": 0E-8}]}"""
#: What its signature covers, as the response-signature page orders it.
ANSWER_SIGNED = "22484059:TRY:B67832:conversationId:1.1:1"


def answer(changes: dict[str, Any] | None = None, signed: str = ANSWER_SIGNED,
           decimal: bool = False) -> dict[str, Any]:  # fmt: skip
    """The answer parsed as the confirm stage parses it (floats), or with Decimals."""
    found: dict[str, Any] = json.loads(ANSWER_TEXT, parse_float=Decimal if decimal else float)
    found.update(changes or {})
    found["signature"] = hexmac(SECRET, signed)
    return {k: v for k, v in found.items() if v is not None}


@pytest.mark.parametrize("decimal", [False, True])
def test_the_answers_signature_is_the_documented_joined_text(decimal: bool) -> None:
    assert response_signature(SECRET, answer(decimal=decimal)) == hexmac(SECRET, ANSWER_SIGNED)
    check_answer_signature(("old", SECRET), answer(decimal=decimal))
    no_basket = answer({"basketId": None}, "22484059:TRY::conversationId:1.1:1")
    check_answer_signature((SECRET,), no_basket)  # an absent field is signed as ""


@pytest.mark.parametrize(
    "changes",
    [{"paidPrice": 1.2}, {"price": 2}, {"currency": "USD"}, {"basketId": "B0"},
     {"signature": None}, {"signature": "ab"}, {"signature": 7}],
)  # fmt: skip
def test_an_answer_not_signed_as_it_reads_is_refused(changes: dict[str, Any]) -> None:
    found = answer()
    found.update(changes)
    with pytest.raises(ConfirmationMismatch):
        check_answer_signature((SECRET,), {k: v for k, v in found.items() if v is not None})


@needs_library
@pytest.mark.parametrize(
    ("paid", "price"), [("1.10000000", "1.00000000"), ("100", "100.0"), ("0.33", "0.3"),
                        ("12345.05", "12000.5"), ("10.0", "9.99000000")]
)  # fmt: skip
def test_the_answers_signature_matches_iyzipay(paid: str, price: str) -> None:
    """iyzipay 1.0.46 as its `samples/retrieve_payment_result.py` checks an answer read
    with `json.load` (floats), against ours on the same answer and on it read with
    Decimals."""
    assert LIBRARY is not None
    text = ANSWER_TEXT.replace("1.10000000,", f"{paid},", 1).replace("1.00000000,", f"{price},", 1)
    for parse in (float, Decimal):
        doc = json.loads(text, parse_float=parse)
        resource = LIBRARY.IyzipayResource
        expected = resource.calculate_hmac_sha256_signature(
            [doc["paymentId"], doc["currency"], doc["basketId"], doc["conversationId"],
             resource.strip_zero(str(float(doc["paidPrice"]))),
             resource.strip_zero(str(float(doc["price"])))],
            SECRET,
        )  # fmt: skip
        assert response_signature(SECRET, doc) == expected


# --- the fetch and the answer's events --------------------------------------------------

DIRECT = orjson.loads(DIRECT_BODY)
HPP = orjson.loads(HPP_BODY)


@pytest.mark.parametrize(
    ("doc", "payment", "body"),
    [(DIRECT, "22484059",
      b'{"locale":"en","conversationId":"conversationId","paymentId":"22484059"}'),
     (HPP, "22483975",
      b'{"locale":"en","conversationId":"conversationId","paymentId":"22483975"}'),
     ({**DIRECT, "paymentId": "7", "paymentConversationId": None}, "7",
      b'{"locale":"en","paymentId":"7"}')],
)  # fmt: skip
def test_a_webhook_names_the_payment_fetched(doc: Any, payment: str, body: bytes) -> None:
    assert payment_id_of(doc) == payment
    assert locate(doc) == DETAIL_PATH == "/payment/detail"
    assert request_body(doc) == body


@pytest.mark.parametrize(
    "doc",
    [SUBSCRIPTION, {**DIRECT, "paymentId": "12/../cards"}, {**DIRECT, "paymentId": ""},
     {**HPP, "iyziPaymentId": None}, {"iyziEventType": "API_AUTH"}, [], "id=1"],
)  # fmt: skip
def test_a_webhook_naming_no_payment_is_not_fetched(doc: Any) -> None:
    with pytest.raises(PayloadInvalid):
        locate(doc)


@pytest.mark.parametrize(
    ("event_type", "owed"),
    [("API_AUTH", True), ("THREE_DS_AUTH", True), ("CHECKOUT_FORM_AUTH", True),
     ("subscription.order.success", False), ("subscription.order.failure", False)],
)  # fmt: skip
def test_payment_webhooks_wait_for_their_fetch(event_type: str, owed: bool) -> None:
    assert awaits(event_type) is owed
    assert IYZICO.confirmation is not None and IYZICO.confirmation.owed(event_type) is owed


def events(doc: Any, found: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    items = confirmed(doc, found, (SECRET,))
    return [(c.event_id, c.event_type, orjson.loads(c.body)) for c in items]


@pytest.mark.parametrize(
    ("changes", "expected"),
    [({}, [("22484059:paid", "payment.paid")]),
     ({"phase": "PRE_AUTH"}, [("22484059:authorized", "payment.authorized")]),
     ({"phase": "POST_AUTH"},
      [("22484059:authorized", "payment.authorized"), ("22484059:paid", "payment.paid")]),
     ({"paymentStatus": "FAILURE"}, []), ({"paymentStatus": "INIT_THREEDS"}, []),
     ({"paymentStatus": None}, []), ({"fraudStatus": 0}, []), ({"fraudStatus": -1}, [])],
)  # fmt: skip
def test_what_an_answer_confirms(changes: dict[str, Any], expected: list[tuple[str, str]]) -> None:
    """A sale is paid, a pre-auth authorised, a post-auth both; a failed, unfinished,
    under-review or declined payment nothing."""
    found = events(DIRECT, answer(changes))
    assert [(event_id, event_type) for event_id, event_type, _ in found] == expected
    for event_id, event_type, body in found:
        assert body == {
            "event_id": event_id, "event_type": event_type, "payment_id": "22484059",
            "amount": "1.1", "currency": "TRY", "basket_price": "1", "installment": 1,
            "basket_id": "B67832", "conversation_id": "conversationId",
            "merchant_id": "3382172", "phase": changes.get("phase", "AUTH"),
        }  # fmt: skip


@pytest.mark.parametrize(
    ("changes", "signed", "error", "problem"),
    [({"paymentId": "22484058"}, "22484058:TRY:B67832:conversationId:1.1:1",
      ConfirmationMismatch, "asked for payment 22484059"),
     ({"paidPrice": 9.9}, ANSWER_SIGNED, ConfirmationMismatch, "no configured secretKey"),
     ({"signature": None}, ANSWER_SIGNED, ConfirmationMismatch, "no signature"),
     ({"status": "failure", "errorCode": "5082", "errorMessage": "not found"}, ANSWER_SIGNED,
      PayloadInvalid, "errorCode 5082"),
     ({"paidPrice": "1.005"}, "22484059:TRY:B67832:conversationId:1.005:1", FieldTypeInvalid,
      "at most 2 decimals in TRY"),
     ({"paidPrice": 0.1 + 0.2}, ANSWER_SIGNED, PayloadInvalid, "significant digits"),
     ({"fraudStatus": None}, ANSWER_SIGNED, PayloadInvalid, "fraudStatus"),
     ({"fraudStatus": "1"}, ANSWER_SIGNED, PayloadInvalid, "fraudStatus"),
     ({"phase": "CAPTURE"}, ANSWER_SIGNED, PayloadInvalid, "in phase 'CAPTURE'"),
     ({"phase": None}, ANSWER_SIGNED, PayloadInvalid, "in phase None")],
)  # fmt: skip
def test_what_an_answer_cannot_confirm(changes: dict[str, Any], signed: str,
                                       error: type[Exception], problem: str) -> None:  # fmt: skip
    """Another payment, a signature that does not match, iyzico's failure answer, an
    amount the currency cannot hold or a float that lost digits, an unknown state."""
    found = answer(changes, signed)
    if "signature" in changes:
        found.pop("signature", None)
    with pytest.raises(error, match=problem):
        confirmed(DIRECT, found, (SECRET,))


def test_a_decimal_answer_confirms_what_a_float_one_does() -> None:
    assert events(DIRECT, answer(decimal=True)) == events(DIRECT, answer())


def test_the_answer_is_read_only_with_the_secrets_bound() -> None:
    """The registry's `confirmed` confirms nothing; `confirmer(secrets)` reads."""
    assert IYZICO.confirmation is not None and IYZICO.confirmation.confirmed is unkeyed
    with pytest.raises(PayloadInvalid, match="confirmer"):
        unkeyed(DIRECT, answer())
    assert [c.event_id for c in confirmer((SECRET,))(DIRECT, answer())] == ["22484059:paid"]
    with pytest.raises(ConfirmationMismatch):
        confirmer(("other",))(DIRECT, answer())


@pytest.mark.parametrize(
    ("changes", "paid", "amount_minor"),
    [({}, "1.10000000", 110), ({}, "0.33000000", 33), ({}, "250", 25_000),
     ({"currency": "USD"}, "10.05", 1_005)],
)  # fmt: skip
def test_a_confirmed_event_settles_its_exact_amount(
    changes: dict[str, Any], paid: str, amount_minor: int
) -> None:
    """`paidPrice` in minor units, exactly; the merchant is the webhook's `merchantId`
    (the scheme's default rule, `/merchant_id`)."""
    currency = changes.get("currency", "TRY")
    signed = f"22484059:{currency}:B67832:conversationId:{price_text(Decimal(paid))}:1"
    found = answer({**changes, "paidPrice": Decimal(paid)}, signed)
    for item in confirmed({**DIRECT, "merchantId": "m-1"}, found, (SECRET,)):
        result = instruction_of("iyzico", item.event_type, item.body, {"iyzico": "iyzico"})
        assert result is not None
        assert (result.settlement_id, result.kind, result.merchant_id) == (
            "22484059", SettlementKind.CAPTURE, "m-1")  # fmt: skip
        assert (result.amount_minor, result.currency) == (amount_minor, currency)
        assert result.refund_id is None and result.source_event_id == "22484059:paid"


def test_an_authorisation_is_keyed_by_its_payment() -> None:
    (item,) = confirmed(DIRECT, answer({"phase": "PRE_AUTH"}), (SECRET,))
    result = instruction(item.event_type, orjson.loads(item.body))
    assert result is not None and result.kind is SettlementKind.AUTHORISATION
    assert result.refund_id == result.settlement_id == "22484059"
    assert result.amount_minor == 110


@pytest.mark.parametrize(
    ("event_type", "doc"),
    [("API_AUTH", DIRECT), ("CHECKOUT_FORM_AUTH", HPP), ("subscription.order.success",
                                                           SUBSCRIPTION)],
)  # fmt: skip
def test_a_webhook_published_as_it_came_moves_nothing(event_type: str, doc: Any) -> None:
    assert instruction(event_type, doc) is None


def test_the_provider_is_registered() -> None:
    assert PROVIDERS["iyzico"] is IYZICO
    assert (IYZICO.name, IYZICO.title, IYZICO.scheme) == ("iyzico", "iyzico", SCHEME)
    assert IYZICO.movements is not None
    assert dict(IYZICO.movements.types) == {t: (k,) for t, k in KINDS.items()}
    assert IYZICO.confirmation is not None and IYZICO.confirmation.locate is locate
    assert IYZICO.confirmation.optional and not IYZICO.confirmation.keeps_types
