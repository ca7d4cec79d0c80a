"""`gateway events list|show|replay` as an operator runs it, against real PostgreSQL and
NATS: the filters and the table, one event's page, and a replay that gets through
JetStream's duplicate window (the stream is read back and counted)."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import orjson
import pytest

from gateway.adapters.postgres.webhooks import insert_events
from gateway.core.events.model import Event, Failure, Source
from gateway.errors import ErrorClass
from tests.integration.dlq.test_dlq_cli import arun, toml
from tests.support.deliveries import deliver
from tests.support.gateway import config, running_server
from tests.support.services import stream_messages, wait_until


@pytest.fixture
def cfg(tmp_path: Path, database_url: str, nats_url: str) -> str:
    path = tmp_path / "gateway.toml"
    path.write_text(toml(config(database_url, nats_url)), encoding="utf-8")
    return str(path)


async def _seed(database_url: str, nats_url: str) -> dict[str, int]:
    """Three live Stripe events and one GitHub event, published by a running gateway;
    one recovered by backfill, one never published (no subject), one emptied by
    retention. Returns row ids by event id."""
    async with running_server(config(database_url, nats_url)) as gw:
        for event_id, event_type in [
            ("evt_a", "invoice.paid"),
            ("evt_b", "invoice.payment_failed"),
            ("evt_c", "charge.succeeded"),
        ]:
            d = deliver("stripe", event_id, event_type)
            response = await gw.client.post(d.path, content=d.body, headers=d.headers)
            assert response.status_code == 200
        d = deliver("github", "gh-1", "push")
        assert (await gw.client.post(d.path, content=d.body, headers=d.headers)).status_code == 200
        await wait_until(lambda: _published(database_url, 4))
    conn = await asyncpg.connect(database_url)
    try:
        now = datetime.now(UTC)
        extra = [
            Event(
                "stripe",
                "evt_bf",
                "invoice.paid",
                "webhooks.stripe.invoice.paid",
                {"content-type": "application/json"},
                b'{"id": "evt_bf", "type": "invoice.paid"}',
                now,
                source=Source.BACKFILL,
            ),
            Event(
                "stripe",
                "evt_nosubj",
                None,
                None,
                {},
                b"not json",
                now,
                failure=Failure(ErrorClass.PAYLOAD_NOT_JSON, "not JSON"),
                source=Source.BACKFILL,
            ),
            Event(
                "stripe",
                "evt_gone",
                "invoice.paid",
                "webhooks.stripe.invoice.paid",
                {},
                b"{}",
                now - timedelta(days=40),
            ),
        ]
        await insert_events(conn, extra)
        await conn.execute(
            "UPDATE processed_webhooks SET body = '', headers = '{}', "
            "payload_removed_at = now() - interval '1 day' WHERE event_id = 'evt_gone'"
        )
        rows = await conn.fetch("SELECT id, event_id FROM processed_webhooks")
    finally:
        await conn.close()
    return {r["event_id"]: r["id"] for r in rows}


async def _published(database_url: str, count: int) -> bool:
    conn = await asyncpg.connect(database_url)
    try:
        n = await conn.fetchval(
            "SELECT count(*) FROM processed_webhooks WHERE outbox_published(processed_webhooks)"
        )
    finally:
        await conn.close()
    return bool(n >= count)


def _ids(out: str) -> list[str]:
    return [d["event_id"] for d in json.loads(out)]


async def test_list_filters_and_table(cfg: str, database_url: str, nats_url: str) -> None:
    """Each filter narrows the list; the table shows id, provider, event id, type,
    source, received and published; newest first."""
    ids = await _seed(database_url, nats_url)
    r = await arun("events", "list", "--config", cfg)
    assert r.returncode == 0, r.stderr
    header, *lines = r.stdout.splitlines()
    assert header.split() == [
        "ID",
        "PROVIDER",
        "EVENT",
        "ID",
        "TYPE",
        "SOURCE",
        "RECEIVED",
        "PUBLISHED",
    ]
    assert len(lines) == 7
    bf = next(line for line in lines if "evt_bf" in line)
    assert bf.split()[:5] == [str(ids["evt_bf"]), "stripe", "evt_bf", "invoice.paid", "backfill"]
    assert "never (no subject)" in next(line for line in lines if "evt_nosubj" in line)

    async def listed(*flags: str) -> list[str]:
        r = await arun("events", "list", "--json", "--config", cfg, *flags)
        assert r.returncode == 0, r.stderr
        return sorted(_ids(r.stdout))

    assert await listed("--provider", "github") == ["gh-1"]
    assert await listed("--type", "invoice.*") == ["evt_a", "evt_b", "evt_bf", "evt_gone"]
    assert await listed("--type", "invoice.paid") == ["evt_a", "evt_bf", "evt_gone"]
    assert await listed("--source", "backfill") == ["evt_bf", "evt_nosubj"]
    assert await listed("--until", "30d") == ["evt_gone"]
    assert "evt_gone" not in await listed("--since", "1d")
    assert await listed("--id", str(ids["evt_c"])) == ["evt_c"]
    assert await listed("--event-id", "evt_b") == ["evt_b"]
    r = await arun("events", "list", "--limit", "2", "--config", cfg)
    assert "showing the newest 2 matching events" in r.stdout
    r = await arun("events", "list", "--type", "in*voice", "--config", cfg)
    assert r.returncode == 2 and "--type" in r.stderr and "Traceback" not in r.stderr


async def test_show_pretty_json_text_and_removed(
    cfg: str, database_url: str, nats_url: str
) -> None:
    ids = await _seed(database_url, nats_url)
    r = await arun("events", "show", str(ids["evt_a"]), "--config", cfg)
    assert r.returncode == 0, r.stderr
    assert "event_id: evt_a" not in r.stdout  # headers, not the body, are key: value
    assert "  source         live" in r.stdout
    assert "content-type: application/json" in r.stdout.lower()
    assert "payload (json" in r.stdout and '\n  "id": "evt_a"' in r.stdout
    r = await arun("events", "show", str(ids["evt_nosubj"]), "--config", cfg)
    assert "payload (text, 8 bytes)\nnot json" in r.stdout
    r = await arun("events", "show", str(ids["evt_gone"]), "--config", cfg)
    assert "payload removed at" in r.stdout
    r = await arun("events", "show", str(ids["evt_gone"]), "--json", "--config", cfg)
    assert json.loads(r.stdout)["payload_format"] == "removed"
    r = await arun("events", "show", "999999", "--config", cfg)
    assert r.returncode == 1 and "no accepted event with id 999999" in r.stderr


async def test_replay_gets_through_the_duplicate_window(
    cfg: str, database_url: str, nats_url: str
) -> None:
    """Within the duplicate window a second `stripe:evt_a` would be dropped; the replay's
    own Nats-Msg-Id gets each chosen event through once more, with Gateway-Replayed. A
    dry run publishes nothing; rows without subject or payload are skipped, counted."""
    ids = await _seed(database_url, nats_url)
    before = await stream_messages(nats_url)
    assert len(before) == 4  # the live four; the inserted rows were never published

    dry = await arun(
        "events", "replay", "--all", "--provider", "stripe", "--dry-run", "--config", cfg
    )
    assert dry.returncode == 0, dry.stderr
    assert "dry run: would replay 4, skip 2; nothing was published" in dry.stdout
    assert len(await stream_messages(nats_url)) == 4

    r = await arun("events", "replay", "--all", "--provider", "stripe", "--config", cfg)
    assert r.returncode == 0, r.stderr
    assert "replayed 4, failed 0, skipped 2" in r.stdout
    assert f"skipped  {ids['evt_nosubj']} stripe/evt_nosubj: no subject" in r.stdout
    assert f"skipped  {ids['evt_gone']} stripe/evt_gone: payload removed at" in r.stdout
    after = await stream_messages(nats_url)
    replayed = [h for _, h, _ in after if "Gateway-Replayed" in h]
    assert sorted(h["Gateway-Event-Id"] for h in replayed) == ["evt_a", "evt_b", "evt_bf", "evt_c"]
    assert len(after) == 8
    for h in replayed:
        assert h["Nats-Msg-Id"].startswith(f"stripe:{h['Gateway-Event-Id']}:replay:")
        datetime.fromisoformat(h["Gateway-Replayed"])
    assert next(h for h in replayed if h["Gateway-Event-Id"] == "evt_bf")["Gateway-Source"] == (
        "backfill"
    )
    bodies = {h["Gateway-Event-Id"]: body for _, h, body in after if "Gateway-Replayed" not in h}
    again = {h["Gateway-Event-Id"]: body for _, h, body in after if "Gateway-Replayed" in h}
    assert again["evt_a"] == bodies["evt_a"]  # byte for byte

    r = await arun("events", "replay", "--id", str(ids["evt_a"]), "--json", "--config", cfg)
    doc: dict[str, Any] = orjson.loads(r.stdout)
    assert (doc["replayed"], doc["skipped"], doc["failed"]) == (1, 0, 0)
    assert len(await stream_messages(nats_url)) == 9

    r = await arun("events", "replay", "--config", cfg)
    assert r.returncode == 2 and "say which events" in r.stderr
    r = await arun("events", "replay", "--id", "999999", "--config", cfg)
    assert r.returncode == 1 and "999999" in r.stderr


async def test_dlq_list_and_show_say_the_source(cfg: str, database_url: str, nats_url: str) -> None:
    """A dead letter of a recovered event says so in `dlq list` and `dlq show`."""
    await _seed(database_url, nats_url)
    r = await arun("dlq", "list", "--config", cfg)
    header, line = r.stdout.splitlines()
    assert header.split()[-1] == "SOURCE" and line.split()[-1] == "backfill"
    r = await arun("dlq", "list", "--json", "--config", cfg)
    assert json.loads(r.stdout)[0]["source"] == "backfill"
    dlq_id = line.split()[0]
    r = await arun("dlq", "show", dlq_id, "--config", cfg)
    assert "  source         backfill" in r.stdout


async def test_replay_rate_paces(cfg: str, database_url: str, nats_url: str) -> None:
    """--rate 5 over 4 events takes at least 0.6 s (the first goes at once)."""
    await _seed(database_url, nats_url)
    loop = asyncio.get_running_loop()
    started = loop.time()
    r = await arun(
        "events", "replay", "--all", "--provider", "stripe", "--rate", "5", "--config", cfg
    )
    assert r.returncode == 0, r.stderr
    assert loop.time() - started >= 0.6


async def test_replay_stops_when_nats_is_away(tmp_path: Path, database_url: str) -> None:
    """No NATS: the first publish fails, the run stops there, says so and exits 1."""
    from tests.support.services import free_port

    conn = await asyncpg.connect(database_url)
    try:
        await insert_events(
            conn,
            [
                Event(
                    "stripe",
                    f"evt_{n}",
                    "invoice.paid",
                    "webhooks.stripe.invoice.paid",
                    {},
                    b"{}",
                    datetime.now(UTC),
                )
                for n in range(3)
            ],
        )
    finally:
        await conn.close()
    path = tmp_path / "gateway.toml"
    doc = config(database_url, f"nats://127.0.0.1:{free_port()}")
    doc["nats"]["request_timeout_s"] = 1
    path.write_text(toml(doc), encoding="utf-8")
    r = await arun("events", "replay", "--all", "--config", str(path))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "replayed 0, failed 1, skipped 0" in r.stdout
    assert "stopped early: NATS is not reachable" in r.stdout


async def test_replay_keeps_the_key_and_its_number(
    cfg: str, database_url: str, nats_url: str
) -> None:
    """A keyed row's replayed copy carries the key and the number ingest gave the row,
    so settlement applies it in its key's order; an unkeyed row's carries neither."""
    await _seed(database_url, nats_url)  # a running gateway made the stream
    now = datetime.now(UTC)
    conn = await asyncpg.connect(database_url)
    try:
        await insert_events(
            conn,
            [
                Event(
                    "stripe",
                    f"evt_k{n}",
                    "charge.captured",
                    "webhooks.stripe.charge.captured",
                    {},
                    b'{"data": {"object": {"payment_intent": "pi_1"}}}',
                    now,
                    order_key="pi_1",
                )
                for n in (1, 2)
            ],
        )
        numbers = {
            r["event_id"]: r["key_seq"]
            for r in await conn.fetch(
                "SELECT event_id, key_seq FROM processed_webhooks WHERE order_key = 'pi_1'"
            )
        }
    finally:
        await conn.close()
    assert numbers == {"evt_k1": 1, "evt_k2": 2}

    # GitHub's scheme keys nothing; a Stripe event is keyed by its object, settled or not.
    chosen = [a for e in ("evt_k1", "evt_k2", "gh-1") for a in ("--event-id", e)]
    r = await arun("events", "replay", *chosen, "--config", cfg)
    assert r.returncode == 0, r.stderr
    assert "replayed 3, failed 0, skipped 0" in r.stdout
    replayed = {
        h["Gateway-Event-Id"]: h
        for _, h, _ in await stream_messages(nats_url)
        if "Gateway-Replayed" in h
    }
    assert sorted(replayed) == ["evt_k1", "evt_k2", "gh-1"]
    for event_id, seq in numbers.items():
        assert replayed[event_id]["Gateway-Order-Key"] == "pi_1"
        assert replayed[event_id]["Gateway-Key-Seq"] == str(seq)
    assert "Gateway-Order-Key" not in replayed["gh-1"]
    assert "Gateway-Key-Seq" not in replayed["gh-1"]
