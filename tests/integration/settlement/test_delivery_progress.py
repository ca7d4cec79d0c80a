"""`Delivery.in_progress` on a real nats-server: a message said to be in progress is not
delivered again when its ack_wait passes, so the ordering gate can hold it for its turn."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import nats
import pytest

from gateway import settings as settings_mod
from gateway.adapters.jetstream.broker import JetStreamBroker
from gateway.adapters.jetstream.consumer import DurablePullConsumer, consumer_config
from gateway.settings import Settings
from tests.support.config_file import with_urls

SUBJECT = "webhooks.stripe.payment_intent.succeeded"


@pytest.fixture
def settings(nats_url: str) -> Settings:
    doc = {
        **with_urls({"nats": {"url": nats_url}}),
        "settlement": {"consumer": "progress-test", "ack_wait_s": 1.0},
    }
    return settings_mod.parse(doc, env={})


@pytest.fixture
async def broker(settings: Settings) -> AsyncIterator[JetStreamBroker]:
    broker = JetStreamBroker(settings.nats, name="progress-test")
    await broker.start(wait_s=5.0)
    yield broker
    await broker.close()


async def test_a_message_in_progress_is_not_delivered_again(
    settings: Settings, broker: JetStreamBroker, nats_url: str
) -> None:
    consumer = DurablePullConsumer(
        broker, settings.nats.stream, consumer_config(settings.settlement)
    )
    await consumer.start()
    nc = await nats.connect(nats_url)
    try:
        await nc.jetstream().publish(SUBJECT, b"held", headers={"Nats-Msg-Id": "held"})
    finally:
        await nc.close()
    (held,) = await consumer.fetch(1, timeout_s=5.0)
    for _ in range(5):  # 2.5 s: past ack_wait (1 s) twice over
        await asyncio.sleep(0.5)
        await held.in_progress()
        assert await consumer.fetch(1, timeout_s=0.01) == []
    await held.ack()
    await asyncio.sleep(1.5)
    assert await consumer.fetch(1, timeout_s=0.2) == []


async def test_without_progress_it_is_delivered_again(
    settings: Settings, broker: JetStreamBroker, nats_url: str
) -> None:
    """The control: the same wait without in_progress brings the message back."""
    consumer = DurablePullConsumer(
        broker, settings.nats.stream, consumer_config(settings.settlement)
    )
    await consumer.start()
    nc = await nats.connect(nats_url)
    try:
        await nc.jetstream().publish(SUBJECT, b"left", headers={"Nats-Msg-Id": "left"})
    finally:
        await nc.close()
    (first,) = await consumer.fetch(1, timeout_s=5.0)
    await asyncio.sleep(1.5)
    (again,) = await consumer.fetch(1, timeout_s=2.0)
    assert (again.data, again.num_delivered) == (b"left", 2)
    await again.ack()
    del first
