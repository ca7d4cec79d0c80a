"""Stripe's thin events end to end: notifications signed as Stripe signs them with the
thin destination's own secret, posted to a real gateway, each related object fetched
by the confirm stage from a local stand-in of Stripe's API, and the snapshot-shaped
events settled by the real worker on PostgreSQL, NATS JetStream, Redis and the
currency stub.

A payment captured, refunded and paid out on a connected account (its objects fetched
in its context): the ledger ends right and each movement settles once, a notification
sent again moves nothing more; a ping is published as it came; a notification signed
with the snapshot endpoint's secret is refused with nothing stored."""

from __future__ import annotations

import time
from functools import partial
from typing import Any

import orjson
import pytest

from gateway.core.providers.stripe.thin import STRIPE_THIN
from gateway.core.signatures import SchemeParams
from tests.integration.providers.test_hmac_providers_end_to_end import ended, settled
from tests.support.confirming import QUICK, confirming, serving
from tests.support.gateway import RunningServer, config
from tests.support.services import stream_messages, wait_until
from tests.support.settlement import (
    fetch,
    merchant_balance,
    open_merchant,
    running_worker,
    settlement_sections,
)
from tests.support.stripe_objects import (
    API_KEY,
    StripeObjects,
    running_stripe_objects,
    stand_in_keys,
)
from tests.support.stub import Stub

SECRET = "whsec_thin_e2e_4eC39HqLyjWDarjt"
SNAPSHOT_SECRET = "whsec_snapshot_e2e_Zx8vB2nM4qW6"
ACCOUNT = "acct_1ThinConnected"
KEY_ENV = "STRIPE_THIN_TEST_KEY"
ENV = {KEY_ENV: API_KEY}


@pytest.fixture
async def api() -> Any:
    async with running_stripe_objects() as running:
        yield running


@pytest.fixture
def doc(database_url: str, nats_url: str, stub: Stub, redis_url: str, api: StripeObjects) -> Any:
    found = config(database_url, nats_url, **settlement_sections(stub.url, redis_url))
    found["providers"]["stripe_thin"] = {
        "scheme": "stripe_thin", "secrets": [SECRET], **stand_in_keys(api.url, KEY_ENV),
    }  # fmt: skip
    found["confirm"] = dict(QUICK, max_attempts=3)
    return found


def notification(n: int, event_type: str, path: str, kind: str) -> dict[str, Any]:
    related = {"id": path.rsplit("/", 1)[1], "type": kind, "url": path}
    return {"id": f"evt_test_{n:04d}", "object": "v2.core.event", "type": event_type,
            "created": "2026-12-06T10:00:00.000Z", "livemode": False, "context": ACCOUNT,
            "related_object": related}  # fmt: skip


async def post(server: RunningServer, doc: dict[str, Any], secret: str = SECRET) -> Any:
    body = orjson.dumps(doc)
    signed = STRIPE_THIN.scheme.sign(SchemeParams(secrets=(secret,)), body, int(time.time()))
    headers = {"Content-Type": "application/json", **signed}
    return await server.client.post("/webhooks/stripe_thin", content=body, headers=headers)


async def _fetched(api: StripeObjects, n: int) -> bool:
    return len(api.requests) >= n


async def test_a_connected_accounts_payment_refund_and_payout_settle_once_each(
    doc: dict[str, Any], database_url: str, nats_url: str, api: StripeObjects
) -> None:
    intent = api.put("payment_intents", {
        "id": "pi_3Thin", "object": "payment_intent", "amount": 5_000,
        "amount_received": 5_000, "currency": "usd", "metadata": {"merchant_id": ACCOUNT},
    }, ACCOUNT)  # fmt: skip
    refund = api.put("refunds", {
        "id": "re_3Thin", "object": "refund", "amount": 1_000, "currency": "usd",
        "status": "succeeded", "payment_intent": "pi_3Thin", "metadata": {},
    }, ACCOUNT)  # fmt: skip
    payout = api.put("payouts", {"id": "po_1Thin", "object": "payout", "amount": 2_000,
                                 "currency": "usd"}, ACCOUNT)  # fmt: skip
    events = [notification(1, "v1.payment_intent.succeeded", intent, "payment_intent"),
              notification(2, "v1.refund.created", refund, "refund"),
              notification(3, "v1.payout.paid", payout, "payout")]  # fmt: skip
    ping = {**notification(4, "v2.core.event_destination.ping",
                           "/v2/core/event_destinations/ed_1", "v2.core.event_destination"),
            "context": None}  # fmt: skip
    async with (
        serving(doc, ENV) as server,
        running_worker(doc, ENV) as parts,
        confirming(doc, ENV),
    ):
        await open_merchant(parts, ACCOUNT)
        refused = await post(server, events[0], SNAPSHOT_SECRET)
        assert refused.status_code == 401
        assert await fetch(database_url, "SELECT id FROM processed_webhooks") == []

        assert (await post(server, events[0])).status_code == 200
        await wait_until(partial(ended, database_url, 1))  # the capture before its follow-ups
        for later in (*events[1:], ping):
            assert (await post(server, later)).status_code == 200
        await wait_until(partial(ended, database_url, 3))
        assert await merchant_balance(parts, ACCOUNT) == 5_000 - 1_000 - 2_000

        # Stripe sends a notification again: a duplicate, fetched again, nothing moves.
        again = await post(server, events[1])
        assert again.json()["status"] == "duplicate"
        await wait_until(lambda: _fetched(api, 4))
        await wait_until(lambda: _all_confirmed(database_url))
        assert await merchant_balance(parts, ACCOUNT) == 2_000

    assert await settled(database_url, "stripe_thin") == [
        ("capture", None, 5_000, ACCOUNT),
        ("refund", "re_3Thin", 1_000, ACCOUNT),
        ("payout", "po_1Thin", 2_000, ACCOUNT),
    ]
    assert api.requests == [(intent, ACCOUNT), (refund, ACCOUNT), (payout, ACCOUNT),
                            (refund, ACCOUNT)]  # fmt: skip
    messages = await stream_messages(nats_url)
    ids = {m[1]["Nats-Msg-Id"]: m[0] for m in messages}
    assert ids == {
        "stripe_thin:evt_test_0001:confirmed": "webhooks.stripe_thin.payment_intent.succeeded",
        "stripe_thin:evt_test_0002:confirmed": "webhooks.stripe_thin.refund.created",
        "stripe_thin:evt_test_0003:confirmed": "webhooks.stripe_thin.payout.paid",
        "stripe_thin:evt_test_0004": "webhooks.stripe_thin.v2.core.event_destination.ping",
    }
    assert await fetch(database_url, "SELECT event_id FROM dlq_webhooks") == []


async def _all_confirmed(dsn: str) -> bool:
    found = await fetch(dsn, "SELECT state FROM confirmations")
    return {r["state"] for r in found} == {"confirmed"}


async def test_an_event_fetched_outside_its_account_is_parked_not_found(
    doc: dict[str, Any], database_url: str, api: StripeObjects
) -> None:
    """The object exists on the platform, the event names a connected account: Stripe
    would not find it there, and the event is parked, never settled from the wrong
    account's object."""
    intent = api.put("payment_intents", {
        "id": "pi_3Else", "object": "payment_intent", "amount_received": 700,
        "currency": "usd", "metadata": {"merchant_id": ACCOUNT},
    })  # fmt: skip
    async with serving(doc, ENV) as server, confirming(doc, ENV):
        event = notification(9, "v1.payment_intent.succeeded", intent, "payment_intent")
        assert (await post(server, event)).status_code == 200

        async def parked() -> bool:
            found = await fetch(database_url, "SELECT state FROM confirmations")
            return [r["state"] for r in found] == ["parked"]

        await wait_until(parked)
    found = await fetch(database_url, "SELECT event_id, stage, error_class FROM dlq_webhooks")
    assert [(r["event_id"], r["stage"], r["error_class"]) for r in found] == [
        ("evt_test_0009", "confirm", "CONFIRMATION_NOT_FOUND")
    ]
