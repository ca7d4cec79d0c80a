"""The settlement worker end to end: signed webhook in → JetStream → ledger, for real."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import nats
import orjson
import pytest
import redis.asyncio as aioredis
from nats.js.api import ConsumerInfo

from gateway.settlement.parts import SettlementParts
from tests.support.deliveries import deliver
from tests.support.gateway import BILLING_TOKEN, RunningServer, config, running_server
from tests.support.receiver import Receiver
from tests.support.services import wait_until
from tests.support.settlement import (
    fetch,
    merchant_balance,
    open_merchant,
    running_worker,
    settlement_sections,
)
from tests.support.stub import Stub


def payment(
    event_id: str, pi: str, amount: int, currency: str = "eur", merchant: str = "m_1"
) -> bytes:
    """A Stripe `payment_intent.succeeded` body."""
    return orjson.dumps(
        {
            "id": event_id,
            "type": "payment_intent.succeeded",
            "data": {
                "object": {
                    "id": pi,
                    "amount_received": amount,
                    "currency": currency,
                    "metadata": {"merchant_id": merchant},
                }
            },
        }
    )


def internal(
    kind: str,
    settlement_id: str,
    amount: int,
    currency: str = "USD",
    merchant: str = "m_1",
    refund_id: str | None = None,
) -> dict[str, object]:
    data: dict[str, object] = {
        "settlement_id": settlement_id,
        "merchant_id": merchant,
        "amount_minor": amount,
        "currency": currency,
    }
    if refund_id:
        data["refund_id"] = refund_id
    return {"type": f"payment.{kind}", "data": data}


@pytest.fixture
def doc(database_url: str, nats_url: str, stub: Stub, redis_url: str) -> dict[str, Any]:
    return config(database_url, nats_url, **settlement_sections(stub.url, redis_url))


async def post_stripe(server: RunningServer, event_id: str, body: bytes) -> str:
    d = deliver("stripe", event_id, body=body)
    response = await server.client.post(d.path, content=d.body, headers=d.headers)
    assert response.status_code == 200, response.text
    return str(response.json()["status"])


async def post_internal(server: RunningServer, key: str, event: dict[str, object]) -> None:
    """Publish as a billing service would: each payment's events under its own
    `Ordering-Key` (without one, every event of the subject would share one key)."""
    data = event.get("data")
    payment = data.get("settlement_id") if isinstance(data, dict) else None
    headers = {"Authorization": f"Bearer {BILLING_TOKEN}", "Idempotency-Key": key}
    if isinstance(payment, str):
        headers["Ordering-Key"] = payment
    response = await server.client.post("/v1/events", json=event, headers=headers)
    assert response.status_code == 200, response.text


async def dlq_rows(dsn: str) -> list[tuple[str, str]]:
    rows = await fetch(
        dsn, "SELECT stage, error_class FROM dlq_webhooks WHERE NOT is_resolved ORDER BY id"
    )
    return [(r["stage"], r["error_class"]) for r in rows]


async def settled(dsn: str, n: int) -> bool:
    rows = await fetch(dsn, "SELECT count(*) AS n FROM settlements WHERE state = 'settled'")
    return int(rows[0]["n"]) >= n


async def handled(dsn: str, n: int) -> bool:
    """At least `n` events have ended: settled, or parked in the DLQ."""
    rows = await fetch(
        dsn,
        "SELECT (SELECT count(*) FROM settlements WHERE state = 'settled')"
        " + (SELECT count(*) FROM dlq_webhooks) AS n",
    )
    return int(rows[0]["n"]) >= n


async def test_stripe_payment_moves_the_balance_once_with_the_rate(
    doc: dict[str, Any], database_url: str
) -> None:
    """EUR 10.00 at 1.08 credits the merchant USD 10.80, recorded with its rate."""
    async with running_server(doc) as server, running_worker(doc) as parts:
        await open_merchant(parts, "m_1")
        assert (
            await post_stripe(server, "evt_pay_1", payment("evt_pay_1", "pi_1", 1000)) == "accepted"
        )
        assert (
            await post_stripe(server, "evt_pay_1", payment("evt_pay_1", "pi_1", 1000))
            == "duplicate"
        )
        await wait_until(lambda: settled(database_url, 1))
        assert await merchant_balance(parts, "m_1") == 1080
    rows = await fetch(
        database_url, "SELECT state, rate_at_payment, ledger_amount_minor FROM settlements"
    )
    assert [(r["state"], r["rate_at_payment"], r["ledger_amount_minor"]) for r in rows] == [
        ("settled", Decimal("1.08"), 1080)
    ]
    transfers = await fetch(
        database_url, "SELECT amount, rate_at_payment, settlement_id FROM ledger_transfers"
    )
    assert [(int(t["amount"]), t["settlement_id"]) for t in transfers] == [(1080, "pi_1")]
    assert str(transfers[0]["rate_at_payment"]).startswith("1.08")


async def test_same_settlement_published_twice_and_via_two_events_moves_money_once(
    doc: dict[str, Any], database_url: str, nats_url: str
) -> None:
    """A republished message and a second event for the same payment are no-ops."""
    async with running_server(doc) as server, running_worker(doc) as parts:
        await open_merchant(parts, "m_1")
        body = payment("evt_twice", "pi_twice", 500, currency="usd")
        await post_stripe(server, "evt_twice", body)
        await wait_until(lambda: settled(database_url, 1))
        # Published again outside the duplicate window's reach (a new Nats-Msg-Id).
        nc = await nats.connect(nats_url)
        js = nc.jetstream()
        await js.publish(
            "webhooks.stripe.payment_intent.succeeded",
            body,
            headers={
                "Nats-Msg-Id": "replayed-1",
                "Gateway-Provider": "stripe",
                "Gateway-Event-Id": "evt_twice",
                "Gateway-Event-Type": "payment_intent.succeeded",
            },
        )
        await nc.close()
        # The same payment announced by a second event with its own id.
        await post_stripe(
            server, "evt_twice_b", payment("evt_twice_b", "pi_twice", 500, currency="usd")
        )

        async def consumed() -> bool:
            js = parts.broker._js
            assert js is not None
            info: ConsumerInfo = await js.consumer_info("WEBHOOKS", "settlement")
            return info.num_pending == 0 and info.num_ack_pending == 0

        await wait_until(consumed)
        assert await merchant_balance(parts, "m_1") == 500
    assert len(await fetch(database_url, "SELECT 1 FROM ledger_transfers")) == 1
    assert parts.metrics.settlements_total.get(outcome="settled") == 1
    assert parts.metrics.settlements_total.get(outcome="duplicate") == 2


async def test_refund_moves_money_back_and_one_larger_than_its_payment_is_dead_lettered(
    doc: dict[str, Any], database_url: str
) -> None:
    async with running_server(doc) as server, running_worker(doc) as parts:
        await open_merchant(parts, "m_1")
        await post_internal(server, "cap-1", internal("captured", "s_1", 1000))
        await wait_until(lambda: settled(database_url, 1))
        await post_internal(server, "ref-1", internal("refunded", "s_1", 400, refund_id="r_1"))
        await wait_until(lambda: settled(database_url, 2))
        assert await merchant_balance(parts, "m_1") == 600
        await post_internal(server, "ref-2", internal("refunded", "s_1", 5000, refund_id="r_2"))
        await wait_until(lambda: dlq_rows(database_url))
        assert await dlq_rows(database_url) == [("settlement", "EXCEEDS_PAYMENT")]
        assert await merchant_balance(parts, "m_1") == 600
    # Refused before anything was stored: no transfer, no claim, nothing to post later.
    state = await fetch(database_url, "SELECT state FROM settlements WHERE refund_id = 'r_2'")
    assert state == []
    claims = await fetch(database_url, "SELECT claim_key FROM payment_claims ORDER BY claim_key")
    assert [r["claim_key"] for r in claims] == ["r_1"]


async def test_refund_before_its_payment_waits_for_it(
    doc: dict[str, Any], database_url: str
) -> None:
    """A refund that overtakes its payment is retried, then settles once the payment has."""
    async with running_server(doc) as server, running_worker(doc) as parts:
        await open_merchant(parts, "m_1")
        await post_internal(server, "ref-early", internal("refunded", "s_9", 100, refund_id="r_9"))
        await post_internal(server, "cap-late", internal("captured", "s_9", 1000))
        await wait_until(lambda: settled(database_url, 2), timeout_s=15)
        assert await merchant_balance(parts, "m_1") == 900
    assert await dlq_rows(database_url) == []


async def test_unknown_merchant_is_dead_lettered_then_settles_after_open_account(
    doc: dict[str, Any], database_url: str, nats_url: str
) -> None:
    body = payment("evt_nomerchant", "pi_nm", 700, currency="usd", merchant="m_new")
    async with running_server(doc) as server, running_worker(doc) as parts:
        await post_stripe(server, "evt_nomerchant", body)
        await wait_until(lambda: dlq_rows(database_url))
        assert await dlq_rows(database_url) == [("settlement", "UNKNOWN_MERCHANT")]
        await open_merchant(parts, "m_new")
        nc = await nats.connect(nats_url)  # reprocess: publish the stored event again
        await nc.jetstream().publish(
            "webhooks.stripe.payment_intent.succeeded",
            body,
            headers={
                "Nats-Msg-Id": "reprocess-1",
                "Gateway-Provider": "stripe",
                "Gateway-Event-Id": "evt_nomerchant",
                "Gateway-Event-Type": "payment_intent.succeeded",
            },
        )
        await nc.close()
        await wait_until(lambda: settled(database_url, 1))
        assert await merchant_balance(parts, "m_new") == 700


@pytest.mark.parametrize(
    ("body", "error_class"),
    [
        (payment("evt_zero", "pi_zero", 0), "INVALID_AMOUNT"),
        (payment("evt_irr", "pi_irr", 1000, currency="irr"), "UNSUPPORTED_PAIR"),
        (
            b'{"id": "evt_shape", "type": "payment_intent.succeeded", "data": {"object": {}}}',
            "MISSING_FIELD",
        ),
    ],
    ids=["zero-amount", "unsupported-pair", "missing-field"],
)
async def test_permanent_failures_go_straight_to_the_dlq(
    doc: dict[str, Any], database_url: str, body: bytes, error_class: str
) -> None:
    async with running_server(doc) as server, running_worker(doc) as parts:
        await open_merchant(parts, "m_1")
        event_id = orjson.loads(body)["id"]
        await post_stripe(server, event_id, body)
        await wait_until(lambda: dlq_rows(database_url))
        assert parts.metrics.retries_total.values == {}  # no retry before the DLQ
    rows = await fetch(database_url, "SELECT * FROM dlq_webhooks")
    assert [(r["stage"], r["error_class"], r["attempts"]) for r in rows] == [
        ("settlement", error_class, 1)
    ]
    assert bytes(rows[0]["payload"]) == body
    assert rows[0]["webhook_id"] is not None and rows[0]["error_detail"]


async def test_poisoned_message_does_not_block_the_ones_behind_it(
    doc: dict[str, Any], database_url: str
) -> None:
    async with running_server(doc) as server, running_worker(doc) as parts:
        await open_merchant(parts, "m_1")
        await post_stripe(server, "evt_poison", payment("evt_poison", "pi_p", -5))
        for i in range(20):
            await post_stripe(
                server, f"evt_after_{i}", payment(f"evt_after_{i}", f"pi_a{i}", 100, "usd")
            )
        await wait_until(lambda: settled(database_url, 20))
        assert await merchant_balance(parts, "m_1") == 2000
    assert await dlq_rows(database_url) == [("settlement", "INVALID_AMOUNT")]


async def test_currency_service_down_valid_cache_serves(
    doc: dict[str, Any], database_url: str, stub: Stub
) -> None:
    async with running_server(doc) as server, running_worker(doc) as parts:
        await open_merchant(parts, "m_1")
        await post_stripe(server, "evt_c1", payment("evt_c1", "pi_c1", 1000))
        await wait_until(lambda: settled(database_url, 1))
        await stub.control(mode="fail")
        await _forget_memo(parts)
        await post_stripe(server, "evt_c2", payment("evt_c2", "pi_c2", 1000))
        await wait_until(lambda: settled(database_url, 2))
        assert await merchant_balance(parts, "m_1") == 2160
    assert await dlq_rows(database_url) == []


async def test_currency_service_down_no_cache_is_rate_unavailable_after_retries(
    doc: dict[str, Any], database_url: str, stub: Stub
) -> None:
    await stub.control(mode="fail")
    async with running_server(doc) as server, running_worker(doc) as parts:
        await open_merchant(parts, "m_1")
        await post_stripe(server, "evt_nr", payment("evt_nr", "pi_nr", 1000))
        await wait_until(lambda: dlq_rows(database_url), timeout_s=20)
        assert (
            parts.metrics.retries_total.get(subject="webhooks.stripe.payment_intent.succeeded") == 3
        )
    rows = await fetch(database_url, "SELECT error_class, attempts FROM dlq_webhooks")
    assert [(r["error_class"], r["attempts"]) for r in rows] == [("RATE_UNAVAILABLE", 4)]


async def test_expired_cache_and_service_down_is_rate_stale(
    doc: dict[str, Any], database_url: str, stub: Stub, redis_url: str
) -> None:
    prefix = doc["currency"]["cache_key_prefix"]
    client = aioredis.from_url(redis_url)
    old = (datetime.now(UTC) - timedelta(hours=2)).isoformat()
    await client.hset(f"{prefix}:EUR:USD", mapping={"rate": "1.05", "as_of": old})
    await stub.control(mode="fail")
    try:
        async with running_server(doc) as server, running_worker(doc) as parts:
            await open_merchant(parts, "m_1")
            await post_stripe(server, "evt_stale", payment("evt_stale", "pi_st", 1000))
            await wait_until(lambda: dlq_rows(database_url), timeout_s=20)
    finally:
        await client.delete(f"{prefix}:EUR:USD")
        await client.aclose()
    assert await dlq_rows(database_url) == [("settlement", "RATE_STALE")]


async def test_redis_down_does_not_stop_settlement(
    database_url: str, nats_url: str, stub: Stub
) -> None:
    closed = "redis://127.0.0.1:1/0"
    doc = config(database_url, nats_url, **settlement_sections(stub.url, closed))
    async with running_server(doc) as server, running_worker(doc) as parts:
        await open_merchant(parts, "m_1")
        await post_stripe(server, "evt_nr1", payment("evt_nr1", "pi_r1", 1000))
        await wait_until(lambda: settled(database_url, 1))
        assert await merchant_balance(parts, "m_1") == 1080


async def _forget_memo(parts: SettlementParts) -> None:
    """Drop the worker's few-seconds rate memo, so the next rate comes from service or cache."""
    parts.settler._memo.clear()


async def test_conflicting_second_event_is_critical_and_alerts(
    database_url: str, nats_url: str, stub: Stub, redis_url: str, receiver: Receiver
) -> None:
    """The same payment announced again with another amount is not waved through."""
    doc = config(
        database_url,
        nats_url,
        **settlement_sections(stub.url, redis_url),
        alerts={"webhook_url": receiver.url},
    )
    async with running_server(doc) as server, running_worker(doc) as parts:
        await open_merchant(parts, "m_1")
        await post_stripe(server, "evt_a", payment("evt_a", "pi_conflict", 500, "usd"))
        await wait_until(lambda: settled(database_url, 1))
        await post_stripe(server, "evt_b", payment("evt_b", "pi_conflict", 9000, "usd"))
        await wait_until(lambda: dlq_rows(database_url))

        async def alerted() -> list[dict[str, Any]]:
            return receiver.received

        [alert] = await wait_until(alerted)
        assert parts.metrics.critical_total.get(reason="LEDGER_ID_COLLISION") == 1
        assert await merchant_balance(parts, "m_1") == 500
    assert await dlq_rows(database_url) == [("settlement", "LEDGER_ID_COLLISION")]
    assert (alert["status"], alert["key"], alert["event_id"]) == (
        "firing",
        "LEDGER_ID_COLLISION",
        "evt_b",
    )


async def test_stripe_amounts_settle_in_stripes_own_minor_units(
    doc: dict[str, Any], database_url: str, stub: Stub
) -> None:
    """Stripe writes MGA with no decimals and ISK with two (ISO: 2 and 0): 10,000 MGA and
    500 ISK credit what they are worth, and an ISK amount with aurar is parked."""
    await stub.control(rates={"MGA/USD": "0.0002", "ISK/USD": "0.01"})
    async with running_server(doc) as server, running_worker(doc) as parts:
        await open_merchant(parts, "m_1")
        await post_stripe(server, "evt_mga", payment("evt_mga", "pi_mga", 10_000, "mga"))
        await post_stripe(server, "evt_isk", payment("evt_isk", "pi_isk", 50_000, "isk"))
        await post_stripe(server, "evt_aur", payment("evt_aur", "pi_aur", 50_050, "isk"))
        await wait_until(lambda: handled(database_url, 3))
        # USD 2.00 + USD 5.00; read as ISO they were USD 0.02 and USD 500.00.
        assert await merchant_balance(parts, "m_1") == 700
    transfers = await fetch(
        database_url, "SELECT settlement_id, amount FROM ledger_transfers ORDER BY settlement_id"
    )
    assert [(t["settlement_id"], int(t["amount"])) for t in transfers] == [
        ("pi_isk", 500),
        ("pi_mga", 200),
    ]
    recorded = await fetch(
        database_url, "SELECT settlement_id, amount_minor, currency FROM settlements ORDER BY 1"
    )
    assert [tuple(r) for r in recorded] == [("pi_isk", 500, "ISK"), ("pi_mga", 1_000_000, "MGA")]
    assert await dlq_rows(database_url) == [("settlement", "PROVIDER_AMOUNT_INVALID")]
