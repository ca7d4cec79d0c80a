"""When the broker uses atomic batches, and when it falls back to one message at a time:
a stream without `allow_atomic` (accepted, said once, until `gateway migrate` adds it)
and a server older than 2.12 (the system nats-server 2.9 on 127.0.0.1:4222)."""

from __future__ import annotations

import logging
import socket
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import nats
import pytest
from nats.js.api import StreamConfig

from gateway.adapters.jetstream import broker as broker_mod
from gateway.adapters.jetstream import stream, wire
from gateway.adapters.jetstream.broker import JetStreamBroker
from gateway.adapters.postgres.webhooks import StoredEvent
from gateway.core.events.model import Event
from gateway.core.relay.batches import BatchLimits
from gateway.core.relay.stream import STREAM_SUBJECTS
from gateway.settings import NatsSettings
from tests.support.services import stream_messages, unique_name, wait_until

LIMITS = BatchLimits(max_count=4, max_bytes=1 << 20)
OLD_NATS = "nats://127.0.0.1:4222"  # the system nats-server 2.9: no atomic batches


def rows(count: int, prefix: str = "e") -> list[StoredEvent]:
    return [
        StoredEvent(
            i + 1,
            Event(
                provider="service:billing",
                event_id=f"{prefix}{i:02}",
                event_type="payment.captured",
                subject="events.billing.payment.captured",
                headers={},
                body=b"{}",
                received_at=datetime.now(UTC),
            ),
        )
        for i in range(count)
    ]


@pytest.fixture
async def broker_for() -> AsyncIterator[list[JetStreamBroker]]:
    started: list[JetStreamBroker] = []
    yield started
    for broker in started:
        await broker.close()


async def started(settings: NatsSettings, into: list[JetStreamBroker]) -> JetStreamBroker:
    broker = JetStreamBroker(settings)
    into.append(broker)
    await broker.start()

    async def ready() -> bool:
        return broker.connected

    await wait_until(ready)
    return broker


async def add_plain_stream(url: str, name: str) -> None:
    """The gateway's stream as an older gateway created it: without `allow_atomic`."""
    nc = await nats.connect(url)
    try:
        await nc.jetstream().add_stream(
            StreamConfig(name=name, subjects=list(STREAM_SUBJECTS), duplicate_window=120)
        )
    finally:
        await nc.close()


async def allow_atomic(url: str, name: str) -> bool:
    nc = await nats.connect(url)
    try:
        return bool((await nc.jetstream().stream_info(name)).config.allow_atomic)
    finally:
        await nc.close()


async def test_a_new_stream_takes_atomic_batches_and_the_broker_uses_them(
    nats_url: str, broker_for: list[JetStreamBroker]
) -> None:
    broker = await started(NatsSettings(url=nats_url), broker_for)
    assert await allow_atomic(nats_url, "WEBHOOKS")
    result = await broker.publish(rows(6), 5.0, LIMITS)
    assert result.acked == [1, 2, 3, 4, 5, 6]
    assert all("Nats-Batch-Id" in h for _, h, _ in await stream_messages(nats_url))


async def test_a_stream_without_allow_atomic_is_accepted_and_published_to_one_at_a_time(
    nats_url: str,
    broker_for: list[JetStreamBroker],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No mismatch (an upgrade never stops ingestion): the broker publishes pipelined and
    says so once; once `gateway migrate` adds `allow_atomic`, batches resume."""
    await add_plain_stream(nats_url, "WEBHOOKS")
    caplog.set_level(logging.WARNING, logger=broker_mod.__name__)
    broker = await started(NatsSettings(url=nats_url), broker_for)
    first = await broker.publish(rows(3, "a"), 5.0, LIMITS)
    second = await broker.publish(rows(3, "b"), 5.0, LIMITS)
    assert first.acked == second.acked == [1, 2, 3]
    messages = await stream_messages(nats_url)
    assert len(messages) == 6 and not any("Nats-Batch-Id" in h for _, h, _ in messages)
    said = [r.getMessage() for r in caplog.records if "allow_atomic" in r.getMessage()]
    assert said == [
        "stream lacks allow_atomic; publishing one message at a time until "
        "`gateway migrate` enables it"
    ]

    change = await stream.migrate(NatsSettings(url=nats_url))
    assert change.changes == ("allow_atomic false -> true",)
    assert await allow_atomic(nats_url, "WEBHOOKS")
    assert (await stream.migrate(NatsSettings(url=nats_url))).action == "unchanged"

    monkeypatch.setattr(broker_mod, "ATOMIC_RECHECK_S", 0.0)  # look again at once
    third = await broker.publish(rows(3, "c"), 5.0, LIMITS)
    assert third.acked == [1, 2, 3]
    assert all("Nats-Batch-Id" in h for _, h, _ in (await stream_messages(nats_url))[6:])


def _old_nats_up() -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", 4222)) == 0


async def test_a_server_older_than_2_12_gets_one_message_at_a_time_said_once(
    broker_for: list[JetStreamBroker], caplog: pytest.LogCaptureFixture
) -> None:
    """The system nats-server 2.9 knows no atomic batches: the broker publishes pipelined
    and says once why. A stream of its own, deleted after; nothing else touched."""
    if not _old_nats_up():
        pytest.skip("no nats-server on 127.0.0.1:4222")
    nc = await nats.connect(OLD_NATS)
    js = nc.jetstream()
    try:
        if (nc.connected_server_version.major, nc.connected_server_version.minor) >= (2, 12):
            pytest.skip("the server on 4222 takes atomic batches")
        for info in await js.streams_info():
            if set(info.config.subjects or ()) & set(STREAM_SUBJECTS):
                pytest.skip(f"stream {info.config.name} on 4222 holds the gateway's subjects")
        name = unique_name("GW_FALLBACK").upper()
        caplog.set_level(logging.WARNING, logger=broker_mod.__name__)
        try:
            settings = NatsSettings(url=OLD_NATS, stream=name)
            assert (await stream.migrate(settings)).action == "created"
            assert not (await js.stream_info(name)).config.allow_atomic
            broker = await started(settings, broker_for)
            first = await broker.publish(rows(3, unique_name("a")), 5.0, LIMITS)
            second = await broker.publish(rows(3, unique_name("b")), 5.0, LIMITS)
            assert first.acked == second.acked == [1, 2, 3]
            assert (await js.stream_info(name)).state.messages == 6
            await broker.close()
        finally:
            await js.delete_stream(name)
    finally:
        await nc.close()
    said = [r.getMessage() for r in caplog.records if "2.12" in r.getMessage()]
    assert said == [
        "nats server older than 2.12 takes no atomic batches; publishing one message at a time"
    ]


async def test_order_holds_while_others_publish_between_batches_and_one_is_refused(
    nats_url: str, broker_for: list[JetStreamBroker], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another publisher (a replay, a backfill) stores as many messages as a batch holds
    before each batch, and the second batch holds an id the stream already has (10201):
    that batch goes again one message at a time before the third is sent, so the rows
    reach the stream in order, each once."""
    broker = await started(NatsSettings(url=nats_url), broker_for)
    await broker.publish(rows(1, "warm"), 5.0, LIMITS)  # builds the publishers
    batch = rows(16, "s")
    await broker.publish([batch[5]], 5.0, LIMITS)  # s05 ahead of the relay
    other = await nats.connect(nats_url)
    js = other.jetstream()
    real_send = wire.Frames.send
    foreign = iter(range(100))

    async def others_first(self: wire.Frames, messages: list[object]) -> None:
        for _ in range(4):
            await js.publish("events.other.thing.done", b"{}", headers={
                "Gateway-Event-Id": f"x{next(foreign):02}"})  # fmt: skip
        await real_send(self, messages)  # type: ignore[arg-type]

    monkeypatch.setattr(wire.Frames, "send", others_first)
    try:
        result = await broker.publish(batch, 5.0, LIMITS)
    finally:
        await other.close()
    assert result.acked == list(range(1, 17))
    ours = [
        h["Gateway-Event-Id"]
        for _, h, _ in await stream_messages(nats_url)
        if not h["Gateway-Event-Id"].startswith("x")
    ]
    assert ours == ["warm00", "s05"] + [f"s{i:02}" for i in range(16) if i != 5]


async def test_a_batch_without_an_answer_stops_the_publish_and_nothing_after_it_is_sent(
    nats_url: str, broker_for: list[JetStreamBroker], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second batch's commit never reaches the server: the first is acknowledged,
    the second failed (it counts an attempt), the ones after it are not stored and come
    back `unsent` (no attempt: not their fault)."""
    broker = await started(NatsSettings(url=nats_url), broker_for)
    real_send = wire.Frames.send
    sent: list[int] = []

    async def lose_the_second(self: wire.Frames, messages: list[object]) -> None:
        sent.append(len(messages))
        if len(sent) == 2:
            return  # lost on the way: no commit, no answer
        await real_send(self, messages)  # type: ignore[arg-type]

    monkeypatch.setattr(wire.Frames, "send", lose_the_second)
    await broker.publish(rows(1, "warm"), 5.0, LIMITS)  # builds the publishers
    sent.clear()
    result = await broker.publish(rows(12, "n"), 0.5, LIMITS)
    assert result.acked == [1, 2, 3, 4]
    assert result.failed == [5, 6, 7, 8]
    assert result.unsent == [9, 10, 11, 12]
    stored = [h["Gateway-Event-Id"] for _, h, _ in await stream_messages(nats_url)]
    assert stored == ["warm00", "n00", "n01", "n02", "n03"]
