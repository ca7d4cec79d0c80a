"""`gateway dlq run-jobs` as a process: SIGTERM stops it cleanly (exit 0, its job left
for the next runner), SIGKILL mid-job leaves a job that the next runner takes once the
heartbeat is stale and finishes, each row replayed once.

The rows are `publish` dead letters, whose handler needs only the database: it hands
the event back to the outbox (`processed_webhooks.publish_parked_at` cleared)."""

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
from tests.support.config_file import with_urls, write_toml
from tests.support.services import wait_until

ROWS = 6


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


async def paced_job(db: asyncpg.Connection, rate_per_s: float) -> int:
    """ROWS parked publish events and a job replaying them at `rate_per_s`."""
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
                " error_message, payload) VALUES ('publish', 'stripe', $1,"
                " 'PUBLISH_ATTEMPTS_EXHAUSTED', 'x', '\\x7b7d') RETURNING id",
                f"evt_{n}",
            )
        )
    job_id: int = await db.fetchval(
        "INSERT INTO replay_jobs (kind, created_by, request, rate_per_s, total)"
        " VALUES ('dlq', 'console:alice', '{}', $1, $2) RETURNING id",
        rate_per_s,
        ROWS,
    )
    await db.execute(
        "INSERT INTO replay_job_items (job_id, position, dlq_id)"
        " SELECT $1, ord, id FROM unnest($2::bigint[]) WITH ORDINALITY AS t(id, ord)",
        job_id,
        ids,
    )
    return job_id


def runner(cfg: str, *flags: str) -> subprocess.Popen[str]:
    env = {**os.environ, LOG_LEVEL_ENV: "INFO"}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gateway",
            "dlq",
            "run-jobs",
            "--config",
            cfg,
            "--poll-s",
            "0.1",
            *flags,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


async def replayed(db: asyncpg.Connection, job_id: int) -> int:
    n: int = await db.fetchval(
        "SELECT count(*) FROM replay_job_items WHERE job_id = $1 AND state <> 'pending'", job_id
    )
    return n


async def test_sigterm_stops_the_runner_cleanly_and_its_job_waits_for_the_next(
    cfg: str, db: asyncpg.Connection
) -> None:
    job_id = await paced_job(db, rate_per_s=2.0)
    proc = runner(cfg)
    try:
        await wait_until(lambda: _at_least(db, job_id, 1), timeout_s=20)
        proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.to_thread(proc.communicate, timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == 0, err[-2000:]
    assert '"replay job claimed"' in err or "replay job claimed" in err
    done = await replayed(db, job_id)
    assert 1 <= done < ROWS  # stopped part-way, between rows
    assert await db.fetchval("SELECT state FROM replay_jobs WHERE id = $1", job_id) == "running"


async def _at_least(db: asyncpg.Connection, job_id: int, n: int) -> bool:
    return await replayed(db, job_id) >= n


async def test_a_runner_killed_mid_job_leaves_it_to_the_next_with_each_row_replayed_once(
    cfg: str, db: asyncpg.Connection
) -> None:
    job_id = await paced_job(db, rate_per_s=4.0)
    proc = runner(cfg)
    try:
        await wait_until(lambda: _at_least(db, job_id, 2), timeout_s=20)
        proc.send_signal(signal.SIGKILL)
        await asyncio.to_thread(proc.wait, timeout=10)
    finally:
        proc.kill()
    done_before = await replayed(db, job_id)
    assert done_before < ROWS
    # A second runner leaves it while the dead one's heartbeat is fresh ...
    second = runner(cfg, "--once")
    out, err = await asyncio.to_thread(second.communicate, timeout=30)
    assert (second.returncode, out) == (0, "ran 0 job(s)\n"), err[-2000:]
    # ... and takes it once the heartbeat is older than the stale limit (30 s; aged here).
    await db.execute(
        "UPDATE replay_jobs SET heartbeat_at = heartbeat_at - interval '1 minute' WHERE id = $1",
        job_id,
    )
    third = runner(cfg, "--once")
    out, err = await asyncio.to_thread(third.communicate, timeout=30)
    assert (third.returncode, out) == (0, "ran 1 job(s)\n"), err[-2000:]
    assert await db.fetchval("SELECT state FROM replay_jobs WHERE id = $1", job_id) == "done"
    # Every row resolved once: each dead letter resolved by the replay, none with a
    # second attempt, and every item recorded (a row the killed runner had committed
    # but not recorded is skipped as already resolved, never run again).
    rows = await db.fetch("SELECT is_resolved, attempts FROM dlq_webhooks")
    assert [(r["is_resolved"], r["attempts"]) for r in rows] == [(True, 1)] * ROWS
    states = await db.fetch(
        "SELECT state, message FROM replay_job_items WHERE job_id = $1 ORDER BY position", job_id
    )
    for r in states:
        assert r["state"] == "replayed" or (r["state"], r["message"]) == (
            "skipped",
            "already resolved (replayed)",
        )
    parked = await db.fetchval(
        "SELECT count(*) FROM processed_webhooks WHERE publish_parked_at IS NOT NULL"
    )
    assert parked == 0
