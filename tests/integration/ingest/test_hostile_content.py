"""Weird content end to end (real HTTP, PostgreSQL and JetStream): a verified webhook is
recorded and parked with a precise error class, never refused and never a 5xx, and a
genuine webhook in the same commit group is accepted and published; `/v1/events`
refuses the same content with 400."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import asyncpg
import pytest

from gateway.adapters.postgres.webhooks import insert_events
from gateway.core.events.model import webhook_event
from gateway.core.signatures.base import FieldRef
from tests.integration.dlq.test_dlq_cli import arun, toml
from tests.support.deliveries import Delivery, deliver
from tests.support.gateway import BILLING_TOKEN, RunningServer, config, running_server
from tests.support.services import stream_messages, wait_until

DEEP = b'{"id": "evt_deep", "type": "t", "a": ' + b"[" * 1100 + b"]" * 1100 + b"}"


def digest(body: bytes) -> str:
    return "sha256:" + hashlib.sha256(body).hexdigest()


async def rows(dsn: str, sql: str, *args: object) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(dsn)
    try:
        return await conn.fetch(sql, *args)
    finally:
        await conn.close()


@pytest.fixture
async def server(database_url: str, nats_url: str) -> AsyncIterator[RunningServer]:
    async with running_server(config(database_url, nats_url)) as srv:
        yield srv


def _with_header(d: Delivery, name: str, value: str) -> Delivery:
    d.headers[name] = value
    return d


def _without_header(d: Delivery, name: str) -> Delivery:
    del d.headers[name]
    return d


def _stripe_id(id_json: bytes) -> Delivery:
    """A signed Stripe body whose `id` is `id_json` (raw JSON text)."""
    return deliver("stripe", "x", body=b'{"id": ' + id_json + b', "type": "charge.succeeded"}')


def _stripe_id_case(id_json: bytes, case_id: str) -> object:
    body = b'{"id": ' + id_json + b', "type": "charge.succeeded"}'
    return pytest.param(lambda: _stripe_id(id_json), digest(body), "EVENT_ID_INVALID", id=case_id)


LONG_ID = "e" * 256
ARRAY_BODY = b'[{"id": "evt_in_array", "type": "charge.succeeded"}]'
GITHUB_BODY = deliver("github", "gh_1", "push").body
SHOPIFY_BODY = deliver("shopify", "sh_1", "orders/create").body
STANDARD_BODY = b'{"type": "invoice.paid", "data": {}}'


# (delivery, expected event id, expected error class)
CASES = [
    pytest.param(
        lambda: deliver("stripe", "x", body=b'{"id": "evt_nul", "type": "payment.\\u0000ok"}'),
        "evt_nul", "EVENT_TYPE_INVALID", id="stripe-type-nul",
    ),
    pytest.param(
        lambda: deliver("stripe", "x", body=b'{"id": "evt_crlf", "type": "a\\r\\nX-Evil: 1"}'),
        "evt_crlf", "EVENT_TYPE_INVALID", id="stripe-type-crlf",
    ),
    pytest.param(
        lambda: deliver("stripe", "x", body=b'{"id": "evt\\u0000id", "type": "t"}'),
        digest(b'{"id": "evt\\u0000id", "type": "t"}'), "EVENT_ID_INVALID", id="stripe-id-nul",
    ),
    pytest.param(
        lambda: deliver("stripe", "x", body=b'\xef\xbb\xbf{"id": "evt_bom", "type": "t"}'),
        digest(b'\xef\xbb\xbf{"id": "evt_bom", "type": "t"}'), "PAYLOAD_NOT_JSON", id="stripe-bom",
    ),
    pytest.param(
        lambda: deliver("stripe", "x", body=b'{"id": "evt_inf", "type": "t", "n": 1e400}'),
        digest(b'{"id": "evt_inf", "type": "t", "n": 1e400}'), "PAYLOAD_NOT_JSON",
        id="stripe-number-infinite",
    ),
    pytest.param(
        lambda: deliver("stripe", "x", body=b'{"id": "evt_sur", "type": "\\ud800"}'),
        digest(b'{"id": "evt_sur", "type": "\\ud800"}'), "PAYLOAD_NOT_JSON",
        id="stripe-lone-surrogate",
    ),
    pytest.param(
        lambda: deliver("stripe", "x", body=DEEP), digest(DEEP), "PAYLOAD_NOT_JSON",
        id="stripe-nested-1100-levels",
    ),
    pytest.param(
        lambda: deliver("paddle", "x", body=b"{not json"), digest(b"{not json"),
        "PAYLOAD_NOT_JSON", id="paddle-unparseable",
    ),
    pytest.param(
        lambda: deliver("hmac", "x", body=b"{not json"), digest(b"{not json"),
        "PAYLOAD_NOT_JSON", id="hmac-json-id-unparseable",
    ),
    pytest.param(  # a tab is legal in an HTTP header value, and still no event type
        lambda: deliver("github", "gh_tab", "push\tpull"), "gh_tab", "EVENT_TYPE_INVALID",
        id="github-type-tab",
    ),
    pytest.param(
        lambda: deliver("github", "gh\tid", "push"),
        digest(deliver("github", "gh\tid", "push").body), "EVENT_ID_INVALID", id="github-id-tab",
    ),
    # Signed, but no usable id: kept under the body's digest (these were a 400, and lost).
    _stripe_id_case(b"null", "stripe-id-null"),
    _stripe_id_case(b"1e3", "stripe-id-number-with-exponent"),
    _stripe_id_case(b"12.5", "stripe-id-float"),
    _stripe_id_case(b"true", "stripe-id-true"),
    _stripe_id_case(b'["evt_1", "evt_2"]', "stripe-id-list"),
    _stripe_id_case(b'{"v": "evt_1"}', "stripe-id-object"),
    _stripe_id_case(b'"   "', "stripe-id-whitespace"),
    _stripe_id_case(b'""', "stripe-id-empty"),
    _stripe_id_case(f'"{LONG_ID}"'.encode(), "stripe-id-256-characters"),
    pytest.param(
        lambda: deliver("stripe", "x", body=b'{"type": "charge.succeeded"}'),
        digest(b'{"type": "charge.succeeded"}'), "EVENT_ID_INVALID", id="stripe-id-absent",
    ),
    pytest.param(
        lambda: deliver("stripe", "x", body=ARRAY_BODY), digest(ARRAY_BODY), "EVENT_ID_INVALID",
        id="stripe-body-a-json-array",
    ),
    pytest.param(
        lambda: deliver("paddle", "x", body=b'{"event_id": null, "event_type": "t"}'),
        digest(b'{"event_id": null, "event_type": "t"}'), "EVENT_ID_INVALID",
        id="paddle-id-null",
    ),
    pytest.param(
        lambda: deliver("hmac", "x", body=b'{"event_id": false, "type": "t"}'),
        digest(b'{"event_id": false, "type": "t"}'), "EVENT_ID_INVALID", id="hmac-id-false",
    ),
    pytest.param(  # the id is signed: a sender may sign any length
        lambda: deliver("standard", "m" * 256, body=STANDARD_BODY), digest(STANDARD_BODY),
        "EVENT_ID_INVALID", id="standard-id-256-characters",
    ),
    pytest.param(
        lambda: _without_header(deliver("github", "gh_1", "push"), "X-GitHub-Delivery"),
        digest(GITHUB_BODY), "EVENT_ID_INVALID", id="github-id-header-absent",
    ),
    pytest.param(
        lambda: _with_header(deliver("github", "gh_1", "push"), "X-GitHub-Delivery", ""),
        digest(GITHUB_BODY), "EVENT_ID_INVALID", id="github-id-header-blank",
    ),
    pytest.param(
        lambda: _without_header(deliver("shopify", "sh_1", "orders/create"),
                                "X-Shopify-Webhook-Id"),
        digest(SHOPIFY_BODY), "EVENT_ID_INVALID", id="shopify-id-header-absent",
    ),
    pytest.param(
        lambda: deliver("shopify", LONG_ID, "orders/create", body=SHOPIFY_BODY),
        digest(SHOPIFY_BODY), "EVENT_ID_INVALID", id="shopify-id-header-256-characters",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("make", "event_id", "error_class"), CASES)
async def test_weird_content_is_recorded_parked_and_never_published(
    server: RunningServer,
    database_url: str,
    nats_url: str,
    make: object,
    event_id: str,
    error_class: str,
) -> None:
    """Sent together with a genuine event (one commit group where the timing allows): the
    weird one is accepted and parked once, the genuine one accepted and published, and a
    retry of the same bytes is a duplicate."""
    assert callable(make)
    bad: Delivery = make()
    good = deliver("stripe", "evt_genuine_after")
    bad_answer, good_answer = await asyncio.gather(
        server.client.post(bad.path, content=bad.body, headers=bad.headers),
        server.client.post(good.path, content=good.body, headers=good.headers),
    )
    assert (bad_answer.status_code, bad_answer.json()) == (
        200,
        {"status": "accepted", "event_id": event_id},
    )
    assert good_answer.status_code == 200, good_answer.text
    again = await server.client.post(bad.path, content=bad.body, headers=bad.headers)
    assert again.json() == {"status": "duplicate", "event_id": event_id}

    stored = await rows(
        database_url,
        "SELECT id, provider, event_id, subject, body FROM processed_webhooks ORDER BY event_id",
    )
    by_id = {r["event_id"]: r for r in stored}
    assert set(by_id) == {event_id, "evt_genuine_after"}
    assert by_id[event_id]["subject"] is None
    assert bytes(by_id[event_id]["body"]) == bad.body  # kept byte for byte
    dlq = await rows(database_url, "SELECT * FROM dlq_webhooks")
    assert [(r["stage"], r["error_class"], r["event_id"]) for r in dlq] == [
        ("ingest", error_class, event_id)
    ]
    assert dlq[0]["webhook_id"] == by_id[event_id]["id"]
    assert bytes(dlq[0]["payload"]) == bad.body

    async def genuine_published() -> bool:
        return len(await stream_messages(nats_url)) >= 1

    await wait_until(genuine_published)
    messages = await stream_messages(nats_url)
    assert [m[1]["Nats-Msg-Id"] for m in messages] == ["stripe:evt_genuine_after"]
    metrics = (await server.client.get("/metrics")).text
    parked = [
        line
        for line in metrics.splitlines()
        if line.startswith("gateway_dlq_total{") and f'error_class="{error_class}"' in line
    ]
    assert len(parked) == 1 and 'stage="ingest"' in parked[0]
    assert float(parked[0].rsplit(" ", 1)[1]) == 1


@pytest.mark.parametrize(
    "body",
    [
        b'{"type": "billing.a\\u0000b", "data": {}}',
        b'{"type": "billing.a\\r\\nX-Evil: 1", "data": {}}',
        b'\xef\xbb\xbf{"type": "billing.a", "data": {}}',
        b'{"type": "billing.a", "data": {"n": 1e400}}',
        b'{"type": "billing.a", "data": ' + b"[" * 1100 + b"]" * 1100 + b"}",
    ],
    ids=["type-nul", "type-crlf", "bom", "number-infinite", "nested-1100-levels"],
)
async def test_internal_publish_with_weird_content_is_a_400(
    server: RunningServer, database_url: str, body: bytes
) -> None:
    """Internal publishers get a 400 to fix their code; nothing is stored; the next good
    publish is accepted."""
    headers = {"authorization": f"Bearer {BILLING_TOKEN}", "content-type": "application/json"}
    bad = await server.client.post(
        "/v1/events", content=body, headers=headers | {"idempotency-key": "k1"}
    )
    assert bad.status_code == 400, bad.text
    assert bad.json()["error"] == "bad_request"
    assert await rows(database_url, "SELECT 1 FROM processed_webhooks") == []
    good = await server.client.post(
        "/v1/events",
        json={"type": "billing.a", "data": {}},
        headers=headers | {"idempotency-key": "k2"},
    )
    assert good.json() == {"status": "accepted", "event_id": "k2"}


async def test_headers_with_nul_are_stored_as_jsonb(database_url: str) -> None:
    """HTTP servers refuse a NUL in a header before the gateway sees it, so this drives the
    shaping rule and the real INSERT directly: the row and its dead letter are stored
    (jsonb refuses `\\u0000`, SQLSTATE 22P05, unless it is replaced)."""
    event = webhook_event(
        "stripe",
        FieldRef("json", "id"),
        FieldRef("json", "type"),
        {"user-agent": "a\x00b", "x-\x00": "v"},
        b'{"id": "evt_h", "type": "t"}',
        datetime.now(UTC),
    )
    conn = await asyncpg.connect(database_url)
    try:
        inserted = await insert_events(conn, [event])
    finally:
        await conn.close()
    assert list(inserted) == [("stripe", "evt_h")]
    (row,) = await rows(database_url, "SELECT headers::text AS h, subject FROM processed_webhooks")
    assert "a\ufffdb" in row["h"] and row["subject"] is None
    dlq = await rows(database_url, "SELECT error_class FROM dlq_webhooks")
    assert [r["error_class"] for r in dlq] == ["HEADERS_INVALID"]


async def test_an_integer_id_is_recorded_under_its_decimal_text(
    server: RunningServer, database_url: str
) -> None:
    """A number that is an integer is a usable id (a generic sender may number its events):
    recorded as it is, clean, and its retry is a duplicate."""
    d = deliver("stripe", "x", body=b'{"id": 1234567, "type": "charge.succeeded"}')
    for status in ("accepted", "duplicate"):
        answer = await server.client.post(d.path, content=d.body, headers=d.headers)
        assert answer.json() == {"status": status, "event_id": "1234567"}
    stored = await rows(database_url, "SELECT event_id, subject FROM processed_webhooks")
    assert [(r["event_id"], r["subject"]) for r in stored] == [
        ("1234567", "webhooks.stripe.charge.succeeded")
    ]
    assert await rows(database_url, "SELECT 1 FROM dlq_webhooks") == []


@pytest.mark.parametrize("key", [None, "k" * 256, "a\tb"], ids=["absent", "256-characters", "tab"])
async def test_internal_publish_without_a_usable_key_is_still_a_400(
    server: RunningServer, database_url: str, key: str | None
) -> None:
    """`/v1/events` keeps its 400 for an Idempotency-Key a webhook's id would be parked for."""
    headers = {"authorization": f"Bearer {BILLING_TOKEN}"}
    if key is not None:
        headers["idempotency-key"] = key
    answer = await server.client.post(
        "/v1/events", json={"type": "billing.a", "data": {}}, headers=headers
    )
    assert answer.status_code == 400, answer.text
    assert await rows(database_url, "SELECT 1 FROM processed_webhooks") == []


async def test_a_replayed_event_without_a_usable_id_stays_parked(
    tmp_path: Path, server: RunningServer, database_url: str, nats_url: str
) -> None:
    """`gateway dlq replay` re-reads the stored request, finds no usable id again, and
    leaves the row parked with a message saying why and what to do; nothing is published,
    and the recorded row is neither changed nor doubled."""
    d = deliver("stripe", "x", body=b'{"id": null, "type": "charge.succeeded"}')
    answer = await server.client.post(d.path, content=d.body, headers=d.headers)
    assert answer.json() == {"status": "accepted", "event_id": digest(d.body)}
    cfg = tmp_path / "gateway.toml"
    cfg.write_text(toml(config(database_url, nats_url)), encoding="utf-8")

    result = await arun("dlq", "replay", "--all", "--stage", "ingest", "--config", str(cfg))
    assert result.returncode == 1, result.stderr
    (dlq,) = await rows(database_url, "SELECT * FROM dlq_webhooks")
    assert result.stdout.splitlines() == [
        f"failed   {dlq['id']} ingest stripe/{digest(d.body)}: EVENT_ID_INVALID: "
        "no event id: field 'id' is absent or null; an event without a usable id stays "
        "parked: have the provider send it again with one, or resolve this row once "
        "handled by hand",
        "replayed 0, failed 1, skipped 0",
    ]
    assert (dlq["is_resolved"], dlq["attempts"], dlq["error_class"]) == (
        False,
        2,
        "EVENT_ID_INVALID",
    )
    assert bytes(dlq["payload"]) == d.body
    (stored,) = await rows(database_url, "SELECT event_id, subject, body FROM processed_webhooks")
    assert (stored["event_id"], stored["subject"], bytes(stored["body"])) == (
        digest(d.body),
        None,
        d.body,
    )
    assert await stream_messages(nats_url) == []
