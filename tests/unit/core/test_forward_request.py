"""The request `gateway forward` sends: a stable id, the gateway's headers, and a
signature each provider's own verifier (the project's, which the corpus tests hold to
the official libraries) accepts, with every secret of a rotation."""

from __future__ import annotations

import orjson
import pytest

from gateway.core.forward.request import (
    ForwardedEvent,
    ResignAs,
    delivery_request,
    envelope,
    webhook_id,
)
from gateway.core.providers import get_scheme
from gateway.core.signatures import SchemeParams

NOW_S = 1_800_000_000
NEW = "whsec_" + "bmV3LWZvcndhcmQtc2VjcmV0LTEyMzQ1Njc4OTA="
OLD = "whsec_" + "b2xkLWZvcndhcmQtc2VjcmV0LTEyMzQ1Njc4OTA="
EVENT = ForwardedEvent(
    provider="stripe",
    event_id="evt_1",
    event_type="payment_intent.succeeded",
    received_at="2026-12-04T10:00:00+00:00",
    body=b'{"id":"evt_1",  "type":"payment_intent.succeeded"}',
    order_key="pi_1",
    key_seq=3,
    traceparent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
)


def test_the_delivery_id_is_stable_and_tells_providers_apart() -> None:
    assert webhook_id("stripe", "evt_1") == webhook_id("stripe", "evt_1")
    assert webhook_id("stripe", "evt_1") != webhook_id("paddle", "evt_1")
    assert webhook_id("stripe", "evt_1").startswith("msg_")
    # No separator trick: ("a", "b:c") and ("a:b", "c") differ.
    assert webhook_id("a", "b:c") != webhook_id("a:b", "c")


def test_the_body_is_sent_as_stored_with_the_gateway_headers() -> None:
    body, headers = delivery_request(EVENT, 2, NOW_S, resign_as=ResignAs.STANDARD, secrets=(NEW,))
    assert body == EVENT.body
    delivery_id = webhook_id("stripe", "evt_1")
    assert headers["webhook-id"] == headers["Idempotency-Key"] == delivery_id
    assert headers["webhook-timestamp"] == str(NOW_S)
    assert headers["Gateway-Attempt"] == "2"
    assert headers["Gateway-Order-Key"] == "pi_1"
    assert headers["Gateway-Key-Seq"] == "3"
    assert headers["Gateway-Event-Type"] == "payment_intent.succeeded"
    assert headers["traceparent"] == EVENT.traceparent


@pytest.mark.parametrize("resign_as", list(ResignAs))
def test_each_signature_verifies_with_that_scheme(resign_as: ResignAs) -> None:
    body, headers = delivery_request(EVENT, 1, NOW_S, resign_as=resign_as, secrets=(NEW,))
    scheme = get_scheme(resign_as.value)
    lower = {k.lower(): v for k, v in headers.items()}
    scheme.verify(SchemeParams(secrets=(NEW,)), lower, body, NOW_S)
    assert lower["webhook-id"] == webhook_id("stripe", "evt_1")


@pytest.mark.parametrize("resign_as", [ResignAs.STANDARD, ResignAs.STRIPE, ResignAs.PADDLE])
def test_during_a_rotation_either_secret_verifies(resign_as: ResignAs) -> None:
    body, headers = delivery_request(EVENT, 1, NOW_S, resign_as=resign_as, secrets=(NEW, OLD))
    lower = {k.lower(): v for k, v in headers.items()}
    scheme = get_scheme(resign_as.value)
    for secret in (NEW, OLD):
        scheme.verify(SchemeParams(secrets=(secret,)), lower, body, NOW_S)


def test_a_receiver_that_knows_neither_secret_refuses() -> None:
    body, headers = delivery_request(
        EVENT, 1, NOW_S, resign_as=ResignAs.STANDARD, secrets=(NEW, OLD)
    )
    other = "whsec_" + "b3RoZXItc2VjcmV0LTEyMzQ1Njc4OTAxMjM0NQ=="
    with pytest.raises(Exception, match="no configured secret"):
        get_scheme("standard").verify(
            SchemeParams(secrets=(other,)),
            {k.lower(): v for k, v in headers.items()},
            body,
            NOW_S,
        )


def test_no_secret_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one secret"):
        delivery_request(EVENT, 1, NOW_S, resign_as=ResignAs.STANDARD, secrets=())


def test_the_envelope_embeds_the_body_byte_for_byte() -> None:
    wrapped = envelope(EVENT)
    assert EVENT.body in wrapped  # the stored bytes, spacing and all
    doc = orjson.loads(wrapped)
    assert doc["provider"] == "stripe"
    assert doc["type"] == "payment_intent.succeeded"
    assert doc["received_at"] == EVENT.received_at
    assert doc["body"]["id"] == "evt_1"


def test_a_body_that_is_not_json_travels_in_base64() -> None:
    event = ForwardedEvent("hmac", "e1", "t", "2026-12-04T10:00:00+00:00", b"a=1&b=\xff")
    doc = orjson.loads(envelope(event))
    assert doc["body_base64"] == "YT0xJmI9/w=="
    assert "body" not in doc


def test_the_envelope_is_what_is_signed() -> None:
    body, headers = delivery_request(
        EVENT, 1, NOW_S, resign_as=ResignAs.STANDARD, secrets=(NEW,), wrap=True
    )
    assert body == envelope(EVENT)
    get_scheme("standard").verify(
        SchemeParams(secrets=(NEW,)), {k.lower(): v for k, v in headers.items()}, body, NOW_S
    )


def test_an_id_or_type_beyond_ascii_travels_escaped() -> None:
    """HTTP/1.1 clients refuse such header values: one event must not stop delivery."""
    event = ForwardedEvent("stripe", "evt_café", "paiement.réussi", "2026-12-04T00:00:00Z", b"{}")
    _body, headers = delivery_request(event, 1, NOW_S, resign_as=ResignAs.STANDARD, secrets=(NEW,))
    assert headers["Gateway-Event-Id"] == "evt_caf\\xe9"
    assert headers["Gateway-Event-Type"] == "paiement.r\\xe9ussi"
    assert all(v.isascii() for v in headers.values())
    assert headers["webhook-id"] == webhook_id("stripe", "evt_café")  # from the real id
