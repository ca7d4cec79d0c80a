"""`gateway retention run` as cron runs it, and what the DLQ commands say about a dead
letter whose payload retention removed."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest

from gateway.adapters.postgres import retention as store
from tests.integration.dlq.test_dlq_cli import park, toml
from tests.integration.retention.test_order_retention import key
from tests.support.cli import Result, invoke
from tests.support.gateway import config
from tests.support.outbox import pass_cursor


async def arun(*args: str) -> Result:
    return await asyncio.to_thread(invoke, *args)


@pytest.fixture
def cfg(tmp_path: Path, database_url: str) -> str:
    retention = {"payload_max_age_s": 1, "key_max_age_s": 0, "batch_size": 10, "pause_s": 0}
    doc = config(database_url, "nats://127.0.0.1:1", retention=retention)
    path = tmp_path / "gateway.toml"
    path.write_text(toml(doc), encoding="utf-8")
    return str(path)


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(database_url)
    for i in range(12):
        await conn.execute(
            "INSERT INTO processed_webhooks (provider, event_id, event_type, subject, body,"
            " received_at) VALUES ('stripe', $1, 't', 'webhooks.stripe.t',"
            " '{}'::bytea, now() - interval '1 minute')",
            f"evt_{i}",
        )
    await pass_cursor(conn)  # on the stream: retention may empty them
    yield conn
    await conn.close()


async def test_dry_run_then_run_text_and_json(cfg: str, db: asyncpg.Connection) -> None:
    """The dry run counts and changes nothing; the run empties in batches; both print one
    summary (text, or one JSON document)."""
    dry = await arun("retention", "run", "--dry-run", "--config", cfg)
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.startswith(
        "retention (dry run): would empty 12 event payload(s) and 0 dead-letter payload(s), "
        "would delete 0 key(s)"
    )
    assert "keys kept for ever" in dry.stdout
    assert (
        await db.fetchval(
            "SELECT count(*) FROM processed_webhooks WHERE payload_removed_at IS NOT NULL"
        )
        == 0
    )

    done = await arun("retention", "run", "--json", "--config", cfg)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["removed"]["processed_webhooks"] == {"payload": 12, "key": 0}
    assert doc["dry_run"] is False and doc["skipped"] is False and doc["batches"] >= 2
    assert doc["keys_before"] is None and doc["payloads_before"]

    text = await arun("--json", "retention", "run", "--config", cfg)  # flag before the name
    assert json.loads(text.stdout)["removed"]["processed_webhooks"]["payload"] == 0


async def test_the_text_summary_counts_the_ordering_keys_removed(
    tmp_path: Path, database_url: str
) -> None:
    """Two keys idle past the key horizon and fully applied (five numbers logged) are
    counted by the dry run and removed by the run; one still behind is kept."""
    conn = await asyncpg.connect(database_url)
    try:
        await key(conn, "pi_done_a", last=3, applied=3)
        await key(conn, "pi_done_b", last=2, applied=2)
        await key(conn, "pi_behind", last=3, applied=2)
        retention = {"payload_max_age_s": 60, "key_max_age_s": 3600, "pause_s": 0}
        path = tmp_path / "keys.toml"
        path.write_text(toml(config(database_url, "nats://127.0.0.1:1", retention=retention)))
        dry = await arun("retention", "run", "--dry-run", "--config", str(path))
        assert dry.returncode == 0, dry.stderr
        assert "would delete 0 key(s) and 2 ordering key(s) (5 order log row(s));" in dry.stdout
        assert await conn.fetchval("SELECT count(*) FROM order_counters") == 3
        done = await arun("retention", "run", "--config", str(path))
        assert done.returncode == 0, done.stderr
        assert "deleted 0 key(s) and 2 ordering key(s) (5 order log row(s));" in done.stdout
        left = await conn.fetch("SELECT order_key FROM order_counters")
        assert [r["order_key"] for r in left] == ["pi_behind"]
        again = await arun("retention", "run", "--config", str(path))
        assert "deleted 0 key(s) and 0 ordering key(s) (0 order log row(s));" in again.stdout
    finally:
        await conn.close()


async def test_a_run_finding_the_lock_held_says_so_and_exits_0(
    cfg: str, db: asyncpg.Connection
) -> None:
    assert await db.fetchval("SELECT pg_try_advisory_lock($1)", store.LOCK_KEY)
    result = await arun("retention", "run", "--config", cfg)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "retention: skipped, another process holds the retention lock"
    assert (
        await db.fetchval(
            "SELECT count(*) FROM processed_webhooks WHERE payload_removed_at IS NOT NULL"
        )
        == 0
    )


async def test_a_short_key_horizon_is_warned_about_and_a_bad_one_refused(
    tmp_path: Path, database_url: str
) -> None:
    path = tmp_path / "short.toml"
    doc = config(
        database_url,
        "nats://127.0.0.1:1",
        retention={"key_max_age_s": 3600, "payload_max_age_s": 60},
    )
    path.write_text(toml(doc), encoding="utf-8")
    result = await arun("retention", "run", "--dry-run", "--config", str(path))
    assert result.returncode == 0
    assert "shorter than providers' retry schedules" in result.stderr
    # Keys younger than payloads would silently shorten the payload horizon.
    path.write_text(toml(doc | {"retention": {"key_max_age_s": 5, "payload_max_age_s": 10}}))
    refused = await arun("retention", "run", "--config", str(path))
    assert refused.returncode == 2
    assert "retention.key_max_age_s: must be 0 (keys kept for ever) or at least" in refused.stderr


async def test_dlq_show_and_replay_of_a_removed_payload(cfg: str, db: asyncpg.Connection) -> None:
    """`dlq show` says when the payload was removed; replaying the row fails it with
    PAYLOAD_REMOVED and a message saying why, and nothing else is attempted."""
    row_id = await park(db, "evt_gone")
    # An open row with its payload gone: e.g. removed under an older policy, or by hand.
    await db.execute(
        "UPDATE dlq_webhooks SET payload = ''::bytea, headers = '{}',"
        " payload_removed_at = '2026-11-01T00:00:00Z' WHERE id = $1",
        row_id,
    )
    shown = await arun("dlq", "show", str(row_id), "--config", cfg)
    assert shown.returncode == 0, shown.stderr
    assert "payload removed at 2026-11-01T00:00:00Z (retention)" in shown.stdout
    doc = json.loads((await arun("dlq", "show", str(row_id), "--json", "--config", cfg)).stdout)
    assert doc["payload_format"] == "removed" and doc["payload"] is None
    assert doc["payload_removed_at"].startswith("2026-11-01T00:00:00")

    replayed = await arun("dlq", "replay", "--id", str(row_id), "--config", cfg)
    assert replayed.returncode == 1
    assert "PAYLOAD_REMOVED" in replayed.stdout + replayed.stderr
    row = await db.fetchrow(
        "SELECT error_class, error_message, attempts, is_resolved FROM dlq_webhooks WHERE id = $1",
        row_id,
    )
    assert row is not None
    assert row["error_class"] == "PAYLOAD_REMOVED" and not row["is_resolved"]
    assert "payload removed at 2026-11-01T00:00:00+00:00 by retention" in row["error_message"]
    assert row["attempts"] == 2
