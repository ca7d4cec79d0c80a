"""`gateway dlq run-jobs` as a process re-drives dead letters by itself (finding #13):
`publish` rows parked as PUBLISH_ATTEMPTS_EXHAUSTED are handed back to the outbox once
NATS answers, each audited with `via = auto`, with no job planned; with `--once` (a
batch of the jobs runnable now) it re-drives nothing."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest

from gateway.cli.common import LOG_LEVEL_ENV
from tests.support.config_file import write_toml
from tests.support.services import wait_until

ROWS = 3


@pytest.fixture
def cfg(tmp_path: Path, database_url: str, nats_url: str) -> str:
    doc: dict[str, dict[str, object]] = {
        "database": {"url": database_url},
        "nats": {"url": nats_url},
        "dlq": {"auto_replay_interval_s": 0.2},
    }
    return str(write_toml(tmp_path / "gateway.toml", doc))


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(database_url)
    yield conn
    await conn.close()


async def park_publish_rows(db: asyncpg.Connection) -> list[int]:
    ids = []
    for n in range(ROWS):
        await db.execute(
            "INSERT INTO processed_webhooks (provider, event_id, event_type, subject, body,"
            " publish_parked_at) VALUES ('stripe', $1, 'invoice.paid',"
            " 'webhooks.stripe.invoice_paid', '\\x7b7d', now())",
            f"evt_{n}",
        )
        ids.append(
            await db.fetchval(
                "INSERT INTO dlq_webhooks (stage, provider, event_id, error_class,"
                " error_message, payload, attempts) VALUES ('publish', 'stripe', $1,"
                " 'PUBLISH_ATTEMPTS_EXHAUSTED', 'x', '\\x7b7d', 5) RETURNING id",
                f"evt_{n}",
            )
        )
    return ids


def run_jobs(cfg: str, *flags: str) -> subprocess.Popen[str]:
    env = {**os.environ, LOG_LEVEL_ENV: "INFO"}
    return subprocess.Popen(
        [sys.executable, "-m", "gateway", "dlq", "run-jobs", "--config", cfg, *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


async def test_run_jobs_re_drives_parked_publish_rows_once_nats_answers(
    cfg: str, db: asyncpg.Connection
) -> None:
    ids = await park_publish_rows(db)
    proc = run_jobs(cfg, "--poll-s", "0.1")
    try:

        async def resolved() -> bool:
            n = await db.fetchval("SELECT count(*) FROM dlq_webhooks WHERE is_resolved")
            return bool(n == ROWS)

        await wait_until(resolved, timeout_s=30)
        proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.to_thread(proc.communicate, timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == 0, err[-2000:]
    rows = await db.fetch(
        "SELECT id, resolution, auto_replays FROM dlq_webhooks ORDER BY id",
    )
    assert [(r["id"], r["resolution"], r["auto_replays"]) for r in rows] == [
        (i, "replayed", 1) for i in ids
    ]
    # Handed back to the outbox: the relay publishes them on its next sweep.
    assert (
        await db.fetchval("SELECT count(*) FROM processed_webhooks WHERE publish_parked_at IS NULL")
        == ROWS
    )
    trail = await db.fetch(
        "SELECT actor, via, action, target, outcome FROM console_audit ORDER BY id"
    )
    assert [(r["via"], r["action"], r["target"], r["outcome"]) for r in trail] == [
        ("auto", "dlq.replay", f"dlq:{i}", "ok") for i in ids
    ]
    assert {r["actor"] for r in trail} == {"gateway:auto-replay"}


async def test_once_runs_jobs_only(cfg: str, db: asyncpg.Connection) -> None:
    """`--once` is a batch of the planned jobs: the re-drive is the long-running
    process's, so the parked rows stay as they are."""
    await park_publish_rows(db)
    proc = run_jobs(cfg, "--once")
    out, err = await asyncio.to_thread(proc.communicate, timeout=60)
    assert proc.returncode == 0, err[-2000:]
    assert "ran 0 job(s)" in out
    assert await db.fetchval("SELECT count(*) FROM dlq_webhooks WHERE is_resolved") == 0
