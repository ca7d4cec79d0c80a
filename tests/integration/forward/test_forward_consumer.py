"""A forwarding destination's consumer against a real nats-server: a named one resumes
where it stopped (its first start position is kept), an unnamed one starts from now and
gets a server-given name, a provider filter narrows the subjects, and the backlog the
gauges read (pending, and when the oldest unacknowledged message was stored) is right."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import nats
import pytest
from nats.js.api import ConsumerConfig

from gateway import settings as settings_mod
from gateway.adapters.jetstream.broker import JetStreamBroker
from gateway.adapters.jetstream.consumer import (
    Delivery,
    DurablePullConsumer,
    forward_consumer_config,
)
from gateway.adapters.jetstream.consumer_info import ConsumerBacklog, consumer_backlog
from gateway.settings import Settings
from tests.support.config_file import with_urls
from tests.support.services import wait_until


@pytest.fixture
def settings(nats_url: str) -> Settings:
    return settings_mod.parse(with_urls({"nats": {"url": nats_url}}), env={})


@pytest.fixture
async def broker(settings: Settings) -> AsyncIterator[JetStreamBroker]:
    broker = JetStreamBroker(settings.nats, name="forward-consumer-test")
    await broker.start(wait_s=5.0)
    yield broker
    await broker.close()


async def publish(nats_url: str, subject: str, *ids: str) -> None:
    nc = await nats.connect(nats_url)
    try:
        js = nc.jetstream()
        for msg_id in ids:
            await js.publish(subject, msg_id.encode(), headers={"Nats-Msg-Id": msg_id})
    finally:
        await nc.close()


async def fetch_all(consumer: DurablePullConsumer, count: int) -> list[Delivery]:
    deadline = time.monotonic() + 5.0
    found: list[Delivery] = []
    while len(found) < count and time.monotonic() < deadline:
        found += await consumer.fetch(count - len(found), timeout_s=0.3)
    return found


def config(
    name: str | None, subjects: list[str] | None = None, *, from_start: bool = True
) -> ConsumerConfig:
    return forward_consumer_config(
        name,
        subjects or [],
        from_start=from_start,
        start_time=None,
        ack_wait_s=30.0,
        max_ack_pending=1000,
    )


async def test_a_named_destination_resumes_and_keeps_where_it_first_started(
    broker: JetStreamBroker, settings: Settings, nats_url: str
) -> None:
    await publish(nats_url, "webhooks.stripe.a", "s1", "s2")
    first = DurablePullConsumer(broker, settings.nats.stream, config("forward-resume"))
    await first.start()
    got = await fetch_all(first, 2)
    assert [d.data for d in got] == [b"s1", b"s2"]
    for d in got:
        await d.ack()
    await publish(nats_url, "webhooks.stripe.a", "s3")
    # Started again with "from now": the existing consumer keeps its position instead.
    again = DurablePullConsumer(
        broker,
        settings.nats.stream,
        config("forward-resume", from_start=False),
    )
    await again.start()
    assert [d.data for d in await fetch_all(again, 1)] == [b"s3"]


async def test_an_unnamed_destination_starts_from_now(
    broker: JetStreamBroker, settings: Settings, nats_url: str
) -> None:
    await publish(nats_url, "webhooks.stripe.a", "old")
    consumer = DurablePullConsumer(
        broker,
        settings.nats.stream,
        config(None, from_start=False),
    )
    await consumer.start()
    assert consumer.name  # the server named it
    assert await consumer.fetch(1, timeout_s=0.3) == []
    await publish(nats_url, "webhooks.stripe.a", "new")
    assert [d.data for d in await fetch_all(consumer, 1)] == [b"new"]


async def test_a_provider_filter_narrows_the_subjects(
    broker: JetStreamBroker, settings: Settings, nats_url: str
) -> None:
    await publish(nats_url, "webhooks.stripe.a", "s1")
    await publish(nats_url, "webhooks.paddle.b", "p1")
    await publish(nats_url, "events.billing.c", "b1")
    consumer = DurablePullConsumer(
        broker,
        settings.nats.stream,
        config("forward-filter", ["webhooks.paddle.>", "events.billing.>"]),
    )
    await consumer.start()
    got = await fetch_all(consumer, 2)
    assert sorted(d.data for d in got) == [b"b1", b"p1"]
    assert await consumer.fetch(1, timeout_s=0.3) == []


async def test_the_backlog_counts_and_dates_what_is_not_acknowledged(
    broker: JetStreamBroker, settings: Settings, nats_url: str
) -> None:
    before = datetime.now(UTC)
    await publish(nats_url, "webhooks.stripe.a", "b1", "b2", "b3")
    consumer = DurablePullConsumer(broker, settings.nats.stream, config("forward-backlog"))
    await consumer.start()
    stream = settings.nats.stream
    found = await consumer_backlog(broker, stream, consumer.name, subjects=())
    assert (found.pending, found.ack_pending) == (3, 0)
    assert found.oldest_at is not None and found.oldest_at >= before - timedelta(seconds=1)
    oldest = found.oldest_at
    got = await fetch_all(consumer, 3)
    await got[0].ack()
    await publish(nats_url, "webhooks.stripe.a", "b4")

    # The server counts an acknowledgement and a new message a moment after it has them
    # (seen: b4 not yet pending 0.2 s later on a busy machine): wait until it has both.
    async def counted() -> ConsumerBacklog | None:
        found = await consumer_backlog(
            broker, stream, consumer.name, subjects=("webhooks.stripe.>",)
        )
        return found if (found.pending, found.ack_pending) == (1, 2) else None

    seen = await wait_until(counted, timeout_s=10)
    assert seen is not None and (seen.pending, seen.ack_pending) == (1, 2)
    assert seen.oldest_at is not None and seen.oldest_at > oldest  # b2, not b1
    for d in got[1:]:
        await d.ack()
    for d in await fetch_all(consumer, 1):
        await d.ack()

    async def emptied() -> ConsumerBacklog | None:
        found = await consumer_backlog(broker, stream, consumer.name, subjects=())
        return found if (found.pending, found.ack_pending) == (0, 0) else None

    seen = await wait_until(emptied, timeout_s=10)
    assert seen is not None
    assert (seen.pending, seen.ack_pending, seen.oldest_at) == (0, 0, None)
