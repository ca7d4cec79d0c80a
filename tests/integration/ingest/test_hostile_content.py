"""Weird content end to end (real HTTP, PostgreSQL and JetStream): a verified webhook is
recorded and parked with a precise error class, never refused and never a 5xx, and a
genuine webhook in the same commit group is accepted and published; `/v1/events`
refuses the same content with 400."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import asyncpg
import pytest

from gateway.adapters.postgres.webhooks import insert_events
from gateway.core.model import webhook_event
from gateway.core.signatures.base import FieldRef
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
