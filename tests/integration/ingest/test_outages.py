"""Outages and concurrency: NATS down, PostgreSQL unreachable, several relays, shutdown."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import asyncpg
import pytest

from chaos.proxy import FaultProxy
from gateway import settings as settings_mod
from gateway.adapters.jetstream.broker import JetStreamBroker
from gateway.adapters.postgres import migrate, open_pool, outbox
from gateway.adapters.postgres.webhooks import insert_events
from gateway.core.events.model import Event, webhook_event
from gateway.core.signatures.base import FieldRef
from gateway.ingest.relay import OutboxRelay
from gateway.metrics import Metrics
from gateway.wiring.ingest import running_gateway
from tests.support.deliveries import deliver
from tests.support.gateway import config, running_server
from tests.support.nats import NatsServer
from tests.support.services import stream_messages, wait_until


async def count(dsn: str, sql: str) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        return int(await conn.fetchval(sql))
    finally:
        await conn.close()


async def test_nats_down_acceptance_continues_and_every_event_reaches_stream_once(
    database_url: str, nats_server: NatsServer
) -> None:
    """With NATS stopped, webhooks are still accepted; when it returns, the outbox drains."""
    async with running_server(config(database_url, nats_server.url)) as server:
        before = [deliver("stripe", f"evt_before_{i}") for i in range(5)]
        for d in before:
            assert (
                await server.client.post(d.path, content=d.body, headers=d.headers)
            ).status_code == 200
        await wait_until(
            lambda: count(
                database_url,
                "SELECT count(*) = 5 FROM processed_webhooks pw WHERE outbox_published(pw)",
            )
        )
        nats_server.stop()
        during = [deliver("stripe", f"evt_during_{i}") for i in range(40)]
        answers = await asyncio.gather(
            *(server.client.post(d.path, content=d.body, headers=d.headers) for d in during)
        )
        assert {a.status_code for a in answers} == {200}
        assert {a.json()["status"] for a in answers} == {"accepted"}
        assert (
            await count(
                database_url,
                "SELECT count(*) FROM processed_webhooks WHERE outbox_holds(processed_webhooks)",
            )
            == 40
        )
        ready = await server.client.get("/readyz")
        assert ready.status_code == 503 and ready.json()["nats"] is False

        nats_server.start()  # same port, same store: the stream and its messages survive
        await wait_until(
            lambda: count(
                database_url,
                "SELECT count(*) = 0 FROM processed_webhooks pw WHERE outbox_holds(pw)",
            ),
            timeout_s=30,
        )
    messages = await stream_messages(nats_server.url)
    ids = sorted(m[1]["Nats-Msg-Id"] for m in messages)
    assert ids == sorted(f"stripe:{d.event_id}" for d in before + during)


async def test_database_unreachable_gives_503_and_nothing_half_written(
    database_url: str, nats_url: str
) -> None:
    """No 2xx without a committed row; the gateway recovers by itself afterwards."""
    proxy = FaultProxy("127.0.0.1", 5432)
    await proxy.start()
    proxied = database_url.replace("127.0.0.1:5432", f"127.0.0.1:{proxy.listen_port}")
    doc = config(proxied, nats_url, ingest={"commit_timeout_s": 2.0})
    try:
        async with running_server(doc) as server:
            ok = deliver("stripe", "evt_ok_before")
            assert (
                await server.client.post(ok.path, content=ok.body, headers=ok.headers)
            ).status_code == 200

            await proxy.set_enabled(False)
            down = [deliver("stripe", f"evt_down_{i}") for i in range(10)]
            answers = await asyncio.gather(
                *(server.client.post(d.path, content=d.body, headers=d.headers) for d in down)
            )
            assert {a.status_code for a in answers} == {503}
            assert all(a.headers["Retry-After"].isdigit() for a in answers)
            assert (await server.client.get("/readyz")).json()["database"] is False

            await proxy.set_enabled(True)
            retried = await asyncio.gather(
                *(server.client.post(d.path, content=d.body, headers=d.headers) for d in down)
            )
            assert {a.status_code for a in retried} == {200}
    finally:
        await proxy.close()
    # Every event that got a 2xx has exactly one row; nothing else was written.
    assert await count(database_url, "SELECT count(*) FROM processed_webhooks") == 11
    assert await count(database_url, "SELECT count(*) FROM dlq_webhooks") == 0


async def test_relays_share_the_backlog_without_publishing_a_row_twice(
    database_url: str, nats_url: str
) -> None:
    """Rows committed while no publisher ran are each published by exactly one relay."""
    ref_id, ref_type = FieldRef("json", "id"), FieldRef("json", "type")
    events = []
    for i in range(600):
        d = deliver("stripe", f"evt_backlog_{i}")
        events.append(webhook_event("stripe", ref_id, ref_type, {}, d.body, datetime.now(UTC)))
    settings = settings_mod.parse(config(database_url, nats_url), env={})
    outbox = settings.outbox
    metrics = [Metrics(), Metrics(), Metrics()]
    async with open_pool(database_url) as pool:
        async with pool.acquire() as conn:
            await insert_events(conn, events)
        brokers = [JetStreamBroker(settings.nats) for _ in metrics]
        for broker in brokers:
            await broker.start()
        relays = [OutboxRelay(pool, b, outbox, m) for b, m in zip(brokers, metrics, strict=True)]

        async def drain(relay: OutboxRelay) -> None:
            while True:
                done = await relay.sweep()
                if done.busy:  # another relay holds the cursor: ask again shortly
                    await asyncio.sleep(0.005)
                elif not done.moved:
                    return

        await asyncio.gather(*(drain(r) for r in relays))
        for broker in brokers:
            await broker.close()
    per_relay = [int(m.published_total.get(path="relay")) for m in metrics]
    assert sum(per_relay) == 600, per_relay  # each row confirmed once, by one relay
    assert (
        await count(
            database_url,
            "SELECT count(*) FROM processed_webhooks WHERE outbox_holds(processed_webhooks)",
        )
        == 0
    )
    assert len(await stream_messages(nats_url)) == 600


async def test_graceful_shutdown_publishes_what_was_accepted(
    database_url: str, nats_url: str
) -> None:
    """Stopping the gateway drains the outbox: nothing accepted waits for a restart."""
    doc = config(database_url, nats_url)
    settings = settings_mod.parse(doc, env={})
    async with running_gateway(settings) as gw:
        for i in range(50):
            d = deliver("paddle", f"evt_shutdown_{i}")
            await gw.inbox.accept(_paddle_event(d.body))
    assert (
        await count(
            database_url,
            "SELECT count(*) FROM processed_webhooks WHERE outbox_holds(processed_webhooks)",
        )
        == 0
    )
    assert len(await stream_messages(nats_url)) == 50


async def test_graceful_shutdown_waits_out_a_sweep_in_progress(
    database_url: str, nats_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sweep holds the outbox's lock as the gateway stops (another relay's, or its own
    cancelled one still ending at the server): the stop waits for it and publishes
    what was accepted, rather than leaving it for a relay that may never come."""
    settings = settings_mod.parse(config(database_url, nats_url), env={})
    holder = await asyncpg.connect(database_url)
    try:
        sweeping = holder.transaction()
        await sweeping.start()
        assert await outbox.try_lock(holder)
        async with running_gateway(settings) as gw:
            for i in range(20):
                d = deliver("paddle", f"evt_held_{i}")
                await gw.inbox.accept(_paddle_event(d.body))

            # Let go only once the relay's own loop is stopped: only the drain is left
            # to publish, and it finds the lock taken.
            stopped = asyncio.Event()
            close = OutboxRelay.close

            async def closed(relay: OutboxRelay) -> None:
                await close(relay)
                stopped.set()

            monkeypatch.setattr(OutboxRelay, "close", closed)

            async def sweep_ends() -> None:
                await stopped.wait()
                await asyncio.sleep(0.3)
                await sweeping.rollback()

            ending = asyncio.create_task(sweep_ends())
        await asyncio.wait_for(ending, 10)
    finally:
        await holder.close()
    held = "SELECT count(*) FROM processed_webhooks WHERE outbox_holds(processed_webhooks)"
    assert await count(database_url, held) == 0
    assert len(await stream_messages(nats_url)) == 20


def _paddle_event(body: bytes) -> Event:
    return webhook_event(
        "paddle",
        FieldRef("json", "event_id"),
        FieldRef("json", "event_type"),
        {},
        body,
        datetime.now(UTC),
    )


async def test_migrations_apply_once_from_several_processes(empty_database_url: str) -> None:
    results = await asyncio.gather(*(migrate(empty_database_url) for _ in range(4)))
    applied = sorted(name for names in results for name in names)
    assert applied == sorted({name for names in results for name in names})  # no repeats
    assert await count(empty_database_url, "SELECT count(*) FROM schema_migrations") == len(applied)
    assert await migrate(empty_database_url) == []


@pytest.mark.parametrize("batching", [True, False], ids=["group-commit", "one-commit-per-request"])
async def test_both_commit_modes_give_the_same_answers(
    database_url: str, nats_url: str, batching: bool
) -> None:
    async with running_server(
        config(database_url, nats_url, ingest={"batching": batching})
    ) as server:
        ds = [deliver("shopify", f"shop-{i % 20}", "orders/create") for i in range(60)]
        answers = await asyncio.gather(
            *(server.client.post(d.path, content=d.body, headers=d.headers) for d in ds)
        )
    statuses = [a.json()["status"] for a in answers]
    assert statuses.count("accepted") == 20
    assert statuses.count("duplicate") == 40
    assert await count(database_url, "SELECT count(*) FROM processed_webhooks") == 20
    assert await count(database_url, "SELECT count(DISTINCT subject) FROM processed_webhooks") == 1
