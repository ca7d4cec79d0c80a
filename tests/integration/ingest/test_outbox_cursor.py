"""The outbox cursor (sql/010) against real PostgreSQL and JetStream: transactions that
commit out of id order, a relay killed mid-batch, and rows waiting under the old scheme
when the migration runs."""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

import asyncpg
import nats
import nats.js.errors
import pytest

from gateway import settings as settings_mod
from gateway.adapters.jetstream.broker import JetStreamBroker
from gateway.adapters.postgres import migrate, open_pool
from gateway.adapters.postgres.webhooks import insert_events
from gateway.core.events.model import Event, webhook_event
from gateway.core.signatures.base import FieldRef
from gateway.errors import OutboxCursorAhead
from gateway.ingest.relay import OutboxRelay
from gateway.metrics import Metrics
from tests.support.cli import GATEWAY
from tests.support.config_file import write_toml
from tests.support.deliveries import deliver
from tests.support.gateway import config
from tests.support.outbox import sweep_until_still
from tests.support.processes import clean_env
from tests.support.services import stream_messages, wait_until

SQL_DIR = Path(__file__).resolve().parents[3] / "sql"


def stripe_event(event_id: str) -> Event:
    d = deliver("stripe", event_id, "payment_intent.succeeded")
    return webhook_event(
        "stripe", FieldRef("json", "id"), FieldRef("json", "type"), {}, d.body, datetime.now(UTC)
    )


async def owed(dsn: str) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        return int(
            await conn.fetchval("SELECT count(*) FROM processed_webhooks pw WHERE outbox_holds(pw)")
        )
    finally:
        await conn.close()


async def msg_ids(nats_url: str) -> Counter[str]:
    return Counter(h["Nats-Msg-Id"] for _, h, _ in await stream_messages(nats_url))


def connected(broker: JetStreamBroker) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return broker.connected

    return check


@contextlib.asynccontextmanager
async def relay_on(dsn: str, nats_url: str) -> AsyncIterator[OutboxRelay]:
    """A relay with its own pool and a connected broker, not sweeping on its own."""
    settings = settings_mod.parse(config(dsn, nats_url), env={})
    async with open_pool(dsn) as pool:
        broker = JetStreamBroker(settings.nats)
        await broker.start()
        try:
            await wait_until(connected(broker))
            yield OutboxRelay(pool, broker, settings.outbox, Metrics())
        finally:
            await broker.close()


async def test_a_transaction_committing_late_is_published_after_the_ones_it_began_before(
    database_url: str, nats_url: str
) -> None:
    """A commits after B although it took its transaction id first: the relay publishes
    B, passes it, and still publishes A once A commits, each exactly once."""
    async with relay_on(database_url, nats_url) as relay:
        slow = await asyncpg.connect(database_url)
        fast = await asyncpg.connect(database_url)
        try:
            tx = slow.transaction()
            await tx.start()
            await insert_events(slow, [stripe_event("evt_late_a")])  # xid taken first
            await insert_events(fast, [stripe_event("evt_early_b")])  # commits first
            xids = await fast.fetch(
                "SELECT event_id, outbox_xid::text::bigint AS x FROM processed_webhooks"
            )
            assert len(xids) == 1  # A is invisible until it commits

            await sweep_until_still(relay)
            assert await msg_ids(nats_url) == Counter({"stripe:evt_early_b": 1})

            await tx.commit()
            order = {
                r["event_id"]: r["x"]
                for r in await fast.fetch(
                    "SELECT event_id, outbox_xid::text::bigint AS x FROM processed_webhooks"
                )
            }
            assert order["evt_late_a"] < order["evt_early_b"]  # out of id order indeed
            await sweep_until_still(relay)
        finally:
            await slow.close()
            await fast.close()
    assert await msg_ids(nats_url) == Counter({"stripe:evt_early_b": 1, "stripe:evt_late_a": 1})
    assert await owed(database_url) == 0


async def test_a_relay_killed_mid_batch_loses_nothing_and_the_next_one_finishes(
    database_url: str, nats_url: str, tmp_path: Path
) -> None:
    """SIGKILL a `gateway relay` while it works through a backlog; a second relay starts
    from the cursor the first left. Every row reaches the stream, and a message the
    first published but never recorded is taken again only within the duplicate window
    (JetStream keeps one copy)."""
    events = [stripe_event(f"evt_kill_{i}") for i in range(3000)]
    async with open_pool(database_url) as pool, pool.acquire() as conn:
        for i in range(0, len(events), 500):
            await insert_events(conn, events[i : i + 500])
    doc = config(database_url, nats_url, outbox={"inline": False, "batch_size": 100})
    cfg = str(write_toml(tmp_path / "gateway.toml", doc))
    env = clean_env()

    def start_relay() -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [GATEWAY, "relay", "--config", cfg],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    first = start_relay()
    try:

        async def several_batches_published() -> bool:
            try:
                info = await js.stream_info("WEBHOOKS")
            except nats.js.errors.NotFoundError:
                return False  # the relay has not created the stream yet
            return info.state.messages >= 500

        nc = await nats.connect(nats_url)
        try:
            js = nc.jetstream()
            await wait_until(several_batches_published, timeout_s=30, interval_s=0.005)
        finally:
            await nc.close()
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=10)
    finally:
        if first.poll() is None:
            first.kill()
    left = await owed(database_url)
    assert 0 < left < len(events), left  # killed mid-way

    second = start_relay()
    try:

        async def drained() -> bool:
            return await owed(database_url) == 0

        await wait_until(drained, timeout_s=60)
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(timeout=30)
    assert second.returncode == 0
    assert await msg_ids(nats_url) == Counter({f"stripe:{e.event_id}": 1 for e in events})


async def test_rows_waiting_under_the_old_scheme_are_published_after_the_migration(
    empty_database_url: str, nats_url: str, tmp_path: Path
) -> None:
    """Before sql/010 a row was owed while `published_at` was NULL: the migration hands
    such rows to the cursor, and leaves published and parked ones alone."""
    before = tmp_path / "sql"
    before.mkdir()
    for path in sorted(SQL_DIR.glob("0*.sql")):
        if path.name < "010":
            shutil.copy(path, before / path.name)
    await migrate(empty_database_url, before)
    conn = await asyncpg.connect(empty_database_url)
    try:
        for event_id, published, parked in [
            ("evt_old_owed", False, False),
            ("evt_old_published", True, False),
            ("evt_old_parked", False, True),
        ]:
            e = stripe_event(event_id)
            await conn.execute(
                "INSERT INTO processed_webhooks (provider, event_id, event_type, subject, body,"
                " published_at, publish_parked_at) VALUES ('stripe', $1, $2, $3, $4,"
                " CASE WHEN $5 THEN now() END, CASE WHEN $6 THEN now() END)",
                event_id,
                e.event_type,
                e.subject,
                e.body,
                published,
                parked,
            )
    finally:
        await conn.close()
    assert (await migrate(empty_database_url))[0] == "010_outbox_cursor.sql"
    assert await owed(empty_database_url) == 1

    async with relay_on(empty_database_url, nats_url) as relay:
        await sweep_until_still(relay)
    assert await msg_ids(nats_url) == Counter({"stripe:evt_old_owed": 1})
    assert await owed(empty_database_url) == 0


def documented_rebase_sql() -> str:
    """The documented re-base: the SQL block of the docs that moves `outbox_cursor`."""
    root = SQL_DIR.parent
    for page in [root / "README.md", *sorted((root / "docs").rglob("*.md"))]:
        for block in page.read_text(encoding="utf-8").split("```sql\n")[1:]:
            sql = block.split("```", 1)[0]
            if "UPDATE outbox_cursor SET done_snapshot" in sql:
                return sql
    raise AssertionError("no page documents the re-base after restoring a dump")


async def test_a_cursor_ahead_of_the_database_stops_the_relay_until_re_based(
    database_url: str, nats_url: str
) -> None:
    """A dump restored into another cluster: the saved snapshots name transactions the
    new cluster has not reached. The relay publishes nothing (rather than take the rows
    for published); the README's re-base makes it publish what was owed, and only that."""
    async with open_pool(database_url) as pool, pool.acquire() as conn:
        await insert_events(conn, [stripe_event("evt_restored_owed")])
        await insert_events(conn, [stripe_event("evt_restored_done")])
        # As restored: ids from the old cluster, far above this one's, and its cursor,
        # which had passed the second row only.
        await conn.execute(
            "UPDATE processed_webhooks SET outbox_xid = CASE event_id"
            " WHEN 'evt_restored_done' THEN '999999900'::xid8 ELSE '999999950'::xid8 END"
        )
        await conn.execute(
            "UPDATE outbox_cursor SET done_snapshot = '999999920:999999920:',"
            " target_snapshot = '999999920:999999920:', after_xid = '0', after_id = 0"
        )
    async with relay_on(database_url, nats_url) as relay:
        with pytest.raises(OutboxCursorAhead):
            await relay.sweep()
        rebase = await asyncpg.connect(database_url)
        try:
            await rebase.execute(documented_rebase_sql())
        finally:
            await rebase.close()
        await sweep_until_still(relay)
    assert await msg_ids(nats_url) == Counter({"stripe:evt_restored_owed": 1})
    assert await owed(database_url) == 0
