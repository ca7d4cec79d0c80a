"""A captured signature cannot mint events (real HTTP, PostgreSQL and JetStream): a
body-only signature replayed under forged delivery ids and chosen event types is one row
and one message; types outside a provider's allow-list are recorded and parked, never
published; only allowed headers are stored, bounded, and never a signature."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import orjson
import pytest

from gateway import cli
from gateway.core.bodies.content import MAX_HEADERS_CHARS, NEVER_STORED
from tests.support import vectors
from tests.support.config_file import write_toml
from tests.support.deliveries import Delivery, deliver
from tests.support.gateway import RunningServer, config, running_server
from tests.support.services import stream_messages, wait_until

REPLAYS = 50
BODY_ONLY_HMAC = {
    "scheme": "hmac",
    "secrets": ["body-only-secret"],
    "header": "X-Signature",
    "prefix": "sha256=",
    "event_id_from": "header:X-Delivery",
    "event_type_from": "header:X-Event-Type",
}


def body_only_hmac(event_id: str, event_type: str, body: bytes) -> Delivery:
    signature = vectors.generic_hex("body-only-secret", body)
    headers = {
        "Content-Type": "application/json",
        "X-Signature": f"sha256={signature}",
        "X-Delivery": event_id,
        "X-Event-Type": event_type,
    }
    return Delivery("acme", event_id, headers, body)


def signed(provider: str, event_id: str, event_type: str, body: bytes) -> Delivery:
    if provider == "acme":
        return body_only_hmac(event_id, event_type, body)
    return deliver(provider, event_id, event_type, body=body)


def forged(genuine: Delivery, provider: str, i: int) -> Delivery:
    """The captured delivery with a forged id and a chosen type; the signature as captured."""
    id_header, type_header = {
        "github": ("X-GitHub-Delivery", "X-GitHub-Event"),
        "shopify": ("X-Shopify-Webhook-Id", "X-Shopify-Topic"),
        "acme": ("X-Delivery", "X-Event-Type"),
    }[provider]
    headers = genuine.headers | {id_header: f"forged-{i}", type_header: f"chosen.type_{i}"}
    return Delivery(genuine.provider, f"forged-{i}", headers, genuine.body)


async def fetch(dsn: str, sql: str, *args: object) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(dsn)
    try:
        return await conn.fetch(sql, *args)
    finally:
        await conn.close()


def gateway_config(database_url: str, nats_url: str) -> dict[str, Any]:
    doc = config(database_url, nats_url)
    doc["providers"]["acme"] = BODY_ONLY_HMAC
    doc["providers"]["stripe"]["event_types"] = ["payment_intent.*"]
    return doc


@pytest.fixture
async def server(database_url: str, nats_url: str) -> AsyncIterator[RunningServer]:
    async with running_server(gateway_config(database_url, nats_url)) as srv:
        yield srv


async def post(server: RunningServer, d: Delivery) -> tuple[int, Any]:
    answer = await server.client.post(d.path, content=d.body, headers=d.headers)
    return answer.status_code, answer.json()


async def messages_for(nats_url: str, provider: str) -> list[str]:
    return [
        h["Nats-Msg-Id"]
        for _, h, _ in await stream_messages(nats_url)
        if h["Nats-Msg-Id"].startswith(f"{provider}:")
    ]


@pytest.mark.parametrize("provider", ["github", "shopify", "acme"])
async def test_a_captured_body_only_signature_mints_no_event(
    server: RunningServer, database_url: str, nats_url: str, provider: str
) -> None:
    """One genuine delivery, then 50 replays of its signature with forged ids and chosen
    types, all at once (group commits, several writers): one row, one message, every
    replay answered `duplicate` with the id it claimed; a genuine event after is new."""
    body = orjson.dumps({"order": {"id": 1, "total": "12.00"}, "provider": provider})
    genuine = signed(provider, "genuine-1", "orders.create", body)
    assert await post(server, genuine) == (200, {"status": "accepted", "event_id": "genuine-1"})

    answers = await asyncio.gather(
        *(post(server, forged(genuine, provider, i)) for i in range(REPLAYS))
    )
    assert answers == [
        (200, {"status": "duplicate", "event_id": f"forged-{i}"}) for i in range(REPLAYS)
    ]
    # Again one at a time, now that every digest and forged id has been seen once.
    assert await post(server, forged(genuine, provider, 0)) == (
        200, {"status": "duplicate", "event_id": "forged-0"},
    )  # fmt: skip

    after = signed(provider, "genuine-2", "orders.update", body + b" ")
    assert await post(server, after) == (200, {"status": "accepted", "event_id": "genuine-2"})
    stored = await fetch(
        database_url, "SELECT event_id, event_type FROM processed_webhooks ORDER BY id"
    )
    assert [(r["event_id"], r["event_type"]) for r in stored] == [
        ("genuine-1", "orders.create"),
        ("genuine-2", "orders.update"),
    ]

    async def both_published() -> bool:
        return len(await messages_for(nats_url, provider)) >= 2

    await wait_until(both_published)
    await asyncio.sleep(0.5)  # time for a stray third message to show up
    assert sorted(await messages_for(nats_url, provider)) == [
        f"{provider}:genuine-1",
        f"{provider}:genuine-2",
    ]


async def test_a_replay_of_one_of_its_forged_ids_with_another_body_is_still_new(
    server: RunningServer, database_url: str
) -> None:
    """A forged id answered `duplicate` is owned by no row: a genuine event that later
    carries that id is accepted (the gateway's memory of keys must not have learnt it)."""
    body = b'{"n": 1}'
    genuine = signed("github", "g-1", "push", body)
    assert (await post(server, genuine))[1]["status"] == "accepted"
    assert (await post(server, forged(genuine, "github", 7)))[1]["status"] == "duplicate"
    later = signed("github", "forged-7", "push", b'{"n": 2}')
    assert await post(server, later) == (200, {"status": "accepted", "event_id": "forged-7"})


@pytest.mark.parametrize("provider", ["stripe", "standard"])
async def test_ids_in_signed_content_stay_distinct_events(
    server: RunningServer, database_url: str, provider: str
) -> None:
    """Where the signature covers the id, equal bodies under distinct ids are distinct."""
    body = None if provider == "stripe" else b'{"type": "payment_intent.succeeded"}'
    for event_id in ("evt_a", "evt_b"):
        d = deliver(provider, event_id, "payment_intent.succeeded", body=body)
        assert await post(server, d) == (200, {"status": "accepted", "event_id": event_id})
    stored = await fetch(database_url, "SELECT body_sha256 FROM processed_webhooks")
    assert [r["body_sha256"] for r in stored] == [None, None]  # nothing hashed, nothing needed


async def test_a_type_outside_the_allow_list_is_recorded_parked_and_replayable(
    server: RunningServer, database_url: str, nats_url: str, tmp_path: Path
) -> None:
    """200 and a row, a DLQ row `EVENT_TYPE_NOT_ALLOWED`, no message (so no settlement);
    `dlq replay` fails while the config still refuses the type, and publishes it once
    the config admits it."""
    refused = deliver("stripe", "evt_refund", "charge.refunded")
    assert await post(server, refused) == (200, {"status": "accepted", "event_id": "evt_refund"})
    allowed = deliver("stripe", "evt_pi", "payment_intent.succeeded")
    assert await post(server, allowed) == (200, {"status": "accepted", "event_id": "evt_pi"})

    rows = await fetch(database_url, "SELECT event_id, subject FROM processed_webhooks ORDER BY id")
    assert [(r["event_id"], r["subject"]) for r in rows] == [
        ("evt_refund", None),
        ("evt_pi", "webhooks.stripe.payment_intent.succeeded"),
    ]
    dlq = await fetch(database_url, "SELECT stage, error_class, event_id FROM dlq_webhooks")
    assert [tuple(r) for r in dlq] == [("ingest", "EVENT_TYPE_NOT_ALLOWED", "evt_refund")]

    async def published() -> list[str]:
        return await messages_for(nats_url, "stripe")

    assert await wait_until(published) == ["stripe:evt_pi"]

    doc = gateway_config(database_url, nats_url)
    cfg = str(write_toml(tmp_path / "gateway.toml", doc))
    still = await asyncio.to_thread(cli.main, ["dlq", "replay", "--all", "--config", cfg])
    assert still == 1  # the config still refuses the type
    doc["providers"]["stripe"]["event_types"] = ["payment_intent.*", "charge.refunded"]
    cfg = str(write_toml(tmp_path / "gateway.toml", doc))
    fixed = await asyncio.to_thread(cli.main, ["dlq", "replay", "--all", "--config", cfg])
    assert fixed == 0

    async def both() -> bool:
        return len(await published()) >= 2

    await wait_until(both)
    assert sorted(await published()) == ["stripe:evt_pi", "stripe:evt_refund"]
    (row,) = await fetch(
        database_url,
        "SELECT is_resolved, error_class FROM dlq_webhooks WHERE event_id = 'evt_refund'",
    )
    assert row["is_resolved"] is True


async def test_stored_headers_are_allowed_bounded_and_never_a_signature(
    server: RunningServer, database_url: str
) -> None:
    """Junk headers (one of 4 MiB) and every credential a sender might add are not stored;
    the GitHub headers that describe the event are; a genuine event after is accepted."""
    d = deliver("github", "gh-headers", "push")
    d.headers |= {
        "X-GitHub-Hook-ID": "42",
        "User-Agent": "GitHub-Hookshot/" + "u" * 4000,
        "Authorization": "Bearer leaked",
        "Cookie": "session=leaked",
        "X-Junk": "j" * 4096,
    }
    assert (await post(server, d))[1]["status"] == "accepted"
    (row,) = await fetch(database_url, "SELECT headers::text AS h FROM processed_webhooks")
    headers = orjson.loads(row["h"])
    assert set(headers) == {
        "content-type", "user-agent", "x-github-delivery", "x-github-event", "x-github-hook-id",
    }  # fmt: skip
    assert len(headers["user-agent"]) == 1024

    huge = deliver("github", "gh-huge", "push", body=b'{"huge": true}')
    huge.headers["X-Junk"] = "j" * (4 << 20)
    answer = await server.client.post(huge.path, content=huge.body, headers=huge.headers)
    # Accepted, or refused at the HTTP edge if it limits header sizes: never stored whole.
    assert answer.status_code in (200, 431), answer.text
    for r in await fetch(database_url, "SELECT headers::text AS h FROM processed_webhooks"):
        stored = orjson.loads(r["h"])
        assert not set(stored) & NEVER_STORED and "x-hub-signature-256" not in stored
        assert sum(len(k) + len(v) for k, v in stored.items()) <= MAX_HEADERS_CHARS
    dlq = await fetch(database_url, "SELECT headers::text AS h FROM dlq_webhooks")
    assert dlq == []

    after = deliver(
        "github", "gh-after", "push", body=b'{"after": ' + str(time.time()).encode() + b"}"
    )
    assert await post(server, after) == (200, {"status": "accepted", "event_id": "gh-after"})
