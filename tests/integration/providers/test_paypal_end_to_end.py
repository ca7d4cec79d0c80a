"""PayPal end to end: events signed as PayPal signs (RSA over the transmission, the
webhook id and the body's CRC32), pointing at a local HTTPS stand-in for PayPal's
certificate host whose certificates come from a test CA of our own, posted to a real
gateway and settled by the real worker on PostgreSQL, NATS JetStream, Redis and the
currency stub.

One capture's life: captured, partly refunded, then reversed; the capture posted again
(a new transmission, as PayPal retries) is a duplicate, and the certificate is fetched
once. Refused with nothing stored: a forged certificate, an expired one, a URL off the
allow-list, a redirect, a tampered body. An unreachable certificate host is a 503 with
nothing stored, never an acceptance."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.integration.providers.test_hmac_providers_end_to_end import ended, settled, stored_ids
from tests.support.gateway import RunningServer, config, running_server
from tests.support.paypal import (
    EXPIRED_PATH,
    FORGED_PATH,
    REDIRECT_PATH,
    WEBHOOK_ID,
    CertHost,
    PayPalKeys,
    cert_host,
)
from tests.support.services import wait_until
from tests.support.settlement import (
    fetch,
    merchant_balance,
    open_merchant,
    running_worker,
    settlement_sections,
)
from tests.support.stub import Stub

MERCHANT = "m_pp_e2e"
CAPTURE_ID = "3C679366HH908993F"
KEYS = PayPalKeys()


@pytest.fixture
def host(tmp_path: Path) -> Iterator[CertHost]:
    with cert_host(KEYS, tmp_path) as running:
        yield running


@pytest.fixture
def doc(
    database_url: str, nats_url: str, stub: Stub, redis_url: str, host: CertHost
) -> dict[str, Any]:
    found = config(database_url, nats_url, **settlement_sections(stub.url, redis_url))
    found["providers"]["paypal"] = {
        "scheme": "paypal",
        "webhook_id": WEBHOOK_ID,
        "cert_extra_hosts": [host.host],
        "cert_extra_ca_file": str(host.ca_file),
    }
    return found


def event(event_id: str, event_type: str, resource: dict[str, Any]) -> bytes:
    return orjson.dumps(
        {"id": event_id, "event_type": event_type, "resource_type": "x", "resource": resource}
    )


def capture(value: str) -> bytes:
    return event("WH-CAP-1", "PAYMENT.CAPTURE.COMPLETED", {
        "id": CAPTURE_ID, "status": "COMPLETED",
        "amount": {"currency_code": "USD", "value": value},
        "payee": {"merchant_id": MERCHANT},
    })  # fmt: skip


def follow_up(event_id: str, event_type: str, own_id: str, value: str) -> bytes:
    up = f"https://api.paypal.com/v2/payments/captures/{CAPTURE_ID}"
    return event(event_id, event_type, {
        "id": own_id, "status": "COMPLETED",
        "amount": {"currency_code": "USD", "value": value},
        "links": [{"rel": "up", "href": up, "method": "GET"}],
    })  # fmt: skip


async def post(
    server: RunningServer, body: bytes, cert_url: str, transmission: str = "t-1", **kw: Any
) -> Any:
    headers = KEYS.sign(body, cert_url, transmission_id=transmission)
    headers.update(kw.pop("override", {}))
    return await server.client.post(
        "/webhooks/paypal",
        content=kw.pop("sent", body),
        headers={"Content-Type": "application/json", **headers},
    )


async def test_a_capture_is_settled_refunded_and_reversed(
    doc: dict[str, Any], database_url: str, host: CertHost
) -> None:
    async with running_server(doc) as server, running_worker(doc) as parts:
        await open_merchant(parts, MERCHANT)
        answer = await post(server, capture("100.00"), host.url())
        assert (answer.status_code, answer.json()["status"]) == (200, "accepted"), answer.text
        await wait_until(lambda: ended(database_url, 1))
        assert await merchant_balance(parts, MERCHANT) == 10_000

        refund = follow_up("WH-REF-1", "PAYMENT.CAPTURE.REFUNDED", "1Y107995YT783435V", "25.00")
        assert (await post(server, refund, host.url(), "t-2")).status_code == 200
        await wait_until(lambda: ended(database_url, 2))
        assert await merchant_balance(parts, MERCHANT) == 7_500

        reversal = follow_up("WH-REV-1", "PAYMENT.CAPTURE.REVERSED", "09E71677NS257044M", "75.00")
        assert (await post(server, reversal, host.url(), "t-3")).status_code == 200
        await wait_until(lambda: ended(database_url, 3))
        assert await merchant_balance(parts, MERCHANT) == 0

        again = await post(server, capture("100.00"), host.url(), "t-retry")
        assert (again.status_code, again.json()["status"]) == (200, "duplicate")

    assert await settled(database_url, "paypal") == [
        ("capture", None, 10_000, MERCHANT),
        ("refund", "1Y107995YT783435V", 2_500, MERCHANT),
        ("chargeback", f"{CAPTURE_ID}:taken-back", 7_500, MERCHANT),
    ]
    assert await stored_ids(database_url, "paypal") == ["WH-CAP-1", "WH-REF-1", "WH-REV-1"]
    assert host.requests == [host.url()[len(host.base) :]]  # fetched once, then cached
    assert await fetch(database_url, "SELECT event_id FROM dlq_webhooks") == []


@pytest.mark.parametrize(
    ("case", "where", "override", "sent"),
    [
        ("forged certificate", FORGED_PATH, {}, None),
        ("expired certificate", EXPIRED_PATH, {}, None),
        ("redirect", REDIRECT_PATH, {}, None),
        ("off the allow-list", "https://evil.example/v1/notifications/certs/C", {}, None),
        ("plain http", "http://api.paypal.com/v1/notifications/certs/C", {}, None),
        ("tampered body", None, {}, capture("999.00")),
        ("another webhook id", None,
         {"PAYPAL-TRANSMISSION-SIG": KEYS.sign(capture("1.00"), "u", webhook_id="WH-X")[
             "PAYPAL-TRANSMISSION-SIG"]}, None),
    ],
)  # fmt: skip
async def test_what_is_not_paypals_is_refused_and_nothing_stored(
    doc: dict[str, Any],
    database_url: str,
    host: CertHost,
    case: str,
    where: str | None,
    override: dict[str, str],
    sent: bytes | None,
) -> None:
    url = host.url(where) if where and where.startswith("/") else (where or host.url())
    body = capture("1.00")
    async with running_server(doc) as server:
        answer = await post(server, body, url, override=override, sent=sent or body)
    assert answer.status_code == 401, (case, answer.text)
    assert await stored_ids(database_url, "paypal") == []
    if where is not None and not where.startswith("/"):
        assert host.requests == []  # refused before anything was fetched


async def test_an_unreachable_certificate_host_is_a_503_and_nothing_is_stored(
    doc: dict[str, Any], database_url: str
) -> None:
    """The host is PayPal's (allowed) but nobody answers: PayPal must send it again."""
    # A port bound and never listened on, held to the end: connections to it are refused,
    # and no other test (another xdist worker's server) can be given it meanwhile.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = f"127.0.0.1:{probe.getsockname()[1]}"
        doc["providers"]["paypal"]["cert_extra_hosts"].append(closed)
        async with running_server(doc) as server:
            url = f"https://{closed}/v1/notifications/certs/CERT-1"
            answer = await post(server, capture("1.00"), url)
            assert answer.status_code == 503, answer.text
            assert answer.headers["retry-after"]
    assert await stored_ids(database_url, "paypal") == []
