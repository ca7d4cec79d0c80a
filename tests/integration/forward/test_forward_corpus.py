"""What real providers send reaches an HTTP service unchanged: the 1,076 corpus
deliveries are accepted by a real gateway, published, and forwarded by `gateway forward`
to a real HTTP target. Every body arrives byte for byte (the SHA-256 of each equals the
stored body's), every Standard Webhooks signature verifies with the official
`standardwebhooks` library, and every Stripe re-signature with `stripe.Webhook`."""

from __future__ import annotations

import hashlib

import asyncpg
import pytest
import standardwebhooks
import stripe

from gateway.core.forward.filters import ForwardFilter
from gateway.core.forward.request import ResignAs, webhook_id
from tests.support.corpus import CORPUS, corpus_config, corpus_items, signed
from tests.support.forward_target import Target, serving
from tests.support.forwarding import FORWARD_SECRET, forwarding, options
from tests.support.gateway import running_server
from tests.support.services import wait_until

pytestmark = pytest.mark.skipif(not CORPUS.exists(), reason=f"no corpus at {CORPUS}")


async def test_every_corpus_payload_arrives_byte_for_byte_and_verifies(
    database_url: str, nats_url: str
) -> None:
    items = corpus_items()
    doc = corpus_config(database_url, nats_url)
    async with (
        running_server(doc) as server,
        serving(Target(path="/standard")) as standard_target,
        serving(Target(path="/stripe")) as stripe_target,
    ):
        for index, item in enumerate(items):
            headers, body = signed(item["provider"], index, item)
            answer = await server.client.post(
                f"/webhooks/{item['provider']}", content=body, headers=headers
            )
            assert answer.status_code == 200, (item["name"], answer.text)
        conn = await asyncpg.connect(database_url)
        try:
            rows = await conn.fetch(
                "SELECT provider, event_id, body FROM processed_webhooks WHERE subject IS NOT NULL"
            )
        finally:
            await conn.close()
        stored = {webhook_id(r["provider"], r["event_id"]): bytes(r["body"]) for r in rows}
        stripe_ids = {
            webhook_id(r["provider"], r["event_id"]) for r in rows if r["provider"] == "stripe"
        }
        # Most of the corpus is recorded (replays of a body under another id are not).
        assert len(stored) > 700 and len(stripe_ids) > 50
        settings = server.settings
        as_standard = options(standard_target.url, name="corpus-standard", max_in_flight=32)
        as_stripe = options(
            stripe_target.url,
            name="corpus-stripe",
            resign_as=ResignAs.STRIPE,
            filters=ForwardFilter.parse(("stripe",), (), None),
            max_in_flight=32,
        )
        async with (
            forwarding(settings, as_standard) as one,
            forwarding(settings, as_stripe) as other,
        ):

            async def all_arrived() -> bool:
                one.check()
                other.check()
                return len(standard_target.delivered()) >= len(stored) and len(
                    stripe_target.delivered()
                ) >= len(stripe_ids)

            await wait_until(all_arrived, timeout_s=120)
    received = {r.webhook_id: r for r in standard_target.delivered()}
    assert len(received) == len(standard_target.delivered()) == len(stored)
    assert set(received) == set(stored)
    verifier = standardwebhooks.Webhook(FORWARD_SECRET)
    for delivery_id, request in received.items():
        sent = stored[delivery_id]
        assert hashlib.sha256(request.body).digest() == hashlib.sha256(sent).digest()
        verifier.verify(request.body, request.headers)  # raises on a bad signature
        assert request.headers["idempotency-key"] == delivery_id
    stripe_received = {r.webhook_id: r for r in stripe_target.delivered()}
    assert set(stripe_received) == stripe_ids
    for delivery_id, request in stripe_received.items():
        assert request.body == stored[delivery_id]
        event = stripe.Webhook.construct_event(
            request.body, request.headers["stripe-signature"], FORWARD_SECRET
        )
        assert event["id"] == request.headers["gateway-event-id"]
