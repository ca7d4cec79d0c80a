"""The relay publishes in atomic batches (nats-server 2.12+, stream `allow_atomic`),
against real PostgreSQL and JetStream: rows reach the stream in walk order, the cursor
passes only acknowledged rows, a batch holding a row already on the stream is sent again
one message at a time, a batch over the server's limit is split, and an event too large
is parked."""

from __future__ import annotations

import contextlib
import logging
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime

import asyncpg
import nats
import pytest
from nats.js.api import StreamConfig

from gateway.adapters.jetstream.broker import JetStreamBroker, message_headers
from gateway.adapters.postgres import open_pool
from gateway.adapters.postgres.webhooks import StoredEvent, insert_events
from gateway.core.events.model import Event
from gateway.core.relay.stream import STREAM_SUBJECTS
from gateway.ingest.relay import OutboxRelay
from gateway.metrics import Metrics
from gateway.settings import NatsSettings, OutboxSettings
from tests.support.nats import NatsServer
from tests.support.outbox import sweep_until_still
from tests.support.services import stream_messages, wait_until

Message = tuple[str, dict[str, str], bytes]


def event(event_id: str, body: bytes = b'{"ok": true}', subject: str = "") -> Event:
    return Event(
        provider="service:billing",
        event_id=event_id,
        event_type="payment.captured",
        subject=subject or "events.billing.payment.captured",
        headers={},
        body=body,
        received_at=datetime.now(UTC),
    )


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(database_url)
    yield conn
    await conn.close()


@contextlib.asynccontextmanager
async def relay_on(
    dsn: str, nats_url: str, stream: str = "WEBHOOKS", **outbox: object
) -> AsyncIterator[OutboxRelay]:
    """A relay (not sweeping on its own) over a connected broker."""
    settings = OutboxSettings(inline=False, **outbox)  # type: ignore[arg-type]
    async with open_pool(dsn) as pool:
        broker = JetStreamBroker(NatsSettings(url=nats_url, stream=stream))
        await broker.start()
        try:

            async def ready() -> bool:
                return broker.connected

            await wait_until(ready)
            yield OutboxRelay(pool, broker, settings, Metrics())
        finally:
            await broker.close()


async def walk_order(db: asyncpg.Connection) -> list[str]:
    """Event ids in the order the relay walks them: `(outbox_xid, id)`."""
    rows = await db.fetch(
        "SELECT event_id FROM processed_webhooks ORDER BY outbox_xid::text::bigint, id"
    )
    return [r["event_id"] for r in rows]


async def owed(db: asyncpg.Connection) -> list[str]:
    rows = await db.fetch(
        "SELECT event_id FROM processed_webhooks pw WHERE outbox_holds(pw) ORDER BY id"
    )
    return [r["event_id"] for r in rows]


def ids(messages: list[Message]) -> list[str]:
    return [h["Gateway-Event-Id"] for _, h, _ in messages]


def batches_of(messages: list[Message]) -> list[list[str]]:
    """The stored messages grouped by the atomic batch that carried them (a message
    published on its own is a group of one without a batch id)."""
    groups: list[list[str]] = []
    last: str | None = None
    for _, headers, _ in messages:
        batch = headers.get("Nats-Batch-Id")
        if batch is None or batch != last:
            groups.append([])
        groups[-1].append(headers["Gateway-Event-Id"])
        last = batch
    return groups


async def record(db: asyncpg.Connection, *transactions: list[Event]) -> None:
    """Each list in its own transaction, in turn."""
    for events in transactions:
        await insert_events(db, events)


async def test_rows_reach_the_stream_in_walk_order_in_atomic_batches(
    database_url: str, nats_url: str, db: asyncpg.Connection
) -> None:
    """Five transactions of seven rows, batches of at most four: every row once, in
    `(outbox_xid, id)` order, carried by atomic batches, and the cursor past them all."""
    await record(db, *[[event(f"t{t}_{i}") for i in range(7)] for t in range(5)])
    async with relay_on(database_url, nats_url, publish_batch_max=4, batch_size=100) as relay:
        done = await sweep_until_still(relay)
    messages = await stream_messages(nats_url)
    assert ids(messages) == await walk_order(db)
    groups = batches_of(messages)
    assert all(len(g) <= 4 for g in groups) and len(groups) == 9  # 35 rows: 8 of 4, 1 of 3
    assert all("Nats-Batch-Id" in h for _, h, _ in messages)
    assert done[0].moved == 35 and await owed(db) == []


async def test_a_batch_holding_a_row_already_on_the_stream_is_sent_again_one_at_a_time(
    database_url: str, nats_url: str, db: asyncpg.Connection
) -> None:
    """A row published ahead of the relay (a replay's `publish_now`, a backfill, a relay
    that died after a batch) makes its batch refused whole (10201): that batch goes out
    one message at a time, the duplicate window drops the repeat, and every row ends up
    on the stream exactly once, the rest still in order and still in batches."""
    events = [event(f"e{i:02}") for i in range(12)]
    await record(db, events)
    early = await db.fetchrow("SELECT id FROM processed_webhooks WHERE event_id = 'e05'")
    assert early is not None
    nc = await nats.connect(nats_url)
    try:
        js = nc.jetstream()
        await js.add_stream(
            StreamConfig(
                name="WEBHOOKS",
                subjects=list(STREAM_SUBJECTS),
                allow_atomic=True,
                duplicate_window=120,
            )
        )
        stored = StoredEvent(early["id"], events[5])
        await js.publish(
            stored.event.subject or "", events[5].body, headers=message_headers(stored)
        )
    finally:
        await nc.close()
    async with relay_on(database_url, nats_url, publish_batch_max=4, batch_size=100) as relay:
        await sweep_until_still(relay)
    messages = await stream_messages(nats_url)
    assert Counter(ids(messages)) == Counter(e.event_id for e in events)  # once each
    walked = await walk_order(db)
    assert ids(messages) == ["e05"] + [e for e in walked if e != "e05"]
    # The batch that held e05 (e04..e07) went singly; the ones before and after did not.
    assert batches_of(messages) == [
        ["e05"], ["e00", "e01", "e02", "e03"], ["e04"], ["e06"], ["e07"],
        ["e08", "e09", "e10", "e11"],
    ]  # fmt: skip
    assert await owed(db) == []


async def test_a_batch_the_stream_does_not_answer_holds_the_cursor_and_nothing_after_it_goes(
    database_url: str, nats_url: str, db: asyncpg.Connection
) -> None:
    """A row whose subject no stream takes is refused (no responders): its batch goes
    one message at a time, each once the one before is stored, so the rows before it
    are published and it stops there, alone counting a publish attempt; it holds the
    cursor, and nothing after it is sent (it would land ahead of it) or counted."""
    events = [event(f"e{i:02}") for i in range(12)]
    events[5] = event("e05", subject="nowhere.billing.x")
    await record(db, events)
    async with relay_on(database_url, nats_url, publish_batch_max=4, batch_size=100) as relay:
        done = await relay.sweep()
    assert done.stuck
    messages = await stream_messages(nats_url)
    assert ids(messages) == ["e00", "e01", "e02", "e03", "e04"]
    assert await owed(db) == [e.event_id for e in events[5:]]
    attempts = await db.fetch(
        "SELECT event_id FROM processed_webhooks WHERE publish_attempts > 0 ORDER BY id"
    )
    assert [r["event_id"] for r in attempts] == ["e05"]


@pytest.fixture
def nats_of_five() -> Iterator[NatsServer]:
    server = NatsServer(batch_max_msgs=5)
    server.start()
    yield server
    server.cleanup()


async def test_a_batch_over_the_servers_limit_is_split(
    database_url: str,
    nats_of_five: NatsServer,
    db: asyncpg.Connection,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Batches of eight to a server that takes five: each is refused (10199) and sent
    again in halves of four; every row once, in order, and the setting to lower named
    once in the log."""
    caplog.set_level(logging.WARNING, logger="gateway.adapters.jetstream.broker")
    await record(db, [event(f"e{i:02}") for i in range(16)])
    url = nats_of_five.url
    async with relay_on(database_url, url, publish_batch_max=8, batch_size=100) as relay:
        await sweep_until_still(relay)
    messages = await stream_messages(url)
    assert ids(messages) == await walk_order(db)
    assert [len(g) for g in batches_of(messages)] == [4, 4, 4, 4]
    assert await owed(db) == []
    said = [r.getMessage() for r in caplog.records if "publish_batch_max" in r.getMessage()]
    assert len(said) == 1


async def test_an_event_too_large_for_the_stream_is_parked_and_its_batch_published(
    database_url: str, nats_url: str, db: asyncpg.Connection
) -> None:
    """A stream whose `max_msg_size` an event exceeds: its batch is refused as incomplete
    (10176), goes one message at a time, the large event is parked and the others are
    published, in order."""
    nc = await nats.connect(nats_url)
    try:
        await nc.jetstream().add_stream(
            StreamConfig(
                name="WEBHOOKS",
                subjects=list(STREAM_SUBJECTS),
                allow_atomic=True,
                duplicate_window=120,
                max_msg_size=4096,
            )
        )
    finally:
        await nc.close()
    events = [event(f"e{i:02}") for i in range(8)]
    events[2] = event("e02", body=b'{"pad": "' + b"A" * 8000 + b'"}')
    await record(db, events)
    async with relay_on(database_url, nats_url, publish_batch_max=4, batch_size=100) as relay:
        await sweep_until_still(relay)
    messages = await stream_messages(nats_url)
    assert ids(messages) == [e.event_id for e in events if e.event_id != "e02"]
    parked = await db.fetch("SELECT event_id, stage, error_class FROM dlq_webhooks")
    assert [tuple(r) for r in parked] == [("e02", "publish", "PAYLOAD_TOO_LARGE")]
    assert await owed(db) == []


async def test_an_event_over_the_servers_max_payload_is_parked_without_being_sent(
    database_url: str, db: asyncpg.Connection
) -> None:
    """Larger than the server's `max_payload`: never sent (the server would close the
    connection), parked; the rows around it go out in batches, in order."""
    server = NatsServer(max_payload=16_384)
    server.start()
    try:
        events = [event(f"e{i:02}") for i in range(8)]
        events[3] = event("e03", body=b'{"pad": "' + b"A" * 20_000 + b'"}')
        await record(db, events)
        async with relay_on(database_url, server.url, publish_batch_max=4) as relay:
            await sweep_until_still(relay)
        messages = await stream_messages(server.url)
    finally:
        server.cleanup()
    assert ids(messages) == [e.event_id for e in events if e.event_id != "e03"]
    assert all("Nats-Batch-Id" in h for _, h, _ in messages)
    parked = await db.fetch("SELECT event_id, error_class FROM dlq_webhooks")
    assert [tuple(r) for r in parked] == [("e03", "PAYLOAD_TOO_LARGE")]
    assert await owed(db) == []
