"""`gateway ordering keys|release`, and `gateway dlq resolve` of a row that holds its key,
as an operator runs them, against a real PostgreSQL.

The ordering state is written as ingest (order_counters) and settlement (order_applied,
order_log, the dead letters of a held key) leave it; the commands' answers and the rows
they leave are what is checked.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from pathlib import Path

import asyncpg
import orjson
import pytest

from tests.support.cli import Result, invoke
from tests.support.config_file import with_urls, write_toml
from tests.support.ordering_property import violations


@pytest.fixture
def cfg(tmp_path: Path, database_url: str) -> str:
    return str(
        write_toml(tmp_path / "gateway.toml", with_urls({"database": {"url": database_url}}))
    )


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(database_url)
    yield conn
    await conn.close()


async def gateway(*args: str) -> Result:
    """The CLI as an operator runs it (in this process), awaited in a thread."""
    return await asyncio.to_thread(invoke, *args)


async def park(db: asyncpg.Connection, provider: str, key: str, seq: int, error_class: str) -> int:
    """An open settlement dead letter of `key` at `seq`, as settlement parks one."""
    row_id: int = await db.fetchval(
        "INSERT INTO dlq_webhooks (stage, provider, event_id, error_class, error_message,"
        " payload, order_key, key_seq)"
        " VALUES ('settlement', $1, $2, $3, 'x', '\\x7b7d', $4, $5) RETURNING id",
        provider,
        f"evt_{key}_{seq}",
        error_class,
        key,
        seq,
    )
    return row_id


async def key(
    db: asyncpg.Connection,
    provider: str,
    order_key: str,
    *,
    last: int,
    applied: int | None,
    held: tuple[int, int | None, str, datetime] | None = None,
) -> None:
    """A key numbered up to `last`, applied up to `applied` (None: no settlement row),
    each applied number logged; `held`: (seq, dead letter, reason, since)."""
    await db.execute(
        "INSERT INTO order_counters (provider, order_key, last_seq) VALUES ($1, $2, $3)",
        provider,
        order_key,
        last,
    )
    if applied is None:
        return
    held_seq, dlq_id, reason, since = held or (None, None, None, None)
    await db.execute(
        "INSERT INTO order_applied (provider, order_key, applied_seq, held_seq, held_dlq_id,"
        " hold_reason, held_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
        provider,
        order_key,
        applied,
        held_seq,
        dlq_id,
        reason,
        since,
    )
    await db.executemany(
        "INSERT INTO order_log (provider, order_key, key_seq, outcome, event_id)"
        " VALUES ($1, $2, $3, 'applied', $4)",
        [(provider, order_key, s, f"evt_{order_key}_{s}") for s in range(1, applied + 1)],
    )


async def log_of(db: asyncpg.Connection, provider: str, order_key: str) -> list[asyncpg.Record]:
    return await db.fetch(
        "SELECT key_seq, outcome, event_id, actor, note FROM order_log"
        " WHERE provider = $1 AND order_key = $2 ORDER BY id",
        provider,
        order_key,
    )


@pytest.fixture
async def held_key(db: asyncpg.Connection) -> dict[str, int]:
    """stripe pi_A: numbered to 5, applied to 2, held at 3 by an unknown merchant, 4 and
    5 parked behind it; stripe pi_B: fully applied; service:billing inv_C: numbered,
    nothing applied yet."""
    now = await db.fetchval("SELECT now()")
    holder = await park(db, "stripe", "pi_A", 3, "UNKNOWN_MERCHANT")
    blocked = [await park(db, "stripe", "pi_A", s, "BLOCKED_BY_PREDECESSOR") for s in (4, 5)]
    since = now - timedelta(minutes=20)
    await key(db, "stripe", "pi_A", last=5, applied=2, held=(3, holder, "UNKNOWN_MERCHANT", since))
    await key(db, "stripe", "pi_B", last=4, applied=4)
    await key(db, "service:billing", "inv_C", last=1, applied=None)
    return {"holder": holder, "blocked_4": blocked[0], "blocked_5": blocked[1]}


async def test_keys_lists_applied_last_and_holds(cfg: str, held_key: dict[str, int]) -> None:
    """The table, --held, --provider and --json show each key's place and its hold."""
    listed = await gateway("ordering", "keys", "--config", cfg)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].split() == [
        "PROVIDER",
        "KEY",
        "APPLIED",
        "LAST",
        "HOLD",
        "HELD",
        "SINCE",
        "DLQ",
        "ID",
    ]
    rows = {tuple(line.split()[:4]) for line in lines[1:]}
    assert rows == {
        ("stripe", "pi_A", "2", "5"),
        ("stripe", "pi_B", "4", "4"),
        ("service:billing", "inv_C", "0", "1"),
    }
    (held_line,) = [line for line in lines if "pi_A" in line]
    assert "UNKNOWN_MERCHANT" in held_line and "(20m)" in held_line
    assert held_line.split()[-1] == str(held_key["holder"])

    held = await gateway("ordering", "keys", "--held", "--config", cfg)
    assert [line.split()[1] for line in held.stdout.splitlines()[1:]] == ["pi_A"]

    billing = await gateway(
        "ordering", "keys", "--provider", "service:billing", "--json", "--config", cfg
    )
    (doc,) = orjson.loads(billing.stdout)
    assert doc["order_key"] == "inv_C" and doc["applied_seq"] == 0 and doc["last_seq"] == 1
    assert doc["held"] is False and doc["hold_reason"] is None

    as_json = orjson.loads(
        (await gateway("ordering", "keys", "--held", "--json", "--config", cfg)).stdout
    )
    (a,) = as_json
    assert (a["provider"], a["applied_seq"], a["last_seq"], a["held_seq"]) == ("stripe", 2, 5, 3)
    assert a["held_dlq_id"] == held_key["holder"] and a["hold_reason"] == "UNKNOWN_MERCHANT"
    assert 1190 < a["held_for_s"] < 1300

    limited = await gateway("ordering", "keys", "--limit", "1", "--config", cfg)
    assert len(limited.stdout.splitlines()) == 3
    assert "showing the 1 most recently numbered keys (raise --limit" in limited.stdout


async def test_release_skips_the_holder_and_leaves_the_blocked_rows_parked(
    cfg: str, db: asyncpg.Connection, held_key: dict[str, int]
) -> None:
    """One transaction: the holder resolved by hand, seq 3 logged as skipped by the
    operator with the note, applied at 3, no hold; 4 and 5 stay parked and are named."""
    result = await gateway(
        "ordering",
        "release",
        "stripe",
        "pi_A",
        "--note",
        "merchant closed; refunded",
        "--config",
        cfg,
    )
    assert result.returncode == 0, result.stderr
    holder, b4, b5 = held_key["holder"], held_key["blocked_4"], held_key["blocked_5"]
    line = result.stdout.strip()
    assert line.startswith(f"released stripe key pi_A (UNKNOWN_MERCHANT): dead letter {holder}")
    assert line.endswith(
        f"2 blocked rows stay parked: replay them with gateway dlq replay --id {b4} --id {b5}"
    )

    state = await db.fetchrow("SELECT * FROM order_applied WHERE order_key = 'pi_A'")
    assert state is not None and state["applied_seq"] == 3
    assert (state["held_seq"], state["held_dlq_id"], state["hold_reason"], state["held_at"]) == (
        None,
        None,
        None,
        None,
    )
    log = await log_of(db, "stripe", "pi_A")
    assert [r["key_seq"] for r in log] == [1, 2, 3]
    skipped = log[-1]
    # Explained by the operator and the note (the dead letter is resolved by hand).
    assert (skipped["outcome"], skipped["note"]) == ("skipped", "merchant closed; refunded")
    assert skipped["actor"]
    row = await db.fetchrow("SELECT * FROM dlq_webhooks WHERE id = $1", holder)
    assert row is not None
    assert row["is_resolved"] and row["resolution"] == "manual"
    assert row["resolution_note"] == "merchant closed; refunded"
    assert row["resolved_by"] == skipped["actor"]
    still_open = await db.fetch("SELECT id FROM dlq_webhooks WHERE NOT is_resolved ORDER BY id")
    assert [r["id"] for r in still_open] == [b4, b5]

    assert await violations(db) == []  # the log still rises by 1 and the skip is explained
    again = await gateway("ordering", "release", "stripe", "pi_A", "--note", "x", "--config", cfg)
    assert again.returncode == 2
    assert "is not held; nothing to release" in again.stderr


async def test_release_past_a_gap_logs_every_number_it_skips(
    cfg: str, db: asyncpg.Connection
) -> None:
    """A hold for a missing predecessor sits past a gap: every number up to it is logged
    as skipped, so the key's log still rises by exactly 1; --json says what was done."""
    holder = await park(db, "paddle", "txn_9", 4, "ORDER_PREDECESSOR_MISSING")
    since = await db.fetchval("SELECT now()")
    await key(
        db,
        "paddle",
        "txn_9",
        last=4,
        applied=1,
        held=(4, holder, "ORDER_PREDECESSOR_MISSING", since),
    )
    result = await gateway(
        "ordering",
        "release",
        "paddle",
        "txn_9",
        "--note",
        "2 and 3 never came",
        "--json",
        "--config",
        cfg,
    )
    assert result.returncode == 0, result.stderr
    doc = orjson.loads(result.stdout)
    assert doc["applied_seq_before"] == 1 and doc["applied_seq"] == 4 and doc["skipped"] == 3
    assert doc["dead_letter_id"] == holder and doc["parked_behind"] == []
    log = await log_of(db, "paddle", "txn_9")
    assert [(r["key_seq"], r["outcome"], r["event_id"]) for r in log] == [
        (1, "applied", "evt_txn_9_1"),
        (2, "skipped", None),
        (3, "skipped", None),
        (4, "skipped", None),
    ]
    assert {r["note"] for r in log[1:]} == {"2 and 3 never came"}
    assert await violations(db) == []
    assert await db.fetchval("SELECT applied_seq FROM order_applied WHERE order_key = 'txn_9'") == 4


@pytest.mark.parametrize(
    ("args", "status", "message"),
    [
        (
            ["release", "stripe", "pi_nope", "--note", "x"],
            1,
            "gateway ordering release: no ordering state for key 'pi_nope' of provider 'stripe'",
        ),
        (
            ["release", "stripe", "pi_B", "--note", "x"],
            2,
            "key 'pi_B' of provider 'stripe' is not held",
        ),
        (["release", "service:billing", "inv_C", "--note", "x"], 2, "is not held"),
        (
            ["release", "stripe", "pi_A", "--note", "  "],
            2,
            "--note must say why the key is released",
        ),
        (["release", "stripe", "pi_A"], 2, "the following arguments are required: --note"),
        (["keys", "--limit", "0"], 2, "--limit: must be a whole number from 1 to 100000"),
    ],
)
async def test_mistakes_are_one_line_and_change_nothing(
    cfg: str,
    db: asyncpg.Connection,
    held_key: dict[str, int],
    args: list[str],
    status: int,
    message: str,
) -> None:
    result = await gateway("ordering", *args, "--config", cfg)
    assert result.returncode == status
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert message in lines[0]
    assert result.stdout == ""
    assert await db.fetchval("SELECT count(*) FROM order_log WHERE outcome = 'skipped'") == 0
    assert await db.fetchval("SELECT held_seq FROM order_applied WHERE order_key = 'pi_A'") == 3


async def test_dlq_resolve_of_the_holder_releases_its_key(
    cfg: str, db: asyncpg.Connection, held_key: dict[str, int]
) -> None:
    """Resolving the dead letter that holds a key by hand is a release of the key."""
    holder = held_key["holder"]
    result = await gateway(
        "dlq", "resolve", str(holder), "--note", "settled by hand", "--config", cfg
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("released stripe key pi_A (UNKNOWN_MERCHANT)")
    assert "2 blocked rows stay parked" in result.stdout
    assert await db.fetchval("SELECT applied_seq FROM order_applied WHERE order_key = 'pi_A'") == 3
    assert await db.fetchval("SELECT held_at FROM order_applied WHERE order_key = 'pi_A'") is None
    log = await log_of(db, "stripe", "pi_A")
    assert [(r["key_seq"], r["outcome"], r["note"]) for r in log][-1] == (
        3,
        "skipped",
        "settled by hand",
    )
    row = await db.fetchrow(
        "SELECT resolution, resolution_note FROM dlq_webhooks WHERE id = $1", holder
    )
    assert row is not None and tuple(row) == ("manual", "settled by hand")

    assert await violations(db) == []
    # A blocked row holds nothing: resolving it is today's resolve, the key untouched.
    blocked = held_key["blocked_4"]
    plain = await gateway("dlq", "resolve", str(blocked), "--note", "dropped", "--config", cfg)
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout.strip() == f"resolved {blocked} by hand: dropped"
    assert len(await log_of(db, "stripe", "pi_A")) == 3
