"""What real providers send goes through: 1,076 deliveries taken byte for byte from
public repositories (GitHub, Stripe, Shopify, Paddle, Standard Webhooks senders, and
WooCommerce, Checkout.com and Bitbucket through the generic `hmac` scheme), each signed
with its scheme's rules and sent to a real gateway: every one verified and recorded once
under the id its provider defines, none parked, and each recorded event published once.

The corpus lives outside the repository (its sources and licences are in its
`MANIFEST.json`); point `GATEWAY_TEST_CORPUS` at it, or the test is skipped.
"""

from __future__ import annotations

import asyncpg
import pytest

from tests.support.corpus import (
    BODY_ONLY,
    CORPUS,
    corpus_config,
    corpus_items,
    provider_id,
    signed,
)
from tests.support.gateway import running_server
from tests.support.services import stream_messages, wait_until

pytestmark = pytest.mark.skipif(not CORPUS.exists(), reason=f"no corpus at {CORPUS}")


async def test_every_real_payload_is_recorded_once_and_published(
    database_url: str, nats_url: str
) -> None:
    items = corpus_items()
    doc = corpus_config(database_url, nats_url)
    seen_ids: set[tuple[str, str]] = set()
    seen_bodies: set[tuple[str, bytes]] = set()
    answers: list[tuple[str, str, str, str]] = []  # (provider, name, status, why)
    async with running_server(doc) as server:
        for index, item in enumerate(items):
            provider = item["provider"]
            headers, body = signed(provider, index, item)
            event_id = provider_id(provider, headers, body)
            answer = await server.client.post(
                f"/webhooks/{provider}", content=body, headers=headers
            )
            assert answer.status_code == 200, (item["name"], answer.text)
            repeat = (provider, event_id) in seen_ids or (
                provider in BODY_ONLY and (provider, body) in seen_bodies
            )
            expected = {"status": "duplicate" if repeat else "accepted", "event_id": event_id}
            assert answer.json() == expected, item["name"]
            seen_ids.add((provider, event_id))
            seen_bodies.add((provider, body))
            answers.append((provider, item["name"], expected["status"], event_id))

    accepted = {(p, event_id) for p, _, status, event_id in answers if status == "accepted"}
    conn = await asyncpg.connect(database_url)
    try:
        rows = await conn.fetch("SELECT provider, event_id, subject FROM processed_webhooks")
        parked = await conn.fetchval("SELECT count(*) FROM dlq_webhooks")
    finally:
        await conn.close()
    assert {(r["provider"], r["event_id"]) for r in rows} == accepted
    assert len(rows) == len(accepted)
    assert [r["event_id"] for r in rows if r["subject"] is None] == []
    assert parked == 0

    async def all_published() -> bool:
        return len(await stream_messages(nats_url)) >= len(accepted)

    await wait_until(all_published, timeout_s=60)
    msg_ids = [headers["Nats-Msg-Id"] for _, headers, _ in await stream_messages(nats_url)]
    assert sorted(msg_ids) == sorted(f"{p}:{event_id}" for p, event_id in accepted)
