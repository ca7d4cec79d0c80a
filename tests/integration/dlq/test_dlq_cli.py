"""`gateway dlq` as an operator runs it, against real PostgreSQL and NATS.

Rows of the `ingest` stage are replayed with the real handler (an event parked for a
missing type, the provider's config fixed, the event reaches the stream once). The
generic paths (success, failure, attempts cap, order, concurrency) run `gateway dlq
replay` through the CLI's own entry point in this process, with the stage table's
`settlement` handler replaced by the test's own (the real one is exercised end to end in
tests/integration/settlement/test_settlement_replay.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import pty
import re
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import orjson
import pytest

from gateway import cli
from gateway.cli.common import LOG_LEVEL_ENV
from gateway.core.dlq.model import DlqRow
from gateway.dlq import replay as replay_mod
from gateway.dlq.parts import ReplayContext, StageHandler, StageHandlers
from gateway.dlq.replay import STAGE_HANDLERS
from gateway.errors import LedgerUnavailable, UnknownMerchant
from tests.support.cli import GATEWAY, Result, invoke
from tests.support.deliveries import deliver
from tests.support.gateway import config, running_server
from tests.support.processes import clean_env
from tests.support.services import stream_messages, wait_until


def toml(doc: Mapping[str, Any], prefix: str = "") -> str:
    """A small TOML writer for test configs (tables, strings, numbers, lists)."""
    lines: list[str] = []
    tables: list[tuple[str, Any]] = []
    for key, value in doc.items():
        if isinstance(value, dict):
            tables.append((f"{prefix}{key}", value))
        else:
            lines.append(f"{key} = {json.dumps(value)}")
    for name, value in tables:
        lines.append(f"\n[{name}]")
        lines.append(toml(value, f"{name}."))
    return "\n".join(lines)


@pytest.fixture
def cfg(tmp_path: Path, database_url: str, nats_url: str) -> str:
    path = tmp_path / "gateway.toml"
    path.write_text(toml(config(database_url, nats_url)), encoding="utf-8")
    return str(path)


def on_a_terminal(*args: str, stderr: int) -> subprocess.CompletedProcess[str]:
    """`gateway ARGS` as a process whose stderr is `stderr` (a terminal: the point)."""
    return subprocess.run(
        [GATEWAY, *args],
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        timeout=120,
        env=clean_env(),
    )


async def arun(*args: str) -> Result:
    """The CLI (in this process), awaited without blocking the test's event loop."""
    return await asyncio.to_thread(invoke, *args)


def stand_in(monkeypatch: pytest.MonkeyPatch, handlers: StageHandlers) -> None:
    """Make `gateway dlq replay` in this process replay with the stage table `handlers`
    (the command reads `dlq.replay.STAGE_HANDLERS` when it runs)."""
    monkeypatch.setattr(replay_mod, "STAGE_HANDLERS", handlers)
    # `main` records the log level for `serve`'s workers; undone after the test.
    monkeypatch.setenv(LOG_LEVEL_ENV, os.environ.get(LOG_LEVEL_ENV, "INFO"))


def replay_in_process(*args: str) -> int:
    """`gateway dlq replay ARGS` through the CLI's entry point, in this process; its exit
    status (blocking: run it in a thread)."""
    return cli.main(["dlq", "replay", *args])


async def in_process(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """`replay_in_process`, awaited; (status, out, err)."""
    status = await asyncio.to_thread(replay_in_process, *args)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


async def park(
    conn: asyncpg.Connection,
    event_id: str,
    *,
    stage: str = "settlement",
    provider: str = "stripe",
    subject: str | None = None,
    attempts: int = 1,
    received_at: datetime | None = None,
    first_failed_at: datetime | None = None,
    error_class: str = "UNKNOWN_MERCHANT",
    payload: bytes = b'{"id": "x"}',
) -> int:
    """Insert an open dead letter the way the live path would; return its id."""
    row_id: int = await conn.fetchval(
        "INSERT INTO dlq_webhooks (stage, provider, event_id, subject, error_class,"
        " error_message, error_detail, payload, headers, attempts, received_at,"
        " first_failed_at, last_failed_at)"
        " VALUES ($1, $2, $3, $4, $5, $6, 'Traceback: boom', $7, '{\"x-k\": \"v\"}', $8,"
        " coalesce($9, now()), coalesce($10, now()), coalesce($10, now())) RETURNING id",
        stage,
        provider,
        event_id,
        subject,
        error_class,
        f"no ledger account for {event_id}",
        payload,
        attempts,
        received_at,
        first_failed_at,
    )
    return row_id


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(database_url)
    await conn.execute("CREATE TABLE replay_log (seq bigserial, dlq_id bigint, event_id text)")
    yield conn
    await conn.close()


@pytest.fixture
def handlers(monkeypatch: pytest.MonkeyPatch) -> StageHandlers:
    """The stage table with a `settlement` handler that logs each call to `replay_log` and
    fails `fail_*` events, standing in for the real one."""

    async def factory(ctx: ReplayContext) -> StageHandler:
        async def handle(row: DlqRow) -> None:
            async with ctx.pool.acquire() as conn:
                await conn.execute(
                    "INSERT INTO replay_log (dlq_id, event_id) VALUES ($1, $2)",
                    row.id,
                    row.event_id,
                )
            await asyncio.sleep(0.001)  # a real stage takes a moment; lets runs overlap
            if row.event_id.startswith("fail"):
                raise UnknownMerchant(f"still no ledger account for {row.event_id}")

        return handle

    table: StageHandlers = {**STAGE_HANDLERS, "settlement": factory}
    stand_in(monkeypatch, table)
    return table


def summary_counts(text: str) -> list[tuple[int, ...]]:
    return [
        tuple(map(int, m)) for m in re.findall(r"replayed (\d+), failed (\d+), skipped (\d+)", text)
    ]


def test_help_on_every_dlq_command() -> None:
    """`gateway dlq` and each of its commands explain themselves."""
    assert "replay" in invoke("dlq", "--help").stdout
    for command in ("list", "show", "replay", "resolve", "stats"):
        result = invoke("dlq", command, "--help")
        assert result.returncode == 0
        assert f"usage: gateway dlq {command}" in result.stdout


# --- inspecting -------------------------------------------------------------------------


async def test_list_shows_each_rows_severity_and_amount(cfg: str, db: asyncpg.Connection) -> None:
    """The amount the event would move, read from its body as the worker reads it, with
    its decimals and currency in the table and in minor units in JSON; the severity from
    the class (the ledger not answering is critical)."""
    body = orjson.dumps(
        {"id": "pay-7", "type": "payment.captured",
         "data": {"settlement_id": "pay-7", "merchant_id": "m_9", "amount_minor": 123456,
                  "currency": "EUR"}}
    )  # fmt: skip
    await db.execute(
        "INSERT INTO processed_webhooks (provider, event_id, event_type, subject, headers,"
        " body, body_sha256) VALUES ('service:billing', 'pay-7', 'payment.captured',"
        " 'events.billing.payment.captured', '{}', $1, sha256($1))",
        body,
    )
    paid = await park(db, "pay-7", provider="service:billing", payload=body)
    down = await park(db, "evt_down", error_class="LEDGER_UNAVAILABLE")
    listed = await arun("dlq", "list", "--config", cfg)
    assert listed.returncode == 0, listed.stderr
    rows = {int(line.split()[0]): line.split() for line in listed.stdout.splitlines()[1:]}
    assert rows[paid][1] == "error" and "1,234.56" in rows[paid] and "EUR" in rows[paid]
    assert rows[down][1] == "critical" and rows[down][6] == "-"  # no amount in its body
    docs = {d["id"]: d for d in orjson.loads((await arun("dlq", "list", "--json",
                                                         "--config", cfg)).stdout)}  # fmt: skip
    assert docs[paid]["amount"] == {"amount_minor": 123456, "currency": "EUR"}
    assert docs[paid]["severity"] == "error"
    assert docs[down]["amount"] is None and docs[down]["severity"] == "critical"


async def test_list_show_and_stats(cfg: str, db: asyncpg.Connection) -> None:
    """list shows no payload; show shows everything; stats adds up what is there."""
    now = await db.fetchval("SELECT now()")
    old = await park(db, "evt_old", first_failed_at=now - timedelta(hours=2))
    new = await park(
        db,
        "evt_new",
        stage="ingest",
        error_class="EVENT_TYPE_MISSING",
        payload=b'{"id":"evt_new","secret_note":"card 4242"}',
    )
    done = await park(db, "evt_done")
    await db.execute("UPDATE dlq_webhooks SET is_resolved = true WHERE id = $1", done)

    listed = await arun("dlq", "list", "--config", cfg)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].split() == [
        "ID",
        "SEVERITY",
        "STAGE",
        "PROVIDER",
        "EVENT",
        "ID",
        "ERROR",
        "CLASS",
        "AMOUNT",
        "ATTEMPTS",
        "AGE",
        "SOURCE",
    ]
    assert [int(line.split()[0]) for line in lines[1:]] == [old, new]  # oldest failure first
    assert "2h00m" in lines[1] or "2h01m" in lines[1]
    assert "4242" not in listed.stdout  # nothing from the payload in a list

    as_json = orjson.loads((await arun("dlq", "list", "--json", "--any", "--config", cfg)).stdout)
    assert {r["id"] for r in as_json} == {old, new, done}
    only_ingest = await arun("dlq", "list", "--stage", "ingest", "--json", "--config", cfg)
    assert [r["event_id"] for r in orjson.loads(only_ingest.stdout)] == ["evt_new"]
    recent = await arun("dlq", "list", "--since", "1h", "--json", "--config", cfg)
    assert [r["event_id"] for r in orjson.loads(recent.stdout)] == ["evt_new"]
    limited = await arun("dlq", "list", "--limit", "1", "--config", cfg)
    assert "showing 1 of 2 matching rows" in limited.stdout

    shown = await arun("dlq", "show", str(new), "--config", cfg)
    assert shown.returncode == 0, shown.stderr
    assert '"secret_note": "card 4242"' in shown.stdout  # pretty-printed JSON payload
    for expected in ("EVENT_TYPE_MISSING", "x-k: v", "Traceback: boom", "attempts       1"):
        assert expected in shown.stdout
    doc = orjson.loads((await arun("dlq", "show", str(new), "--json", "--config", cfg)).stdout)
    assert doc["payload"] == {"id": "evt_new", "secret_note": "card 4242"}
    assert doc["payload_format"] == "json" and doc["headers"] == {"x-k": "v"}

    stats = orjson.loads((await arun("dlq", "stats", "--json", "--config", cfg)).stdout)
    assert stats["unresolved"] == 2
    assert stats["added_in_window"] == 2  # evt_new and evt_done, resolved or not
    assert 7190 < stats["oldest_unresolved_age_s"] < 7300
    assert {
        (c["stage"], c["error_class"], c["unresolved"]) for c in stats["by_stage_error_class"]
    } == {
        ("settlement", "UNKNOWN_MERCHANT", 1),
        ("ingest", "EVENT_TYPE_MISSING", 1),
    }
    human = (await arun("dlq", "stats", "--config", cfg)).stdout
    assert "unresolved rows          2" in human and "oldest unresolved        2h0" in human


@pytest.mark.parametrize(
    ("args", "status", "message"),
    [
        (["show", "999999"], 1, "gateway dlq show: no dead-letter row with id 999999"),
        (["show", "abc"], 2, "gateway dlq show: error: ID: 'abc' is not a row id"),
        (["list", "--since", "yesterday"], 2, "--since: cannot read 'yesterday'"),
        (["list", "--until", "2026-11-30T10:00"], 2, "has no time zone"),
        (["list", "--resolved", "--unresolved"], 2, "exclude each other"),
        (["list", "--stage", "settle"], 2, "unknown stage 'settle'"),
        (["list", "--limit", "-1"], 2, "--limit: must be a whole number from 1 to 100000"),
        (["replay", "--id", "1", "--all"], 2, "--id and --all exclude each other"),
        (["replay"], 2, "say which rows"),
        (["replay", "--id", "999999"], 1, "no dead-letter row with id 999999"),
        (["replay", "--all", "--rate", "0"], 2, "argument --rate: must be a number from 0.001"),
        (["replay", "--all", "--rate", "fast"], 2, "argument --rate: must be a number from"),
        (["resolve", "999999", "--note", "x"], 1, "no dead-letter row with id 999999"),
        (["resolve", "1", "--note", "  "], 2, "--note must say what was done"),
        (["resolve", "1"], 2, "the following arguments are required: --note"),
    ],
)
async def test_bad_input_is_one_line_and_a_nonzero_exit(
    cfg: str, db: asyncpg.Connection, args: list[str], status: int, message: str
) -> None:
    """Unknown ids, malformed dates, conflicting flags: one clear line, no traceback."""
    result = await arun("dlq", *args, "--config", cfg)
    assert result.returncode == status
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert message in lines[0]
    assert result.stdout == ""


async def test_resolve_with_note(cfg: str, db: asyncpg.Connection) -> None:
    """A row resolved by hand keeps the note as its cause; resolving it again is refused."""
    row_id = await park(db, "evt_manual")
    result = await arun(
        "dlq",
        "resolve",
        str(row_id),
        "--note",
        "merchant onboarded; settled by hand",
        "--config",
        cfg,
    )
    assert result.returncode == 0, result.stderr
    assert (
        result.stdout.strip() == f"resolved {row_id} by hand: merchant onboarded; settled by hand"
    )
    row = await db.fetchrow("SELECT * FROM dlq_webhooks WHERE id = $1", row_id)
    assert row is not None
    assert row["is_resolved"] and row["resolution"] == "manual"
    assert row["resolution_note"] == "merchant onboarded; settled by hand"
    assert row["resolved_at"] is not None and row["resolved_by"]
    shown = await arun("dlq", "show", str(row_id), "--config", cfg)
    assert "manual at" in shown.stdout and "merchant onboarded; settled by hand" in shown.stdout
    again = await arun("dlq", "resolve", str(row_id), "--note", "again", "--config", cfg)
    assert again.returncode == 1
    assert "already resolved (manual at" in again.stderr
    assert await db.fetchval("SELECT resolution_note FROM dlq_webhooks WHERE id = $1", row_id) == (
        "merchant onboarded; settled by hand"
    )
    listed = orjson.loads(
        (await arun("dlq", "list", "--resolved", "--json", "--config", cfg)).stdout
    )
    assert [r["id"] for r in listed] == [row_id]


# --- replaying: the real ingest handler ------------------------------------------------


async def test_ingest_row_replayed_after_config_fix_reaches_the_stream_once(
    tmp_path: Path, database_url: str, nats_url: str, db: asyncpg.Connection
) -> None:
    """Parked for a missing type → config fixed → replay → one message, row resolved."""
    body = orjson.dumps({"event_id": "evt_fix_1", "type": "payment.succeeded", "data": {}})
    hopeless = orjson.dumps({"event_id": "evt_bad_1", "data": {}})
    async with running_server(config(database_url, nats_url)) as server:
        for event_id, payload in (("evt_fix_1", body), ("evt_bad_1", hopeless)):
            d = deliver("hmac", event_id, event_type=None, body=payload)  # no X-Event-Type
            response = await server.client.post(d.path, content=d.body, headers=d.headers)
            assert response.json() == {"status": "accepted", "event_id": event_id}
    parked = await db.fetch("SELECT id, event_id, error_class FROM dlq_webhooks ORDER BY id")
    assert [(r["event_id"], r["error_class"]) for r in parked] == [
        ("evt_fix_1", "EVENT_TYPE_MISSING"),
        ("evt_bad_1", "EVENT_TYPE_MISSING"),
    ]

    fixed = config(database_url, nats_url)
    fixed["providers"]["hmac"]["event_type_from"] = "json:type"  # the operator's fix
    cfg = tmp_path / "fixed.toml"
    cfg.write_text(toml(fixed), encoding="utf-8")
    result = await arun("dlq", "replay", "--all", "--stage", "ingest", "--config", str(cfg))
    assert result.returncode == 1, result.stderr  # evt_bad_1 is still invalid
    assert result.stdout.splitlines() == [
        f"failed   {parked[1]['id']} ingest hmac/evt_bad_1: EVENT_TYPE_MISSING: "
        "the event carries no event type",
        "replayed 1, failed 1, skipped 0",
    ]

    async def on_stream() -> list[tuple[str, dict[str, str], bytes]]:
        return [
            m for m in await stream_messages(nats_url) if m[1]["Nats-Msg-Id"] == "hmac:evt_fix_1"
        ]

    messages = await wait_until(on_stream)
    assert [(m[0], m[2]) for m in messages] == [("webhooks.hmac.payment.succeeded", body)]
    stored = await db.fetch("SELECT * FROM processed_webhooks WHERE event_id = 'evt_fix_1'")
    assert len(stored) == 1  # the idempotency gate's row, updated, never duplicated
    assert stored[0]["event_type"] == "payment.succeeded" and stored[0]["subject"]
    rows = {r["event_id"]: r for r in await db.fetch("SELECT * FROM dlq_webhooks")}
    assert rows["evt_fix_1"]["is_resolved"] and rows["evt_fix_1"]["resolution"] == "replayed"
    assert not rows["evt_bad_1"]["is_resolved"] and rows["evt_bad_1"]["attempts"] == 2

    # Replaying a row whose effect already happened is a harmless no-op.
    again = await arun("dlq", "replay", "--id", str(parked[0]["id"]), "--config", str(cfg))
    assert again.returncode == 0
    assert "skipped  " in again.stdout and "already resolved (replayed)" in again.stdout
    await db.execute("UPDATE dlq_webhooks SET is_resolved = false WHERE id = $1", parked[0]["id"])
    reopened = await arun("dlq", "replay", "--id", str(parked[0]["id"]), "--config", str(cfg))
    assert reopened.stdout.strip() == "replayed 1, failed 0, skipped 0"
    await asyncio.sleep(0.3)
    assert len(await on_stream()) == 1
    assert await db.fetchval("SELECT count(*) FROM processed_webhooks") == 2


# --- replaying: generic paths with a test handler ---------------------------------------


async def test_settlement_rows_replayed_to_success_and_failure(
    capsys: pytest.CaptureFixture[str], cfg: str, db: asyncpg.Connection, handlers: StageHandlers
) -> None:
    """Success resolves the row; failure counts an attempt and keeps the new error."""
    ok = await park(db, "evt_ok")
    bad = await park(db, "fail_1", error_class="RATE_UNAVAILABLE")
    status, out, _ = await in_process(capsys, "--all", "--config", cfg)
    assert status == 1
    assert out.splitlines() == [
        f"failed   {bad} settlement stripe/fail_1: "
        "UNKNOWN_MERCHANT: still no ledger account for fail_1",
        "replayed 1, failed 1, skipped 0",
    ]
    rows = {r["id"]: r for r in await db.fetch("SELECT * FROM dlq_webhooks")}
    assert rows[ok]["is_resolved"] and rows[ok]["resolution"] == "replayed"
    assert rows[ok]["resolved_at"] is not None
    assert not rows[bad]["is_resolved"] and rows[bad]["attempts"] == 2
    assert rows[bad]["error_class"] == "UNKNOWN_MERCHANT"
    assert rows[bad]["error_message"] == "still no ledger account for fail_1"
    assert rows[bad]["last_failed_at"] > rows[bad]["first_failed_at"]


async def test_stage_without_handler_fails_clearly_and_leaves_rows(
    cfg: str, db: asyncpg.Connection
) -> None:
    """No handler for a stage: a per-row failure, the row untouched, no crash."""
    row_id = await park(db, "evt_1", stage="export", error_class="PUBLISH_FAILED")
    result = await arun("dlq", "replay", "--all", "--config", cfg)
    assert result.returncode == 1
    assert (
        f"failed   {row_id} export stripe/evt_1: NO_HANDLER: no handler for stage export"
        in result.stdout
    )
    assert "Traceback" not in result.stderr
    row = await db.fetchrow("SELECT * FROM dlq_webhooks WHERE id = $1", row_id)
    assert row is not None
    assert (row["attempts"], row["error_class"], row["is_resolved"]) == (1, "PUBLISH_FAILED", False)


async def test_handler_that_cannot_be_built_stops_the_run_and_leaves_rows(
    capsys: pytest.CaptureFixture[str],
    cfg: str,
    db: asyncpg.Connection,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A stage whose clients cannot open is the run's failure (the command's error, which
    `gateway` prints as one line), not the row's: the row is left untouched."""

    async def factory(ctx: ReplayContext) -> StageHandler:
        raise LedgerUnavailable("ledger did not answer within 5 s")

    row_id = await park(db, "evt_1")
    stand_in(monkeypatch, {"settlement": factory})
    status, _, err = await in_process(capsys, "--all", "--config", cfg)
    assert status == 1
    assert "gateway: LedgerUnavailable: ledger did not answer within 5 s" in err
    assert "Traceback" not in err
    row = await db.fetchrow("SELECT * FROM dlq_webhooks WHERE id = $1", row_id)
    assert row is not None
    assert (row["attempts"], row["is_resolved"]) == (1, False)


async def test_attempts_cap_skips_unless_forced(
    capsys: pytest.CaptureFixture[str], cfg: str, db: asyncpg.Connection, handlers: StageHandlers
) -> None:
    """Rows at --max-attempts are skipped (and say so) unless --force."""
    capped = await park(db, "evt_capped", attempts=5)
    fresh = await park(db, "evt_fresh", attempts=4)
    status, out, _ = await in_process(capsys, "--all", "--config", cfg)
    assert status == 0
    assert (
        f"skipped  {capped} settlement stripe/evt_capped: 5 attempts reached --max-attempts 5"
        in out
    )
    assert out.splitlines()[-1] == "replayed 1, failed 0, skipped 1"
    assert [r["dlq_id"] for r in await db.fetch("SELECT dlq_id FROM replay_log")] == [fresh]
    status, out, _ = await in_process(capsys, "--all", "--force", "--config", cfg)
    assert out.splitlines()[-1] == "replayed 1, failed 0, skipped 0"
    assert await db.fetchval("SELECT is_resolved FROM dlq_webhooks WHERE id = $1", capped)


async def test_dry_run_changes_nothing(
    capsys: pytest.CaptureFixture[str], cfg: str, db: asyncpg.Connection, handlers: StageHandlers
) -> None:
    """--dry-run prints what would run and leaves every row as it was."""
    ids = [await park(db, f"evt_{i}") for i in range(3)]
    await park(db, "evt_capped", attempts=7)
    before = [dict(r) for r in await db.fetch("SELECT * FROM dlq_webhooks ORDER BY id")]
    status, out, _ = await in_process(capsys, "--all", "--dry-run", "--config", cfg)
    assert status == 0
    lines = out.splitlines()
    assert [int(line.split()[0]) for line in lines if line[:1].isdigit()] == ids
    assert lines[-1] == "dry run: would replay 3, skip 1, fail 0; nothing was changed"
    assert [dict(r) for r in await db.fetch("SELECT * FROM dlq_webhooks ORDER BY id")] == before
    assert await db.fetchval("SELECT count(*) FROM replay_log") == 0
    status, out, _ = await in_process(capsys, "--all", "--dry-run", "--json", "--config", cfg)
    doc = orjson.loads(out)
    assert (doc["dry_run"], doc["would_replay"], doc["skipped"]) == (True, 3, 1)


async def test_dry_run_says_how_each_event_arrived_as_list_does(
    capsys: pytest.CaptureFixture[str], cfg: str, db: asyncpg.Connection, handlers: StageHandlers
) -> None:
    """The dry run's table shows the same SOURCE as `dlq list`: backfill, live, or `-`
    for a dead letter with no event row."""
    sources = {}
    for event_id, source in (("evt_backfilled", "backfill"), ("evt_live", "live")):
        webhook_id = await db.fetchval(
            "INSERT INTO processed_webhooks (provider, event_id, event_type, subject, body,"
            " source) VALUES ('stripe', $1, 't', 'webhooks.stripe.t', '{}'::bytea, $2)"
            " RETURNING id",
            event_id,
            source,
        )
        row_id = await park(db, event_id)
        await db.execute(
            "UPDATE dlq_webhooks SET webhook_id = $1 WHERE id = $2", webhook_id, row_id
        )
        sources[row_id] = source
    sources[await park(db, "evt_no_row")] = "-"
    status, out, _ = await in_process(capsys, "--all", "--dry-run", "--config", cfg)
    assert status == 0
    shown = {
        int(line.split()[0]): line.split()[-1] for line in out.splitlines() if line[:1].isdigit()
    }
    assert shown == sources


async def test_replay_in_received_order_within_a_subject(
    capsys: pytest.CaptureFixture[str], cfg: str, db: asyncpg.Connection, handlers: StageHandlers
) -> None:
    """Rows run in their original received_at order, not in the order they were parked."""
    base = await db.fetchval("SELECT now() - interval '1 hour'")
    delays_s = [50, 10, 40, 20, 30]
    for i, delay_s in enumerate(delays_s):
        subject = "webhooks.stripe.a" if i % 2 else "webhooks.stripe.b"
        received = base + timedelta(seconds=delay_s)
        await park(db, f"evt_{delay_s}", subject=subject, received_at=received)
    status, out, _ = await in_process(capsys, "--all", "--config", cfg)
    assert status == 0, out
    order = [r["event_id"] for r in await db.fetch("SELECT event_id FROM replay_log ORDER BY seq")]
    assert order == ["evt_10", "evt_20", "evt_30", "evt_40", "evt_50"]


async def test_rate_limits_rows_per_second(
    capsys: pytest.CaptureFixture[str], cfg: str, db: asyncpg.Connection, handlers: StageHandlers
) -> None:
    """--rate 20 takes about 0.2 s for 5 rows (the first starts at once)."""
    for i in range(5):
        await park(db, f"evt_{i}")
    started = time.monotonic()
    status, out, _ = await in_process(capsys, "--all", "--rate", "20", "--config", cfg)
    assert status == 0 and "replayed 5" in out
    assert time.monotonic() - started >= 0.2


async def test_two_concurrent_replays_process_each_row_exactly_once(
    capsys: pytest.CaptureFixture[str], cfg: str, db: asyncpg.Connection, handlers: StageHandlers
) -> None:
    """Two operators replaying the same 1,000 rows at once: each row runs exactly once."""
    await db.executemany(
        "INSERT INTO dlq_webhooks (stage, provider, event_id, error_class, error_message, payload,"
        " received_at) VALUES ('settlement', 'stripe', $1, 'RATE_UNAVAILABLE', 'x', '\\x7b7d',"
        " now() - make_interval(secs => $2))",
        [(f"evt_{i}", 5000 - i) for i in range(1000)],
    )
    first, second = await asyncio.gather(
        asyncio.to_thread(replay_in_process, "--all", "--config", cfg),
        asyncio.to_thread(replay_in_process, "--all", "--config", cfg),
    )
    assert (first, second) == (0, 0)
    counts = summary_counts(capsys.readouterr().out)
    assert len(counts) == 2
    assert sum(c[0] for c in counts) == 1000 and all(c[1] == 0 for c in counts)
    assert all(c[0] > 0 for c in counts), counts  # both really took part
    per_row = await db.fetch("SELECT dlq_id, count(*) AS n FROM replay_log GROUP BY dlq_id")
    assert len(per_row) == 1000 and {r["n"] for r in per_row} == {1}
    assert await db.fetchval("SELECT count(*) FROM dlq_webhooks WHERE NOT is_resolved") == 0


async def test_two_concurrent_replays_of_failing_rows_attempt_each_once(
    capsys: pytest.CaptureFixture[str],
    cfg: str,
    db: asyncpg.Connection,
    handlers: StageHandlers,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Rows that fail are not tried again by an overlapping replay in the same moment.

    "The same moment": both runs have begun before either marks a failure. A run that
    begins after another has already marked a row tries that row again, as a replay
    started later should; without the barrier a busy machine starts the second thread
    late and the test measures the scheduler instead.
    """
    await db.executemany(
        "INSERT INTO dlq_webhooks (stage, provider, event_id, error_class, error_message, payload)"
        " VALUES ('settlement', 'stripe', $1, 'UNKNOWN_MERCHANT', 'x', '\\x7b7d')",
        [(f"fail_{i}",) for i in range(200)],
    )
    both_started = threading.Barrier(2, timeout=30)
    first_call = threading.local()

    async def factory(ctx: ReplayContext) -> StageHandler:
        inner = await handlers["settlement"](ctx)

        async def handle(row: DlqRow) -> None:
            if not getattr(first_call, "done", False):
                first_call.done = True
                both_started.wait()  # this run's own loop: blocking it is the point
            await inner(row)

        return handle

    stand_in(monkeypatch, {**handlers, "settlement": factory})
    results = await asyncio.gather(
        asyncio.to_thread(replay_in_process, "--all", "--config", cfg),
        asyncio.to_thread(replay_in_process, "--all", "--config", cfg),
    )
    assert list(results) == [1, 1]  # gather() gives a list; typeshed says tuple
    capsys.readouterr()
    assert await db.fetchval("SELECT count(*) FROM replay_log") == 200
    assert {r["attempts"] for r in await db.fetch("SELECT attempts FROM dlq_webhooks")} == {2}


def _read_pty(fd: int) -> str:
    chunks: list[bytes] = []
    while True:
        try:
            data = os.read(fd, 4096)
        except OSError:  # EIO: the other end closed
            break
        if not data:
            break
        chunks.append(data)
    return b"".join(chunks).decode()


async def test_progress_bar_on_a_terminal_only(cfg: str, db: asyncpg.Connection) -> None:
    """A TTY gets a progress bar on stderr; a pipe gets only the report."""
    for i in range(3):
        await park(
            db, f"evt_{i}", stage="ingest", provider="nobody", error_class="PAYLOAD_NOT_JSON"
        )
    piped = await arun("dlq", "replay", "--all", "--config", cfg)
    assert "replaying [" not in piped.stderr
    assert piped.stdout.splitlines()[-1] == "replayed 0, failed 3, skipped 0"
    assert "PROVIDER_NOT_CONFIGURED: provider 'nobody' is not configured" in piped.stdout

    master, slave = pty.openpty()
    try:
        proc = await asyncio.to_thread(
            on_a_terminal, "dlq", "replay", "--all", "--config", cfg, stderr=slave
        )
    finally:
        os.close(slave)
    terminal = _read_pty(master)
    os.close(master)
    assert proc.returncode == 1
    assert "replaying [" in terminal and "3/3" in terminal
