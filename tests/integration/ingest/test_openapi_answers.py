"""Every answer the OpenAPI document lists, produced by a real gateway and checked
against the document: one example request per (operation, status, media type), and the
examples must cover the document exactly, so a status documented but never produced, or
produced but not documented, fails here."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlencode

import orjson

from chaos.proxy import FaultProxy
from gateway.core.signatures.adyen_items import signed_body
from gateway.core.signatures.zarinpal import order_signature
from gateway.ingest.app import openapi_document
from tests.support import openapi
from tests.support.confirming import serving
from tests.support.deliveries import deliver
from tests.support.gateway import BILLING_TOKEN, RunningServer, config, running_server
from tests.support.services import free_port

DOC = openapi.load()
ADYEN_KEY = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"
WEBHOOKS, EVENTS = "/webhooks/{provider}", "/v1/events"
CALLBACKS = "/callbacks/{provider}"
#: A Zarinpal callback's query, its order signed with `ZARINPAL_SECRET`.
ZARINPAL_SECRET = "zp-oa-secret"


def _callback_path(authority: str, secret: str = ZARINPAL_SECRET) -> str:
    order = {"order": "o_oa", "amount": "1000", "currency": "IRR", "merchant": "m_oa"}
    query = {**order, "sig": order_signature(secret, order), "Authority": authority,
             "Status": "OK"}  # fmt: skip
    return f"/callbacks/zarinpal?{urlencode(query)}"


GETS = ["/healthz", "/readyz", "/metrics", "/openapi.json"]
LIMITED_TOKEN = "limited-test-token"
HEADER_TIMEOUT_S = 0.5

#: (path, METHOD, status, media type) -> the answer (status, headers, body) it produced.
Answers = dict[tuple[str, str, int, str], tuple[int, dict[str, str], bytes]]
Answer = tuple[int, dict[str, str], bytes]


def _concrete(path: str) -> str:
    return path.replace("{provider}", "stripe")


def _events_headers(token: str = BILLING_TOKEN, key: str | None = "evt-oa-1") -> dict[str, str]:
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    if key is not None:
        headers["Idempotency-Key"] = key
    return headers


EVENT_BODY = orjson.dumps({"type": "invoice.paid", "data": {"invoice": "in_1"}})


async def _http(server: RunningServer, method: str, path: str, **kwargs: Any) -> Answer:
    response = await server.client.request(method, path, **kwargs)
    return response.status_code, dict(response.headers), response.content


async def _raw(port: int, data: bytes, timeout_s: float = 10.0) -> Answer:
    """Send `data` on a new connection; the one answer read until the server closes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    chunks = []
    try:
        writer.write(data)
        await writer.drain()
        with contextlib.suppress(ConnectionError):
            while chunk := await asyncio.wait_for(reader.read(65536), timeout_s):
                chunks.append(chunk)
    finally:
        writer.close()
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    return int(status_line.split()[1]), headers, body


def _head(method: str, path: str, *extra: str) -> bytes:
    return "\r\n".join([f"{method} {path} HTTP/1.1", "Host: gateway", *extra]).encode()


def _operations() -> list[tuple[str, str]]:
    return sorted(openapi.operations(DOC))


async def _edge_head_answers(server: RunningServer, answers: Answers) -> None:
    """400, 408 and 431 for every operation: the server writes them before any routing."""

    async def one(
        path: str, method: str, status: int, data: bytes, media: str = "application/json"
    ) -> None:
        answers[(path, method, status, media)] = await _raw(server.port, data)

    big = "X-Padding: " + "a" * (server.settings.http.max_header_bytes + 1)
    for path, method in _operations():
        absolute = f"{method} http://gateway{_concrete(path)} HTTP/1.1\r\nHost: gateway"
        if method == "GET":  # the ingestion routes' JSON 400 examples are their own
            await one(path, method, 400, absolute.encode() + b"\r\n\r\n")
        control = _head(method, _concrete(path), "X-Note: a\x01b") + b"\r\n\r\n"
        await one(path, method, 400, control, "text/plain")  # not HTTP the parser takes
    await asyncio.gather(
        *(
            one(path, method, 408, _head(method, _concrete(path)) + b"\r\n")  # head unfinished
            for path, method in _operations()
        ),
        *(
            one(path, method, 431, _head(method, _concrete(path), big) + b"\r\n\r\n")
            for path, method in _operations()
        ),
    )


async def _served_answers(server: RunningServer, proxy: FaultProxy, answers: Answers) -> None:
    json = "application/json"
    signed = deliver("stripe", "evt_oa_accepted")
    answers[(WEBHOOKS, "POST", 200, json)] = await _http(
        server, "POST", signed.path, content=signed.body, headers=signed.headers
    )
    # A verified body is never refused for its content: the webhook's 400 is a body
    # that stopped coming (here: its first 10 bytes, then nothing for `request_timeout_s`).
    stalled = deliver("stripe", "evt_oa_stalled")
    head = [f"{name}: {value}" for name, value in stalled.headers.items()]
    answers[(WEBHOOKS, "POST", 400, json)] = await _raw(
        server.port,
        _head("POST", stalled.path, *head, f"Content-Length: {len(stalled.body)}")
        + b"\r\n\r\n"
        + stalled.body[:10],
    )
    answers[(WEBHOOKS, "POST", 401, json)] = await _http(
        server, "POST", signed.path, content=signed.body, headers={"Stripe-Signature": "t=1,v1=00"}
    )
    answers[(WEBHOOKS, "POST", 404, json)] = await _http(
        server, "POST", "/webhooks/nobody", content=signed.body, headers=signed.headers
    )
    too_big = b"x" * (server.settings.http.max_body_bytes + 1)
    answers[(WEBHOOKS, "POST", 413, json)] = await _http(
        server, "POST", signed.path, content=too_big, headers=signed.headers
    )
    # A provider that answers in its own words: Adyen's `[accepted]`, as plain text.
    notification = orjson.dumps({"live": "false", "notificationItems": [
        {"NotificationRequestItem": {"pspReference": "PSPOA0000000001", "eventCode": "REPORT",
                                     "success": "true", "merchantAccountCode": "M",
                                     "amount": {"value": 0, "currency": "EUR"}}}]})  # fmt: skip
    answers[(WEBHOOKS, "POST", 200, "text/plain")] = await _http(
        server, "POST", "/webhooks/adyen", content=signed_body(notification, ADYEN_KEY),
        headers={"Content-Type": "application/json"},
    )  # fmt: skip

    # A provider that refuses in its own code: GoCardless's 498 for a bad signature.
    answers[(WEBHOOKS, "POST", 498, json)] = await _http(
        server, "POST", "/webhooks/gocardless", content=b'{"events": []}',
        headers={"Content-Type": "application/json", "Webhook-Signature": "00" * 32},
    )  # fmt: skip

    # A payer's browser back from Zarinpal: its order not signed by the merchant; a name
    # no callback provider has. (A recorded callback is a 303 with no body.)
    answers[(CALLBACKS, "GET", 401, json)] = await _http(
        server, "GET", _callback_path("A0000000000000000000000000000000OA01", "not-ours")
    )
    answers[(CALLBACKS, "GET", 404, json)] = await _http(server, "GET", "/callbacks/nobody")
    long_query = _callback_path("A0000000000000000000000000000000OA04") + "&x=" + "y" * 2100
    answers[(CALLBACKS, "GET", 414, json)] = await _http(server, "GET", long_query)
    redirected = await _http(server, "GET", _callback_path("A0000000000000000000000000000000OA02"))
    assert redirected[0] == 303 and redirected[1]["location"].startswith("https://shop.example/")

    answers[(EVENTS, "POST", 200, json)] = await _http(
        server, "POST", EVENTS, content=EVENT_BODY, headers=_events_headers()
    )
    answers[(EVENTS, "POST", 400, json)] = await _http(
        server, "POST", EVENTS, content=EVENT_BODY, headers=_events_headers(key=None)
    )
    answers[(EVENTS, "POST", 401, json)] = await _http(
        server, "POST", EVENTS, content=EVENT_BODY, headers=_events_headers(token="wrong")
    )
    answers[(EVENTS, "POST", 403, json)] = await _http(
        server, "POST", EVENTS, content=EVENT_BODY, headers=_events_headers(token=LIMITED_TOKEN)
    )
    answers[(EVENTS, "POST", 413, json)] = await _http(
        server, "POST", EVENTS, content=too_big, headers=_events_headers()
    )

    answers[("/healthz", "GET", 200, json)] = await _http(server, "GET", "/healthz")
    answers[("/readyz", "GET", 200, json)] = await _http(server, "GET", "/readyz")
    answers[("/metrics", "GET", 200, "text/plain")] = await _http(server, "GET", "/metrics")
    answers[("/openapi.json", "GET", 200, json)] = served = await _http(
        server, "GET", "/openapi.json"
    )
    assert served[2] == openapi_document()

    await _edge_head_answers(server, answers)

    # The database out of reach: nothing can be made durable, and the gateway is not ready.
    await proxy.set_enabled(False)
    try:
        outage = deliver("stripe", "evt_oa_outage")
        answers[(WEBHOOKS, "POST", 503, json)] = await _http(
            server, "POST", outage.path, content=outage.body, headers=outage.headers
        )
        answers[(EVENTS, "POST", 503, json)] = await _http(
            server, "POST", EVENTS, content=EVENT_BODY, headers=_events_headers(key="evt-oa-2")
        )
        answers[("/readyz", "GET", 503, json)] = await _http(server, "GET", "/readyz")
        answers[(CALLBACKS, "GET", 503, json)] = await _http(
            server, "GET", _callback_path("A0000000000000000000000000000000OA03")
        )
    finally:
        await proxy.set_enabled(True)


async def _admin_port_answers(server: RunningServer, answers: Answers) -> None:
    """With an admin port, /readyz and /metrics are 404 here; with every connection slot
    taken, the edge answers every operation 503 in plain text."""
    for path in ("/readyz", "/metrics"):
        answers[(path, "GET", 404, "text/plain")] = await _http(server, "GET", path)
    await server.client.aclose()  # its kept-alive connection would hold a slot
    idle = [
        await asyncio.open_connection("127.0.0.1", server.port)
        for _ in range(server.settings.http.max_connections)
    ]
    await asyncio.sleep(0.2)  # let the server take them
    try:
        for path, method in _operations():
            data = _head(method, _concrete(path), "Content-Length: 0") + b"\r\n\r\n"
            answers[(path, method, 503, "text/plain")] = await _raw(server.port, data)
    finally:
        for _, writer in idle:
            writer.close()


@contextlib.asynccontextmanager
async def _proxied_database(database_url: str) -> AsyncIterator[tuple[str, FaultProxy]]:
    proxy = FaultProxy("127.0.0.1", 5432)
    await proxy.start()
    try:
        yield database_url.replace("127.0.0.1:5432", f"127.0.0.1:{proxy.listen_port}"), proxy
    finally:
        await proxy.close()


async def test_every_documented_answer_is_produced_and_matches_the_document(
    database_url: str, nats_url: str
) -> None:
    answers: Answers = {}
    services = {
        "billing": {"token": BILLING_TOKEN, "subjects": ["events.billing.>"]},
        "limited": {"token": LIMITED_TOKEN, "subjects": ["events.limited.allowed"]},
    }
    async with _proxied_database(database_url) as (proxied, proxy):
        doc = config(
            proxied,
            nats_url,
            http={"header_timeout_s": HEADER_TIMEOUT_S, "request_timeout_s": 0.5},
            ingest={"commit_timeout_s": 1.0},
            services=services,
        )
        doc["providers"]["adyen"] = {"scheme": "adyen", "secrets": [ADYEN_KEY]}
        doc["providers"]["gocardless"] = {"scheme": "gocardless", "secrets": ["gc-oa-secret"]}
        doc["providers"]["zarinpal"] = {
            "scheme": "zarinpal", "secrets": [ZARINPAL_SECRET],
            "return_url": "https://shop.example/done", "api_key_env": "ZP_OA",
            "api_url": "http://127.0.0.1:9", "insecure_api_url": True,
            "api_hosts": ["127.0.0.1"],
        }  # fmt: skip
        async with serving(doc, {"ZP_OA": "merchant-id"}) as server:  # Zarinpal's key
            await _served_answers(server, proxy, answers)

    admin = config(database_url, nats_url, http={"admin_port": free_port(), "max_connections": 4})
    async with running_server(admin) as server:
        await _admin_port_answers(server, answers)

    for (path, method, status, media), (got, headers, body) in sorted(answers.items()):
        assert got == status, f"{method} {path}: expected {status}, got {got}: {body[:300]!r}"
        assert openapi.media_type(headers.get("content-type", "")) == media, (path, status)
        openapi.check_answer(DOC, path, method, got, headers, body)
    assert set(answers) == openapi.documented_answers(DOC)
