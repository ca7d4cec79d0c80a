"""A poison event holds only its key, and the operator's way back (open the account,
`gateway dlq replay --all`) settles the key in order; two workers sharing one durable
consumer settle a stream of keyed events, each once."""

from __future__ import annotations

import asyncio
import random
import uuid
from datetime import UTC, datetime
from pathlib import Path

import asyncpg
import nats
import pytest

from gateway import cli
from gateway import settings as settings_mod
from gateway.adapters.postgres.webhooks import insert_events
from gateway.core.events.model import Event
from gateway.settlement.worker import SettlementWorker
from gateway.wiring.settlement import settlement_parts
from tests.integration.settlement.test_ordering_gate import drain, open_merchants, settings_doc
from tests.support.config_file import write_toml
from tests.support.ordered_stream import MemoryStream, Payment, Published
from tests.support.ordering_property import violations
from tests.support.services import wait_until
from tests.support.settlement import merchant_balance, running_worker
from tests.support.stub import Stub


async def record(conn: asyncpg.Connection, events: list[Published]) -> None:
    """The events' processed_webhooks rows, numbered as ingest numbers them."""
    await insert_events(
        conn,
        [
            Event(e.provider, e.event_id, e.event_type, e.subject, {}, e.body,
                  datetime.fromtimestamp(e.stored_at_s, UTC))
            for e in events
        ],
    )  # fmt: skip
    await conn.executemany(
        "UPDATE processed_webhooks SET order_key = $3, key_seq = $4"
        " WHERE provider = $1 AND event_id = $2",
        [(e.provider, e.event_id, e.order_key, e.key_seq) for e in events],
    )


async def held_keys(conn: asyncpg.Connection) -> int:
    return int(await conn.fetchval("SELECT count(*) FROM order_applied WHERE held_seq IS NOT NULL"))


async def test_a_poison_capture_holds_only_its_key_until_fixed_and_replayed(
    tmp_path: Path,
    database_url: str,
    nats_url: str,
    stub: Stub,
    redis_url: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """100 payments of a capture and two refunds; one capture's merchant has no account.
    Its refunds park as BLOCKED_BY_PREDECESSOR and the 99 others settle in full; a
    refund replayed alone before it stays parked. Once the account is opened, one
    `gateway dlq replay --all` settles the key in order and no key is held."""
    doc = settings_doc(database_url, nats_url, stub, redis_url)
    cfg = str(write_toml(tmp_path / "gateway.toml", doc))
    payments = [Payment("billing", f"pay_{k}", f"m_{k}", 5_000, [700, 300]) for k in range(100)]
    poisoned = payments[37]
    conn = await asyncpg.connect(database_url)
    try:
        async with settlement_parts(settings_mod.parse(doc, env={})) as parts:
            await parts.settler.open_clearing_accounts()
            await open_merchants(parts, [p.merchant for p in payments if p is not poisoned])
            stream = MemoryStream()
            for p in payments:
                await record(conn, p.events())
                stream.publish(*p.events())
            await drain(SettlementWorker(parts), stream, random.Random(7), max_batch=128)

            for p in payments:
                expected = None if p is poisoned else 4_000
                assert await merchant_balance(parts, p.merchant) == expected, p.payment_id
            assert parts.metrics.order_blocked_parked_total.values == {(): 2.0}
        dead = await conn.fetch(
            "SELECT order_key, key_seq, error_class FROM dlq_webhooks ORDER BY key_seq"
        )
        assert [(d["order_key"], d["key_seq"], d["error_class"]) for d in dead] == [
            ("pay_37", 1, "UNKNOWN_MERCHANT"),
            ("pay_37", 2, "BLOCKED_BY_PREDECESSOR"),
            ("pay_37", 3, "BLOCKED_BY_PREDECESSOR"),
        ]
        assert await held_keys(conn) == 1
        assert await violations(conn) == []

        # Replayed alone, a row parked behind the hold stays parked: it waits for seq 1.
        third = await conn.fetchval("SELECT id FROM dlq_webhooks WHERE key_seq = 3")
        early = await asyncio.to_thread(
            cli.main, ["dlq", "replay", "--id", str(third), "--config", cfg]
        )
        assert early == 1
        assert "ORDER_PREDECESSOR_MISSING" in capsys.readouterr().out
        row = await conn.fetchrow(
            "SELECT is_resolved, error_message FROM dlq_webhooks WHERE id = $1", third
        )
        assert row is not None and not row["is_resolved"]
        assert "waits for seq 1 of its key (it is seq 3)" in row["error_message"]

        opened = await asyncio.to_thread(
            cli.main, ["ledger", "--config", cfg, "open-account", poisoned.merchant]
        )
        assert opened == 0
        replayed = await asyncio.to_thread(cli.main, ["dlq", "replay", "--all", "--config", cfg])
        out = capsys.readouterr().out
        assert replayed == 0, out
        assert "replayed 3, failed 0" in out

        async with settlement_parts(settings_mod.parse(doc, env={})) as parts:
            assert await merchant_balance(parts, poisoned.merchant) == 4_000
        assert await held_keys(conn) == 0
        log = await conn.fetch(
            "SELECT key_seq, outcome FROM order_log WHERE order_key = 'pay_37' ORDER BY id"
        )
        assert [(r["key_seq"], r["outcome"]) for r in log] == [
            (1, "applied"), (2, "applied"), (3, "applied")
        ]  # fmt: skip
        assert await violations(conn) == []
    finally:
        await conn.close()


async def test_two_workers_on_one_consumer_settle_each_event_once_in_order(
    database_url: str, nats_url: str, stub: Stub, redis_url: str
) -> None:
    """Two workers share the durable consumer; every event is on the stream twice (as a
    republished row would be). Each payment's balance is what its events make, each
    settlement has one transfer, and each key's log is 1, 2, 3."""
    doc = settings_doc(database_url, nats_url, stub, redis_url)
    run = uuid.uuid4().hex[:6]
    payments = [
        Payment("billing", f"pay_{run}_{k}", f"m_{run}_{k}", 3_000, [500, 250]) for k in range(40)
    ]
    conn = await asyncpg.connect(database_url)
    try:
        async with running_worker(doc) as one, running_worker(doc) as two:
            await open_merchants(one, [p.merchant for p in payments])
            del two
            nc = await nats.connect(nats_url)
            try:
                js = nc.jetstream()
                copies = [(e, c) for p in payments for e in p.events() for c in (1, 2)]
                random.Random(3).shuffle(copies)
                for e, copy in copies:
                    headers = {**e.headers(), "Nats-Msg-Id": f"{e.event_id}:{copy}"}
                    await js.publish(e.subject, e.body, headers=headers)
            finally:
                await nc.close()

            async def settled() -> bool:
                applied = await conn.fetchval(
                    "SELECT count(*) FROM order_log WHERE order_key LIKE $1", f"pay_{run}_%"
                )
                return int(applied) == 3 * len(payments)

            await wait_until(settled, timeout_s=30)
            await asyncio.sleep(1.0)  # any copy still in flight lands now, or never
            for p in payments:
                assert await merchant_balance(one, p.merchant) == 2_250, p.payment_id
        transfers = await conn.fetchval(
            "SELECT count(*) FROM ledger_transfers WHERE settlement_id LIKE $1", f"pay_{run}_%"
        )
        assert transfers == 3 * len(payments)
        assert await violations(conn) == []
    finally:
        await conn.close()
