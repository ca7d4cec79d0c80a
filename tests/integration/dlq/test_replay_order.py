"""`gateway dlq replay` runs each key's parked rows in key_seq order, whatever order they
were parked or received in; `--unordered` keeps arrival order. Run through the CLI's
entry point in this process, with the stage table's `settlement` handler replaced by one
that records the order it is called in (the real gate is settlement's own, tested with
it)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from pathlib import Path

import asyncpg
import pytest

from gateway import cli
from gateway.cli.common import LOG_LEVEL_ENV
from gateway.core.dlq.model import DlqRow
from gateway.dlq import replay as replay_mod
from gateway.dlq.parts import ReplayContext, StageHandler, StageHandlers
from gateway.dlq.replay import STAGE_HANDLERS
from tests.support.config_file import with_urls, write_toml


@pytest.fixture
def cfg(tmp_path: Path, database_url: str) -> str:
    return str(
        write_toml(tmp_path / "gateway.toml", with_urls({"database": {"url": database_url}}))
    )


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(database_url)
    await conn.execute("CREATE TABLE replay_log (seq bigserial, event_id text)")
    yield conn
    await conn.close()


@pytest.fixture
def recording(monkeypatch: pytest.MonkeyPatch) -> None:
    """`gateway dlq replay` in this process settles through a handler that logs each
    row it is given to `replay_log`."""

    async def factory(ctx: ReplayContext) -> StageHandler:
        async def handle(row: DlqRow) -> None:
            async with ctx.pool.acquire() as conn:
                await conn.execute("INSERT INTO replay_log (event_id) VALUES ($1)", row.event_id)

        return handle

    table: StageHandlers = {**STAGE_HANDLERS, "settlement": factory}
    monkeypatch.setattr(replay_mod, "STAGE_HANDLERS", table)
    monkeypatch.setenv(LOG_LEVEL_ENV, os.environ.get(LOG_LEVEL_ENV, "INFO"))


async def replay(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    status = await asyncio.to_thread(cli.main, ["dlq", "replay", *args])
    return status, capsys.readouterr().out


async def park(
    db: asyncpg.Connection,
    event_id: str,
    received_at: datetime,
    order_key: str | None = None,
    key_seq: int | None = None,
    provider: str = "stripe",
) -> int:
    row_id: int = await db.fetchval(
        "INSERT INTO dlq_webhooks (stage, provider, event_id, error_class, error_message,"
        " payload, received_at, order_key, key_seq)"
        " VALUES ('settlement', $1, $2, 'BLOCKED_BY_PREDECESSOR', 'x', '\\x7b7d', $3, $4, $5)"
        " RETURNING id",
        provider,
        event_id,
        received_at,
        order_key,
        key_seq,
    )
    return row_id


async def replayed(db: asyncpg.Connection) -> list[str]:
    return [r["event_id"] for r in await db.fetch("SELECT event_id FROM replay_log ORDER BY seq")]


@pytest.fixture
async def parked_out_of_order(db: asyncpg.Connection) -> dict[str, int]:
    """Two keys' rows parked (and received) out of their key order, between two rows
    without a key; returns each event's dead-letter id."""
    base: datetime = await db.fetchval("SELECT now() - interval '1 hour'")

    def at(s: int) -> datetime:
        return base + timedelta(seconds=s)

    ids = {}
    # (event, received second, key, seq), in the order they were parked.
    for event_id, second, key, seq in [
        ("a3", 10, "pi_A", 3),
        ("plain_late", 70, None, None),
        ("b2", 20, "pi_B", 2),
        ("a1", 50, "pi_A", 1),
        ("plain_early", 5, None, None),
        ("b1", 40, "pi_B", 1),
        ("a2", 30, "pi_A", 2),
    ]:
        ids[event_id] = await park(db, event_id, at(second), key, seq)
    return ids


async def test_each_keys_rows_replay_in_key_seq_order(
    capsys: pytest.CaptureFixture[str],
    cfg: str,
    db: asyncpg.Connection,
    recording: None,
    parked_out_of_order: dict[str, int],
) -> None:
    """A key's rows run one after another, 1, 2, 3; the rows without a key after the
    keys, oldest first; the dry run lists that same order."""
    status, out = await replay(capsys, "--all", "--dry-run", "--config", cfg)
    assert status == 0, out
    ids = parked_out_of_order
    expected = ["a1", "a2", "a3", "b1", "b2", "plain_early", "plain_late"]
    listed = [int(line.split()[0]) for line in out.splitlines() if line[:1].isdigit()]
    assert listed == [ids[e] for e in expected]
    assert await replayed(db) == []

    status, out = await replay(capsys, "--all", "--config", cfg)
    assert status == 0, out
    assert "replayed 7, failed 0, skipped 0" in out
    assert await replayed(db) == expected


async def test_ids_and_a_limit_keep_key_order(
    capsys: pytest.CaptureFixture[str],
    cfg: str,
    db: asyncpg.Connection,
    recording: None,
    parked_out_of_order: dict[str, int],
) -> None:
    """Rows named by --id run in key order too; --limit takes a key's first rows."""
    ids = parked_out_of_order
    named = [ids["a3"], ids["b1"], ids["a1"]]
    status, _ = await replay(capsys, *(f"--id={i}" for i in named), "--config", cfg)
    assert status == 0
    assert await replayed(db) == ["a1", "a3", "b1"]
    status, _ = await replay(capsys, "--all", "--limit", "2", "--config", cfg)
    assert status == 0
    assert await replayed(db) == ["a1", "a3", "b1", "a2", "b2"]


async def test_unordered_keeps_arrival_order(
    capsys: pytest.CaptureFixture[str],
    cfg: str,
    db: asyncpg.Connection,
    recording: None,
    parked_out_of_order: dict[str, int],
) -> None:
    """--unordered: every row oldest first, as before keys were ordered."""
    status, out = await replay(capsys, "--all", "--unordered", "--config", cfg)
    assert status == 0, out
    assert await replayed(db) == ["plain_early", "a3", "b2", "a2", "b1", "a1", "plain_late"]


async def test_same_key_of_two_providers_is_two_keys(
    capsys: pytest.CaptureFixture[str], cfg: str, db: asyncpg.Connection, recording: None
) -> None:
    """Order is per (provider, key): each provider's rows of one key text run in order."""
    base = await db.fetchval("SELECT now() - interval '1 hour'")
    for event_id, provider, seq, second in [
        ("p2", "paddle", 2, 1),
        ("s2", "stripe", 2, 2),
        ("p1", "paddle", 1, 3),
        ("s1", "stripe", 1, 4),
    ]:
        await park(db, event_id, base + timedelta(seconds=second), "k", seq, provider)
    status, _ = await replay(capsys, "--all", "--config", cfg)
    assert status == 0
    assert await replayed(db) == ["p1", "p2", "s1", "s2"]
