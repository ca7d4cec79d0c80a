"""What real providers send goes through: 1,076 deliveries taken byte for byte from
public repositories (GitHub, Stripe, Shopify, Paddle, Standard Webhooks senders, and
WooCommerce, Checkout.com and Bitbucket through the generic `hmac` scheme), each signed
with its scheme's rules and sent to a real gateway: every one verified and recorded once
under the id its provider defines, none parked, and each recorded event published once.

The corpus lives outside the repository (its sources and licences are in its
`MANIFEST.json`); point `GATEWAY_TEST_CORPUS` at it, or the test is skipped.
"""

from __future__ import annotations

import gzip
import os
import time
from pathlib import Path
from typing import Any

import asyncpg
import orjson
import pytest

from tests.support import vectors
from tests.support.gateway import SECRETS, config, running_server
from tests.support.services import stream_messages, wait_until

CORPUS = Path(os.environ.get("GATEWAY_TEST_CORPUS", "/work/shared/corpus")) / "items.jsonl.gz"
SECRET = "corpus-test-secret"
#: The senders without a scheme of their own, as an operator would configure them.
GENERIC = {
    "woocommerce": {
        "header": "X-WC-Webhook-Signature",
        "encoding": "base64",
        "event_id_from": "header:X-WC-Webhook-Delivery-ID",
        "event_type_from": "header:X-WC-Webhook-Topic",
    },
    "bitbucket": {
        "header": "X-Hub-Signature",
        "prefix": "sha256=",
        "event_id_from": "header:X-Request-UUID",
        "event_type_from": "header:X-Event-Key",
    },
    "checkout": {
        "header": "Cko-Signature",
        "event_id_from": "json:id",
        "event_type_from": "json:type",
    },
}
#: Where each provider's event id is: ("json" | "header", name).
ID_FROM = {
    "stripe": ("json", "id"),
    "paddle": ("json", "event_id"),
    "github": ("header", "x-github-delivery"),
    "shopify": ("header", "x-shopify-webhook-id"),
    "standard": ("header", "webhook-id"),
    "woocommerce": ("header", "x-wc-webhook-delivery-id"),
    "bitbucket": ("header", "x-request-uuid"),
    "checkout": ("json", "id"),
}
#: Signed over the body alone with the id outside the signature: a second delivery of
#: the same bytes under another id is a replay, answered `duplicate`.
BODY_ONLY = {"github", "shopify", "woocommerce", "bitbucket"}

pytestmark = pytest.mark.skipif(not CORPUS.exists(), reason=f"no corpus at {CORPUS}")


def signed(provider: str, index: int, item: dict[str, Any]) -> tuple[dict[str, str], bytes]:
    """The item's own headers plus the signature its provider would send."""
    body: bytes = item["body"].encode()
    headers = {k.lower(): v for k, v in item["headers"].items()}
    ts = int(time.time())
    if provider == "stripe":
        headers["stripe-signature"] = f"t={ts},v1={vectors.stripe_v1(SECRETS[provider], ts, body)}"
    elif provider == "paddle":
        headers["paddle-signature"] = f"ts={ts};h1={vectors.paddle_h1(SECRETS[provider], ts, body)}"
    elif provider == "github":
        headers["x-hub-signature-256"] = "sha256=" + vectors.github_sha256(SECRETS[provider], body)
    elif provider == "shopify":
        headers["x-shopify-hmac-sha256"] = vectors.shopify_b64(SECRETS[provider], body)
    elif provider == "standard":  # the corpus has the senders' bodies, not their ids
        msg_id = f"msg_corpus_{index}"
        sig = vectors.standard_v1(SECRETS[provider], msg_id, ts, body)
        headers |= {"webhook-id": msg_id, "webhook-timestamp": str(ts)}
        headers["webhook-signature"] = f"v1,{sig}"
    elif provider == "woocommerce":  # base64 HMAC-SHA256 of the body, like Shopify's
        headers["x-wc-webhook-signature"] = vectors.shopify_b64(SECRET, body)
    elif provider == "bitbucket":
        headers["x-hub-signature"] = "sha256=" + vectors.github_sha256(SECRET, body)
    else:
        headers["cko-signature"] = vectors.generic_hex(SECRET, body)
    return headers, body


def provider_id(provider: str, headers: dict[str, str], body: bytes) -> str:
    where, name = ID_FROM[provider]
    value = headers[name] if where == "header" else orjson.loads(body)[name]
    return str(value)


async def test_every_real_payload_is_recorded_once_and_published(
    database_url: str, nats_url: str
) -> None:
    with gzip.open(CORPUS) as lines:
        items = [orjson.loads(line) for line in lines]
    assert len(items) == 1076
    doc = config(database_url, nats_url, http={"max_body_bytes": 1_000_000})
    for name, params in GENERIC.items():
        doc["providers"][name] = {"scheme": "hmac", "secrets": [SECRET], **params}
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
