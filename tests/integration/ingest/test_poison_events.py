"""Poison events cannot stop publishing: an event the broker can never take is parked
(`dlq_webhooks`, stage `publish`) and the outbox moves on; a row that keeps failing is
parked after `[outbox] max_publish_attempts`; a closed NATS client is rebuilt.

The NATS servers here take at most 16 KiB a message while the gateway accepts bodies of
64 KiB: the gateway believes the server's `max_payload` learned on connect, so this is
the case its start-up check cannot rule out.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import orjson
import pytest

from gateway.adapters.jetstream.broker import JetStreamBroker, PublishResult
from gateway.adapters.postgres import open_pool
from gateway.adapters.postgres.webhooks import StoredEvent, insert_events
from gateway.core.events.model import Event
from gateway.core.relay.batches import BatchLimits
from gateway.ingest.relay import OutboxRelay
from gateway.metrics import Metrics
from gateway.settings import HttpSettings, NatsSettings, OutboxSettings
from tests.integration.dlq.test_dlq_cli import arun, toml
from tests.support.deliveries import deliver
from tests.support.gateway import BILLING_TOKEN, RunningServer, config, running_server
from tests.support.nats import NatsServer
from tests.support.services import stream_messages, wait_until

SERVER_MAX_PAYLOAD = 16_384
POISON_BODY = orjson.dumps({"type": "bulk.x", "data": {"pad": "A" * 20_000}})


@pytest.fixture
def small_nats() -> Iterator[NatsServer]:
    """A private nats-server that takes at most 16 KiB a message."""
    server = NatsServer(max_payload=SERVER_MAX_PAYLOAD)
    server.start()
    yield server
    server.cleanup()


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(database_url)
    yield conn
    await conn.close()


async def published_ids(nats_url: str) -> set[str]:
    return {h.get("Gateway-Event-Id", "") for _, h, _ in await stream_messages(nats_url)}


async def send_genuine(server: RunningServer, event_id: str) -> None:
    d = deliver("stripe", event_id)
    answer = await server.client.post(d.path, content=d.body, headers=d.headers)
    assert answer.status_code == 200 and answer.json()["status"] == "accepted"


async def dead_letters(db: asyncpg.Connection) -> list[asyncpg.Record]:
    return await db.fetch(
        "SELECT stage, provider, event_id, error_class, attempts, is_resolved, resolution,"
        " webhook_id FROM dlq_webhooks ORDER BY id"
    )


def row(event_id: str, subject: str, body: bytes, received_at: datetime) -> Event:
    return Event(
        provider="service:billing",
        event_id=event_id,
        event_type="bulk.x",
        subject=subject,
        headers={},
        body=body,
        received_at=received_at,
    )


async def test_oversized_event_is_parked_and_the_next_webhook_is_published(
    database_url: str, small_nats: NatsServer, db: asyncpg.Connection
) -> None:
    """The issue's repro against a server with a small max_payload: the poison event is
    accepted (it is within max_body_bytes), parked as PAYLOAD_TOO_LARGE and never sent;
    the connection survives and a genuine webhook right after reaches the stream."""
    async with running_server(config(database_url, small_nats.url)) as server:
        await wait_until(lambda: server.parts.broker.ping())
        poison = await server.client.post(
            "/v1/events",
            content=POISON_BODY,
            headers={
                "Authorization": f"Bearer {BILLING_TOKEN}",
                "Idempotency-Key": "poison-1",
                "Content-Type": "application/json",
            },
        )
        assert poison.status_code == 200 and poison.json()["status"] == "accepted"
        await send_genuine(server, "evt_after_poison")

        await wait_until(lambda: published_ids(small_nats.url), timeout_s=20)
        assert await published_ids(small_nats.url) == {"evt_after_poison"}
        parked = await wait_until(lambda: dead_letters(db), timeout_s=20)
        assert [(r["stage"], r["event_id"], r["error_class"]) for r in parked] == [
            ("publish", "poison-1", "PAYLOAD_TOO_LARGE")
        ]
        webhook = await db.fetchrow(
            "SELECT id, outbox_published(pw) AS published, publish_parked_at"
            " FROM processed_webhooks pw WHERE event_id = 'poison-1'"
        )
        assert webhook is not None and not webhook["published"]
        assert webhook["publish_parked_at"] is not None and parked[0]["webhook_id"] == webhook["id"]
        assert (await server.client.get("/readyz")).status_code == 200
        metrics = (await server.client.get("/metrics")).text
        assert 'gateway_dlq_total{error_class="PAYLOAD_TOO_LARGE",stage="publish"} 1' in metrics


async def test_restart_with_poison_row_in_the_outbox_does_not_wedge_publishing(
    database_url: str, small_nats: NatsServer, db: asyncpg.Connection
) -> None:
    """The poison row is the oldest unpublished one when the gateway starts, so the relay
    claims it first in the same batch as a genuine row: the genuine row is published,
    the poison one parked, and later webhooks flow."""
    old = datetime.now(UTC) - timedelta(minutes=5)
    async with open_pool(database_url, max_size=2) as pool, pool.acquire() as conn:
        await insert_events(
            conn,
            [
                row("poison-old", "events.billing.bulk.x", POISON_BODY, old),
                row("fine-old", "events.billing.bulk.x", b'{"type":"bulk.x"}', old),
            ],
        )
    async with running_server(config(database_url, small_nats.url)) as server:
        await wait_until(
            lambda: published_ids(small_nats.url), timeout_s=20
        )  # the relay's first sweep
        await send_genuine(server, "evt_after_restart")

        async def both() -> bool:
            return await published_ids(small_nats.url) == {"fine-old", "evt_after_restart"}

        await wait_until(both, timeout_s=20)
        # The sweep commits its parking after the stream acknowledged its other rows.
        parked = await wait_until(lambda: dead_letters(db), timeout_s=20)
        assert [(r["event_id"], r["error_class"]) for r in parked] == [
            ("poison-old", "PAYLOAD_TOO_LARGE")
        ]


async def test_row_that_keeps_failing_is_parked_after_the_bound_and_replay_requeues_it(
    database_url: str, nats_server: NatsServer, db: asyncpg.Connection, tmp_path: Path
) -> None:
    """A row the stream never acknowledges (its subject is outside the stream) is parked
    after `max_publish_attempts` and no longer claimed; `gateway dlq replay` hands it back
    to the outbox, which parks it again while the cause is not fixed."""
    doc = config(database_url, nats_server.url, outbox={"max_publish_attempts": 3})
    async with open_pool(database_url, max_size=2) as pool, pool.acquire() as conn:
        await insert_events(
            conn, [row("lost-1", "nowhere.bulk.x", b"{}", datetime.now(UTC) - timedelta(1))]
        )
    async with running_server(doc) as server:
        parked = await wait_until(lambda: dead_letters(db), timeout_s=30)
        assert [(r["stage"], r["error_class"], r["attempts"]) for r in parked] == [
            ("publish", "PUBLISH_ATTEMPTS_EXHAUSTED", 3)
        ]
        await send_genuine(server, "evt_after_lost")  # the outbox still moves
        await wait_until(lambda: published_ids(nats_server.url), timeout_s=20)
        # Parked: no longer claimed, so its count stays where the bound stopped it.
        await asyncio.sleep(1.0)
        assert (
            await db.fetchval(
                "SELECT publish_attempts FROM processed_webhooks WHERE event_id = 'lost-1'"
            )
            == 3
        )

        cfg = tmp_path / "gateway.toml"
        cfg.write_text(toml(doc), encoding="utf-8")
        result = await arun("dlq", "replay", "--all", "--config", str(cfg))
        assert result.returncode == 0, result.stdout + result.stderr
        assert "replayed 1, failed 0" in result.stdout

        async def parked_again() -> list[asyncpg.Record]:
            rows = await dead_letters(db)
            return rows if len(rows) == 2 and not rows[1]["is_resolved"] else []

        first, second = await wait_until(parked_again, timeout_s=30)
        assert (first["is_resolved"], first["resolution"]) == (True, "replayed")
        assert (second["error_class"], second["attempts"]) == ("PUBLISH_ATTEMPTS_EXHAUSTED", 3)


class NoAckBroker(JetStreamBroker):
    """Connected, but no publish is ever acknowledged; `stream_up` says whether the
    stream answers a request (False: the broker is in trouble, not the rows)."""

    def __init__(self) -> None:
        super().__init__(NatsSettings())
        self.stream_up = False

    @property
    def connected(self) -> bool:
        return True

    async def publish(
        self,
        events: Sequence[StoredEvent],
        timeout_s: float,
        batches: BatchLimits | None = None,
    ) -> PublishResult:
        return PublishResult([], [e.webhook_id for e in events])

    async def stream_answers(self) -> bool:
        return self.stream_up


async def test_broker_outage_does_not_count_toward_the_bound(
    database_url: str, db: asyncpg.Connection
) -> None:
    """Sweeps that get no PubAck while the stream does not answer count nothing; once the
    stream answers, the row is parked at the bound and then no longer claimed."""
    broker = NoAckBroker()
    settings = OutboxSettings(inline=False, max_publish_attempts=2)
    async with open_pool(database_url, max_size=2) as pool:
        async with pool.acquire() as conn:
            await insert_events(conn, [row("e1", "events.billing.x", b"{}", datetime.now(UTC))])
        relay = OutboxRelay(pool, broker, settings, Metrics())
        for _ in range(3):
            await relay.sweep()
        assert await db.fetchval("SELECT publish_attempts FROM processed_webhooks") == 0
        assert await dead_letters(db) == []
        broker.stream_up = True
        for _ in range(3):
            await relay.sweep()
        assert await db.fetchval("SELECT publish_attempts FROM processed_webhooks") == 2
        parked = await dead_letters(db)
        assert [(r["stage"], r["error_class"], r["attempts"]) for r in parked] == [
            ("publish", "PUBLISH_ATTEMPTS_EXHAUSTED", 2)
        ]


async def test_replay_of_publish_row_without_its_event_fails_clearly(
    database_url: str, nats_server: NatsServer, db: asyncpg.Connection, tmp_path: Path
) -> None:
    """A `publish` dead letter whose processed_webhooks row is gone is never re-inserted."""
    await db.execute(
        "INSERT INTO dlq_webhooks (stage, provider, event_id, error_class, error_message,"
        " payload) VALUES ('publish', 'stripe', 'evt_gone', 'PAYLOAD_TOO_LARGE', 'x', '')"
    )
    cfg = tmp_path / "gateway.toml"
    cfg.write_text(toml(config(database_url, nats_server.url)), encoding="utf-8")
    result = await arun("dlq", "replay", "--all", "--config", str(cfg))
    assert result.returncode == 1
    assert "EVENT_NOT_RECORDED" in result.stdout and "Traceback" not in result.stderr
    assert await db.fetchval("SELECT is_resolved FROM dlq_webhooks") is False


async def test_closed_nats_client_is_rebuilt_and_readiness_follows(
    database_url: str, nats_server: NatsServer
) -> None:
    """A client nats-py closed for good (here: closed under the broker's feet) is replaced;
    /readyz answers 200 again once the new one is up."""
    async with running_server(config(database_url, nats_server.url)) as server:
        broker = server.parts.broker
        assert isinstance(broker, JetStreamBroker)
        await wait_until(lambda: broker.ping())
        first = broker._nc  # the client the broker made
        assert first is not None
        await first.close()
        assert first.is_closed

        async def rebuilt() -> bool:
            return broker._nc is not first and await broker.ping()

        await wait_until(rebuilt, timeout_s=20)
        assert (await server.client.get("/readyz")).status_code == 200
        await send_genuine(server, "evt_after_rebuild")

        async def published() -> bool:
            return "evt_after_rebuild" in await published_ids(nats_server.url)

        await wait_until(published, timeout_s=20)


async def test_default_limits_refuse_the_issue_repro_and_publish_the_largest_accepted_body(
    database_url: str, nats_server: NatsServer
) -> None:
    """Against a NATS with its default 1 MiB max_payload and the gateway's default body
    limit: the issue's 1,048,415-byte event is refused with 413 (nothing stored), and the
    largest body accepted, with a long idempotency key, does reach the stream."""
    default_limit = HttpSettings().max_body_bytes  # the shipped default, whatever it is
    doc = config(database_url, nats_server.url, http={"max_body_bytes": default_limit})
    auth = {"Authorization": f"Bearer {BILLING_TOKEN}", "Content-Type": "application/json"}
    frame = len(orjson.dumps({"type": "bulk.x", "data": {"pad": ""}}))
    async with running_server(doc) as server:
        await wait_until(lambda: server.parts.broker.ping())
        repro = orjson.dumps({"type": "bulk.x", "data": {"pad": "A" * (1_048_415 - frame)}})
        assert len(repro) == 1_048_415
        refused = await server.client.post(
            "/v1/events", content=repro, headers={**auth, "Idempotency-Key": "repro"}
        )
        assert refused.status_code == 413
        largest = orjson.dumps({"type": "bulk.x", "data": {"pad": "A" * (default_limit - frame)}})
        key = "k" * 255  # the longest event id allowed
        accepted = await server.client.post(
            "/v1/events", content=largest, headers={**auth, "Idempotency-Key": key}
        )
        assert accepted.status_code == 200 and accepted.json()["status"] == "accepted"

        async def published() -> bool:
            return key in await published_ids(nats_server.url)

        await wait_until(published, timeout_s=30)
    conn = await asyncpg.connect(database_url)
    try:
        assert await conn.fetchval("SELECT count(*) FROM processed_webhooks") == 1
        assert await conn.fetchval("SELECT count(*) FROM dlq_webhooks") == 0
    finally:
        await conn.close()
