"""PayPal, pure: the signed message's layout, the certificate URL's allow-list, the
chain and validity decision, the RSA verification against a given certificate, and
the events' money movements (with PayPal's whole-unit HUF, JPY and TWD)."""

from __future__ import annotations

import binascii
import datetime as dt
from collections.abc import Callable
from typing import Any

import orjson
import pytest

from gateway.core.providers import get_provider
from gateway.core.providers.paypal import PAYPAL, instruction
from gateway.core.settlement.instructions import SettlementKind
from gateway.core.signatures import SchemeParams
from gateway.core.signatures.base import ParamProblem
from gateway.core.signatures.paypal.chain import (
    CHAIN_CERTS_MAX,
    check_cert_url,
    load_chain,
    trusted_leaf,
)
from gateway.core.signatures.paypal.scheme import PayPalScheme, crc32_decimal, signed_message
from gateway.errors import (
    ConfigError,
    FieldTypeInvalid,
    MissingField,
    SignatureError,
    SignatureMalformed,
    SignatureMismatch,
    SigningCertificateRefused,
    TimestampOutOfWindow,
)
from gateway.settings.scheme_params import scheme_params
from tests.support.paypal import NOW, WEBHOOK_ID, PayPalKeys, pem

URL = "https://api.paypal.com/v1/notifications/certs/CERT-360caa42-fca2a594-a5cafa77"
PARAMS = SchemeParams(secrets=(), extra={"webhook_id": WEBHOOK_ID})
BODY = b'{"id":"WH-1","event_type":"PAYMENT.CAPTURE.COMPLETED","note":"caf\xc3\xa9"}'
KEYS = PayPalKeys()


def test_the_crc_is_unsigned_decimal_of_the_raw_bytes() -> None:
    """A body whose signed CRC32 is negative is written as its unsigned value."""
    body = b"body 0"  # its CRC32 has the top bit set: Java's `int` would print it negative
    assert crc32_decimal(body) == "3013986539"
    assert crc32_decimal(b"") == "0"


def test_the_signed_message_is_four_fields_joined_by_bars() -> None:
    """`{transmission_id}|{time}|{webhook_id}|{crc32}`, over the bytes as sent."""
    message = signed_message("tid", "2026-12-06T10:00:00Z", "WH", "é".encode())
    assert message == f"tid|2026-12-06T10:00:00Z|WH|{binascii.crc32('é'.encode())}".encode()


@pytest.mark.parametrize(
    ("url", "hosts", "accepted"),
    [
        (URL, (), True),
        ("https://api.sandbox.paypal.com/v1/notifications/certs/CERT-1", (), True),
        ("https://api-m.paypal.com:443/v1/notifications/certs/CERT-1", (), True),
        ("http://api.paypal.com/v1/notifications/certs/CERT-1", (), False),  # not TLS
        ("https://api.paypal.com.evil.example/v1/notifications/certs/C", (), False),
        ("https://evil.example/v1/notifications/certs/CERT-1", (), False),
        ("https://api.paypal.com:8443/v1/notifications/certs/CERT-1", (), False),
        ("https://user@api.paypal.com/v1/notifications/certs/CERT-1", (), False),
        ("https://api.paypal.com/v1/oauth2/token", (), False),  # not a certificate
        ("https://api.paypal.com/v1/notifications/certs/C?x=1", (), False),
        ("https://127.0.0.1:8443/v1/notifications/certs/C", (), False),  # not by default
        ("https://127.0.0.1:8443/v1/notifications/certs/C", ("127.0.0.1:8443",), True),
        (" " + URL, (), False),
        (URL + "0" * 512, (), False),  # longer than any URL PayPal sends
        (URL + "é", (), False),
    ],
)
def test_only_paypal_certificate_urls_are_fetched(
    url: str, hosts: tuple[str, ...], accepted: bool
) -> None:
    """https, PayPal's hosts (a test host only when configured), its certificate path."""
    if accepted:
        assert check_cert_url(url, hosts) == url
    else:
        with pytest.raises(SigningCertificateRefused):
            check_cert_url(url, hosts)


@pytest.mark.parametrize(
    ("chain", "anchors", "at", "trusted"),
    [
        (lambda k: [k.cert], lambda k: [k.ca.cert], NOW, True),
        (lambda k: [k.cert], lambda k: [k.rogue.cert], NOW, False),  # another CA
        (lambda k: [k.forged], lambda k: [k.ca.cert], NOW, False),  # forged issuer
        (lambda k: [k.expired], lambda k: [k.ca.cert], NOW, False),
        (lambda k: [k.cert], lambda k: [k.ca.cert], NOW + dt.timedelta(days=400), False),
        (lambda k: [k.ca.issue(k.key, "example.com")], lambda k: [k.ca.cert], NOW, False),
    ],
)
def test_the_chain_must_reach_a_trust_anchor_and_be_valid_now(
    chain: Callable[[PayPalKeys], list[Any]],
    anchors: Callable[[PayPalKeys], list[Any]],
    at: dt.datetime,
    trusted: bool,
) -> None:
    """Trusted only from a configured anchor, within every validity period, named for
    paypal.com."""
    if trusted:
        assert trusted_leaf(chain(KEYS), anchors(KEYS), at) == KEYS.cert
    else:
        with pytest.raises(SigningCertificateRefused):
            trusted_leaf(chain(KEYS), anchors(KEYS), at)


def test_an_answer_that_is_not_pem_certificates_is_refused() -> None:
    with pytest.raises(SigningCertificateRefused):
        load_chain(b"<html>not a certificate</html>")
    with pytest.raises(SigningCertificateRefused):  # more than a leaf and intermediates
        load_chain(pem(KEYS.cert) * (CHAIN_CERTS_MAX + 1))
    assert load_chain(pem(KEYS.cert) + pem(KEYS.ca.cert))[0] == KEYS.cert


def _verify(headers: dict[str, str], body: bytes = BODY, cert: Any = None, **kw: Any) -> None:
    # The cases are signed when the module is collected: they are judged at that time,
    # however long the run takes to reach them.
    now_s = kw.get("now_s", NOW.timestamp())
    lowered = {k.lower(): v for k, v in headers.items()}
    PayPalScheme().keyed_verifier(PARAMS)(lowered, body, now_s, cert or KEYS.cert)


def _headers(**changes: str) -> dict[str, str]:
    headers = KEYS.sign(BODY, URL, when=NOW)
    headers.update(changes)
    return headers


@pytest.mark.parametrize(
    ("case", "headers", "body", "error"),
    [
        ("tampered body", _headers(), BODY.replace(b"WH-1", b"WH-2"), SignatureMismatch),
        ("wrong webhook id", KEYS.sign(BODY, URL, webhook_id="OTHER", when=NOW), BODY,
         SignatureMismatch),
        ("another transmission id", _headers(**{"PAYPAL-TRANSMISSION-ID": "x"}), BODY,
         SignatureMismatch),
        ("stale", KEYS.sign(BODY, URL, when=NOW - dt.timedelta(hours=1)), BODY,
         TimestampOutOfWindow),
        ("SHA1withRSA", _headers(**{"PAYPAL-AUTH-ALGO": "SHA1withRSA"}), BODY,
         SignatureMalformed),
        ("not base64", _headers(**{"PAYPAL-TRANSMISSION-SIG": "%%%"}), BODY, SignatureMalformed),
        ("longer than any RSA signature", _headers(**{"PAYPAL-TRANSMISSION-SIG": "AAAA" * 351}),
         BODY, SignatureMalformed),
        ("no zone", _headers(**{"PAYPAL-TRANSMISSION-TIME": "2026-12-06T10:00:00"}), BODY,
         SignatureMalformed),
    ],
)  # fmt: skip
def test_a_genuine_request_verifies_and_any_change_is_refused(
    case: str, headers: dict[str, str], body: bytes, error: type[SignatureError]
) -> None:
    """The genuine request passes; each change is refused with its own error."""
    _verify(_headers())
    with pytest.raises(error):
        _verify(headers, body)


def test_the_certificate_must_be_valid_when_the_request_arrives() -> None:
    """A cached certificate that has since expired verifies nothing."""
    later = (KEYS.cert.not_valid_after_utc + dt.timedelta(seconds=1)).timestamp()
    when = dt.datetime.fromtimestamp(later, dt.UTC)
    with pytest.raises(SigningCertificateRefused):
        _verify(KEYS.sign(BODY, URL, when=when), now_s=later)


def test_without_its_certificate_the_scheme_verifies_nothing() -> None:
    """The plain `verify` has no certificate: it refuses, it never accepts."""
    headers = {k.lower(): v for k, v in _headers().items()}
    with pytest.raises(SignatureMismatch):
        PayPalScheme().verify(PARAMS, headers, BODY, NOW.timestamp())


def test_a_webhook_id_is_required() -> None:
    with pytest.raises(ParamProblem) as raised:
        PayPalScheme().verifier(SchemeParams(secrets=()))
    assert raised.value.key == "webhook_id"


def test_sign_writes_what_verify_accepts() -> None:
    """`gateway sign` as PayPal: verified with the certificate of the signing key."""
    from tests.support.paypal import key_pem

    params = SchemeParams(
        secrets=(key_pem(KEYS.key),), extra={"webhook_id": WEBHOOK_ID, "signing_cert_url": URL}
    )
    now_s = int(dt.datetime.now(dt.UTC).timestamp())
    headers = PayPalScheme().sign(params, BODY, now_s, event_id="tid-1")
    lowered = {k.lower(): v for k, v in headers.items()}
    assert lowered["paypal-cert-url"] == URL
    PayPalScheme().keyed_verifier(params)(lowered, BODY, now_s, KEYS.cert)


def test_the_replay_digest_is_the_transmissions_whatever_the_body() -> None:
    """Two bodies with one CRC32 share the signature, so they share the digest too."""
    scheme = PayPalScheme()
    assert not scheme.authenticates_id(PARAMS)
    headers = {k.lower(): v for k, v in _headers().items()}
    other = {**headers, "paypal-transmission-id": "another"}
    assert scheme.replay_digest(PARAMS, headers, BODY) != scheme.replay_digest(PARAMS, other, BODY)
    assert scheme.replay_digest(PARAMS, headers, BODY) == scheme.replay_digest(
        PARAMS, dict(headers), BODY
    )


# --- money movements -------------------------------------------------------------------

CAPTURE = {
    "id": "WH-CAP", "event_type": "PAYMENT.CAPTURE.COMPLETED", "resource_type": "capture",
    "resource": {"id": "3C679366HH908993F", "status": "COMPLETED",
                 "amount": {"currency_code": "USD", "value": "10.00"},
                 "payee": {"merchant_id": "M_PP"},
                 "supplementary_data": {"related_ids": {"order_id": "5O190127TN364715T"}}},
}  # fmt: skip
REFUND = {
    "id": "WH-REF", "event_type": "PAYMENT.CAPTURE.REFUNDED", "resource_type": "refund",
    "resource": {"id": "1Y107995YT783435V", "status": "COMPLETED",
                 "amount": {"currency_code": "USD", "value": "2.50"},
                 "links": [
                     {"rel": "self", "href": "https://api.paypal.com/v2/payments/refunds/1Y10"},
                     {"rel": "up",
                      "href": "https://api.paypal.com/v2/payments/captures/3C679366HH908993F"},
                 ]},
}  # fmt: skip
REVERSED = {
    "id": "WH-REV", "event_type": "PAYMENT.CAPTURE.REVERSED", "resource_type": "refund",
    "resource": {**REFUND["resource"], "id": "09E71677NS257044M"},  # type: ignore[dict-item]
}  # fmt: skip


def _dispute(outcome: str | None) -> dict[str, Any]:
    resource: dict[str, Any] = {
        "dispute_id": "PP-D-27803",
        "disputed_transactions": [{"seller_transaction_id": "3C679366HH908993F"}],
        "dispute_amount": {"currency_code": "USD", "value": "10.00"},
    }
    if outcome is not None:
        resource["dispute_outcome"] = {
            "outcome_code": outcome,
            "amount_refunded": {"currency_code": "USD", "value": "4.00"},
        }
    kind = "CUSTOMER.DISPUTE.RESOLVED" if outcome else "CUSTOMER.DISPUTE.CREATED"
    return {"id": "WH-D", "event_type": kind, "resource": resource}


def _amount(value: str, currency: str) -> dict[str, Any]:
    doc: dict[str, Any] = orjson.loads(orjson.dumps(CAPTURE))
    doc["resource"]["amount"] = {"currency_code": currency, "value": value}
    return doc


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        (CAPTURE, ("3C679366HH908993F", SettlementKind.CAPTURE, 1000, "USD", None, "M_PP")),
        (REFUND, ("3C679366HH908993F", SettlementKind.REFUND, 250, "USD",
                  "1Y107995YT783435V", None)),
        (REVERSED, ("3C679366HH908993F", SettlementKind.CHARGEBACK, 250, "USD",
                    "3C679366HH908993F:taken-back", None)),
        (_dispute("RESOLVED_BUYER_FAVOUR"), ("3C679366HH908993F", SettlementKind.CHARGEBACK,
                                             400, "USD", "3C679366HH908993F:taken-back", None)),
        (_dispute("RESOLVED_SELLER_FAVOUR"), None),
        (_dispute(None), None),  # opened: funds held, not taken
        ({**CAPTURE, "event_type": "PAYMENT.AUTHORIZATION.CREATED"}, None),
        ({**CAPTURE, "event_type": "PAYMENT.AUTHORIZATION.VOIDED"}, None),
        ({**CAPTURE, "event_type": "PAYMENT.CAPTURE.DENIED"}, None),
        (_amount("100", "HUF"), ("3C679366HH908993F", SettlementKind.CAPTURE, 10000, "HUF",
                                 None, "M_PP")),
        (_amount("100", "TWD"), ("3C679366HH908993F", SettlementKind.CAPTURE, 10000, "TWD",
                                 None, "M_PP")),
        (_amount("1500", "JPY"), ("3C679366HH908993F", SettlementKind.CAPTURE, 1500, "JPY",
                                  None, "M_PP")),
        (_amount("0.01", "USD"), ("3C679366HH908993F", SettlementKind.CAPTURE, 1, "USD",
                                  None, "M_PP")),
    ],
)  # fmt: skip
def test_events_map_to_their_movements(doc: dict[str, Any], expected: Any) -> None:
    """Each event's movement, keyed by the capture; events that move nothing say None."""
    found = instruction(doc["event_type"], doc)
    if expected is None:
        assert found is None
        return
    assert found is not None
    assert (
        found.settlement_id, found.kind, found.amount_minor, found.currency, found.refund_id,
        found.merchant_id,
    ) == expected  # fmt: skip
    assert found.source_event_id == doc["id"]


@pytest.mark.parametrize(
    ("value", "currency"),
    [("100.50", "HUF"), ("100.5", "TWD"), ("5.5", "JPY"), ("10.005", "USD"), ("10", "XXX1")],
)
def test_amounts_finer_than_paypal_writes_are_refused_never_rounded(
    value: str, currency: str
) -> None:
    """HUF and TWD take no decimals at PayPal though ISO 4217 gives them two."""
    with pytest.raises(FieldTypeInvalid):
        instruction("PAYMENT.CAPTURE.COMPLETED", _amount(value, currency))


@pytest.mark.parametrize("links", [lambda ls: [ls[0]], lambda ls: ["up", [ls[1]], None, ls[0]]])
def test_a_refund_without_its_capture_link_is_a_missing_field(
    links: Callable[[list[Any]], list[Any]],
) -> None:
    """Without its `up` link, or with links that are not objects (a signed body can
    still hold anything), the refund names no capture: a permanent error."""
    doc: dict[str, Any] = orjson.loads(orjson.dumps(REFUND))
    doc["resource"]["links"] = links(doc["resource"]["links"])
    with pytest.raises(MissingField):
        instruction("PAYMENT.CAPTURE.REFUNDED", doc)


def test_the_provider_is_registered_with_its_certificate_source() -> None:
    assert get_provider("paypal") is PAYPAL
    assert PAYPAL.certificate is not None
    assert set(PAYPAL.movements.types if PAYPAL.movements else ()) == {
        "PAYMENT.CAPTURE.COMPLETED",
        "PAYMENT.CAPTURE.REFUNDED",
        "PAYMENT.CAPTURE.REVERSED",
        "CUSTOMER.DISPUTE.RESOLVED",
    }


@pytest.mark.parametrize(
    ("scheme", "table", "key"),
    [
        ("paypal", {}, "webhook_id"),  # PayPal signs it: required
        ("paypal", {"webhook_id": "WH", "cert_extra_hosts": "127.0.0.1:1"}, "cert_extra_hosts"),
        ("stripe", {"secrets": ["s"], "webhook_id": "WH"}, "webhook_id"),  # not Stripe's
        ("stripe", {"secrets": ["s"], "cert_extra_hosts": ["h:1"]}, "cert_extra_hosts"),
    ],
)
def test_paypal_settings_are_checked_at_start_up(
    scheme: str, table: dict[str, Any], key: str
) -> None:
    """A missing webhook id, or a PayPal key on another scheme, names its key."""
    with pytest.raises(ConfigError) as raised:
        scheme_params(scheme, table, "providers.p.", {})
    assert raised.value.key == f"providers.p.{key}"


def test_a_paypal_provider_needs_no_secret() -> None:
    params = scheme_params("paypal", {"webhook_id": "WH"}, "providers.p.", {})
    assert params.secrets == ()
    assert params.extra["webhook_id"] == "WH"
