"""The worker's NATS edge against a real nats-server: the durable pull consumer hands out
plain deliveries and translates NATS errors; the reconcile publisher reports duplicates."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import nats
import pytest

from gateway import settings as settings_mod
from gateway.adapters.jetstream.broker import JetStreamBroker
from gateway.adapters.jetstream.consumer import Delivery, DurablePullConsumer, consumer_config
from gateway.adapters.jetstream.one_shot import OneShotPublisher, open_one_shot_publisher
from gateway.cli import reconcile as cli_reconcile
from gateway.errors import BrokerUnavailable
from gateway.settings import Settings
from gateway.settlement import reconcile
from tests.support.config_file import with_urls
from tests.support.nats import NatsServer

SUBJECT = "webhooks.stripe.payment_intent.succeeded"


@pytest.fixture
def settings(nats_url: str) -> Settings:
    doc = {**with_urls({"nats": {"url": nats_url}}), "settlement": {"consumer": "edge-test"}}
    return settings_mod.parse(doc, env={})


@pytest.fixture
async def broker(settings: Settings) -> AsyncIterator[JetStreamBroker]:
    broker = JetStreamBroker(settings.nats, name="edge-test")
    await broker.start(wait_s=5.0)
    yield broker
    await broker.close()


async def publish(nats_url: str, *msg_ids: str) -> None:
    nc = await nats.connect(nats_url)
    try:
        js = nc.jetstream()
        for msg_id in msg_ids:
            headers = {"Nats-Msg-Id": msg_id, "Gateway-Event-Id": msg_id}
            await js.publish(SUBJECT, msg_id.encode(), headers=headers)
    finally:
        await nc.close()


async def fetch_until(consumer: DurablePullConsumer, count: int) -> list[Delivery]:
    deadline = time.monotonic() + 5.0
    found: list[Delivery] = []
    while len(found) < count and time.monotonic() < deadline:
        found += await consumer.fetch(count - len(found), timeout_s=0.5)
    return found


async def test_deliveries_are_answered_as_the_worker_asks(
    settings: Settings, broker: JetStreamBroker, nats_url: str
) -> None:
    """ack forgets, nak(delay_s) redelivers after the delay with the count raised, term
    ends it; nothing left means an empty batch, not an exception."""
    consumer = DurablePullConsumer(
        broker, settings.nats.stream, consumer_config(settings.settlement)
    )
    await consumer.start()
    await publish(nats_url, "a", "b")
    first = sorted(await fetch_until(consumer, 2), key=lambda d: d.data)
    assert [(d.subject, d.data, d.headers["Gateway-Event-Id"]) for d in first] == [
        (SUBJECT, b"a", "a"),
        (SUBJECT, b"b", "b"),
    ]
    assert [d.num_delivered for d in first] == [1, 1]
    await first[0].ack()
    asked = time.monotonic()
    await first[1].nak(0.5)
    [again] = await fetch_until(consumer, 1)
    assert time.monotonic() - asked >= 0.4
    assert (again.data, again.num_delivered) == (b"b", 2)
    await again.term()
    assert await consumer.fetch(1, timeout_s=0.3) == []


async def test_a_closed_connection_is_broker_unavailable(
    settings: Settings, broker: JetStreamBroker
) -> None:
    consumer = DurablePullConsumer(
        broker, settings.nats.stream, consumer_config(settings.settlement)
    )
    await consumer.start()
    await broker.close()
    with pytest.raises(BrokerUnavailable):
        await consumer.fetch(1, timeout_s=0.3)


async def test_the_one_shot_publisher_says_which_messages_the_stream_dropped(
    settings: Settings, broker: JetStreamBroker
) -> None:
    """A repeated Nats-Msg-Id within the duplicate window is not stored again."""
    async with open_one_shot_publisher(settings.nats, name="edge-test") as publisher:
        with pytest.raises(BrokerUnavailable):  # nothing connects until asked to
            await publisher.publish(SUBJECT, b"x", {"Nats-Msg-Id": "dup"})
        await publisher.connect()
        assert await publisher.publish(SUBJECT, b"x", {"Nats-Msg-Id": "dup"}) is True
        assert await publisher.publish(SUBJECT, b"x", {"Nats-Msg-Id": "dup"}) is False


async def test_the_one_shot_publisher_fails_fast_when_nats_is_down(
    settings: Settings, nats_server: NatsServer
) -> None:
    nats_server.stop()
    publisher = OneShotPublisher(settings.nats, name="edge-test")
    try:
        with pytest.raises(BrokerUnavailable, match="not reachable"):
            await asyncio.wait_for(publisher.connect(), 20)
    finally:
        await publisher.close()
        nats_server.start()


def test_the_cli_defaults_are_reconciles() -> None:
    """The CLI writes reconcile's defaults out (so `serve` loads no settlement code)."""
    assert cli_reconcile.DEFAULT_OLDER_THAN_S == reconcile.DEFAULT_OLDER_THAN_S
    assert cli_reconcile.DEFAULT_LOOKBACK_S == reconcile.DEFAULT_LOOKBACK_S
