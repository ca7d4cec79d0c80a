"""Square, Checkout.com and Paystack verified as their own code and pages say.

Square: against `square.utils.webhooks_helper.verify_signature` (squareup, a development
dependency) on valid, tampered, re-pointed and rotated cases, and on the vectors of its
tests (square/square-python-sdk `tests/integration/test_webhooks_helper.py`).
Checkout.com and Paystack publish no library that verifies: their signatures are
recomputed here with the standard library from the rule on their pages
(checkout.com/docs/workflows/set-up-your-webhook-receiver: hex HMAC-SHA256 of the raw
body; paystack.com/docs/payments/webhooks: hex HMAC-SHA512 of the body with the secret
key).
"""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest
from square.utils.webhooks_helper import verify_signature

from gateway.core.providers import get_scheme
from gateway.core.signatures import SchemeParams
from gateway.errors import SignatureError, SignatureMalformed, SignatureMismatch

NOW = 1_760_000_000
SQUARE_BODY = (
    '{"merchant_id":"MLEFBHHSJGVHD","type":"webhooks.test_notification","event_id":'
    '"ac3ac95b-f97d-458c-a6e6-18981597e05f","created_at":"2022-07-13T20:30:59.037339943Z",'
    '"data":{"type":"webhooks","id":"bc368e64-01aa-407e-b46e-3231809b1129"}}'
)
SQUARE_URL = "https://webhook.site/679a4f3a-dcfa-49ee-bac5-9d0edad886b9"
SQUARE_KEY = "Ibxx_5AKakO-3qeNVR61Dw"

#: (body, signature header, key, url) from the squareup tests, each valid.
SQUARE_VECTORS = [
    pytest.param(
        SQUARE_BODY,
        "GF4YkrJgGBDZ9NIYbNXBnMzqb2HoL4RW/S6vkZ9/2N4=",
        SQUARE_KEY,
        SQUARE_URL,
        id="test-notification",
    ),
    pytest.param(
        '{"data":{"type":"webhooks","id":">id<"}}',
        "Cxt7+aTi4rKgcA0bC4g9EHdVtLSDWdqccmL5MvihU4U=",
        "signature-key",
        "https://webhook.site/webhooks",
        id="escaped-characters",
    ),
    pytest.param(
        '{"data":{"type":"webhooks","id":"fake_id"}}',
        "W3FlCNk5IA3ZQ2LHTWoajvzfaDu/OwY2tNHIHC3IUOA=",
        "signature-key",
        "https://webhook.site/webhooks",
        id="unescaped-characters",
    ),
]


def ours(name: str, params: SchemeParams, header: str, signature: str, body: bytes) -> bool:
    try:
        get_scheme(name).verify(params, {header: signature}, body, NOW)
    except SignatureError:
        return False
    return True


@pytest.mark.parametrize(("body", "signature", "key", "url"), SQUARE_VECTORS)
def test_square_published_vectors_verify(body: str, signature: str, key: str, url: str) -> None:
    params = SchemeParams(secrets=(key,), url=url)
    assert verify_signature(
        request_body=body, signature_header=signature, signature_key=key, notification_url=url
    )
    assert ours("square", params, "x-square-hmacsha256-signature", signature, body.encode())
    signed = get_scheme("square").sign(params, body.encode(), NOW)
    assert signed == {"x-square-hmacsha256-signature": signature}


def _square_sig(key: str, url: str, body: str) -> str:
    digest = hmac.new(key.encode(), (url + body).encode(), hashlib.sha256).digest()
    return base64.b64encode(digest).decode()


@pytest.mark.parametrize(
    ("case", "body", "signature", "url"),
    [
        ("genuine", SQUARE_BODY, _square_sig(SQUARE_KEY, SQUARE_URL, SQUARE_BODY), SQUARE_URL),
        (
            "body changed",
            SQUARE_BODY.replace("MLEF", "XLEF"),
            _square_sig(SQUARE_KEY, SQUARE_URL, SQUARE_BODY),
            SQUARE_URL,
        ),
        (
            "another URL",
            SQUARE_BODY,
            _square_sig(SQUARE_KEY, SQUARE_URL + "/", SQUARE_BODY),
            SQUARE_URL,
        ),
        (
            "http behind a proxy",
            SQUARE_BODY,
            _square_sig(SQUARE_KEY, SQUARE_URL.replace("https", "http"), SQUARE_BODY),
            SQUARE_URL,
        ),
        ("another key", SQUARE_BODY, _square_sig("other", SQUARE_URL, SQUARE_BODY), SQUARE_URL),
        (
            "a non-ASCII body",
            '{"note":"caf\u00e9 \u20ac"}',
            _square_sig(SQUARE_KEY, SQUARE_URL, '{"note":"caf\u00e9 \u20ac"}'),
            SQUARE_URL,
        ),
    ],
)
def test_square_agrees_with_squareups_verify_signature(
    case: str, body: str, signature: str, url: str
) -> None:
    params = SchemeParams(secrets=(SQUARE_KEY,), url=url)
    theirs = verify_signature(
        request_body=body,
        signature_header=signature,
        signature_key=SQUARE_KEY,
        notification_url=url,
    )
    assert ours("square", params, "x-square-hmacsha256-signature", signature,
                body.encode()) is theirs, case  # fmt: skip


def test_square_accepts_the_older_key_of_a_rotation() -> None:
    params = SchemeParams(secrets=("new-key", SQUARE_KEY), url=SQUARE_URL)
    signature = _square_sig(SQUARE_KEY, SQUARE_URL, SQUARE_BODY)
    assert ours("square", params, "x-square-hmacsha256-signature", signature, SQUARE_BODY.encode())


CHECKOUT_KEY = "8V8x0dLK%AyD*DNS8JJr"  # the signature key of checkout-sdk-python's tests
CHECKOUT_BODY = b'{"id":"evt_az5sblvku4ge3dwpztvyizgcau","type":"payment_approved","data":{}}'
PAYSTACK_KEY = "sk_test_b748a89ad84f35c2f1a8b81681f956274de048bb"
PAYSTACK_BODY = b'{"event":"charge.success","data":{"id":302961,"reference":"qTPrJoy9Bx"}}'


@pytest.mark.parametrize(
    ("name", "header", "key", "body", "algorithm"),
    [
        ("checkout", "cko-signature", CHECKOUT_KEY, CHECKOUT_BODY, "sha256"),
        ("paystack", "x-paystack-signature", PAYSTACK_KEY, PAYSTACK_BODY, "sha512"),
    ],
)
def test_checkout_and_paystack_follow_their_pages(
    name: str, header: str, key: str, body: bytes, algorithm: str
) -> None:
    """Genuine, upper-case hex, tampered, another key, the older key of a rotation."""
    expected = hmac.new(key.encode(), body, algorithm).hexdigest()
    params = SchemeParams(secrets=(key,))
    assert ours(name, params, header, expected, body)
    assert ours(name, params, header, expected.upper(), body)
    assert not ours(name, params, header, expected, body.replace(b"data", b"dato"))
    assert not ours(name, SchemeParams(secrets=("other",)), header, expected, body)
    assert ours(name, SchemeParams(secrets=("newer", key)), header, expected, body)
    assert get_scheme(name).sign(params, body, NOW)[header.title() if name == "checkout"
                                                     else header] == expected  # fmt: skip


def test_paystack_refuses_a_sha256_signature_as_malformed() -> None:
    """A signature of the wrong hash is the wrong length: malformed, not a mismatch."""
    sha256 = hmac.new(PAYSTACK_KEY.encode(), PAYSTACK_BODY, hashlib.sha256).hexdigest()
    with pytest.raises(SignatureMalformed):
        get_scheme("paystack").verify(
            SchemeParams(secrets=(PAYSTACK_KEY,)),
            {"x-paystack-signature": sha256},
            PAYSTACK_BODY,
            NOW,
        )
    with pytest.raises(SignatureMismatch):
        get_scheme("paystack").verify(
            SchemeParams(secrets=(PAYSTACK_KEY,)),
            {"x-paystack-signature": "0" * 128},
            PAYSTACK_BODY,
            NOW,
        )
