"""Replay jobs run by `gateway dlq run-jobs`'s runner against a real database: items run
in the plan's order through `gateway dlq replay`'s code, pause and cancel stop a job
between items, "retry" runs the failed items again, a killed runner's job is finished by
another with no row replayed twice, and a repeated idempotency key makes one job.

The stage table's `settlement` handler is replaced by one that records each row it is
given (and can be told to fail or to block), as in test_replay_order.py.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
import pytest

from gateway import cli
from gateway import settings as settings_mod
from gateway.adapters.postgres import connection, transaction
from gateway.adapters.postgres import replay_jobs as store
from gateway.cli.common import LOG_LEVEL_ENV
from gateway.compose import ops
from gateway.core.dlq_model import DlqRow
from gateway.core.replay_jobs import ItemState, JobAction, JobKind, JobState, NewJob
from gateway.dlq import jobs as jobs_mod
from gateway.dlq import replay as replay_mod
from gateway.dlq.parts import ReplayContext, StageHandler, StageHandlers
from gateway.dlq.replay import STAGE_HANDLERS
from gateway.errors import UnknownMerchant
from tests.support.config_file import with_urls, write_toml
from tests.support.services import free_port


@dataclass
class Handler:
    """The settlement stage as this test drives it."""

    calls: list[str] = field(default_factory=list)
    failing: set[str] = field(default_factory=set)
    block_on: str | None = None
    blocked: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    on_call: Callable[[str], object] | None = None

    async def __call__(self, row: DlqRow) -> None:
        if row.event_id == self.block_on:
            self.blocked.set()
            await self.release.wait()
        self.calls.append(row.event_id)
        if self.on_call is not None:
            await self.on_call(row.event_id)  # type: ignore[misc]
        if row.event_id in self.failing:
            raise UnknownMerchant(f"no merchant for {row.event_id}")


@pytest.fixture
def handler(monkeypatch: pytest.MonkeyPatch) -> Handler:
    h = Handler()

    async def factory(ctx: ReplayContext) -> StageHandler:
        return h

    table: StageHandlers = {**STAGE_HANDLERS, "settlement": factory}
    monkeypatch.setattr(replay_mod, "STAGE_HANDLERS", table)
    monkeypatch.setenv(LOG_LEVEL_ENV, os.environ.get(LOG_LEVEL_ENV, "INFO"))
    return h


@pytest.fixture
def cfg(tmp_path: Path, database_url: str) -> str:
    return str(
        write_toml(tmp_path / "gateway.toml", with_urls({"database": {"url": database_url}}))
    )


@pytest.fixture
def settings(cfg: str) -> settings_mod.Settings:
    return settings_mod.load(cfg)


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(database_url)
    yield conn
    await conn.close()


async def park(db: asyncpg.Connection, event_id: str) -> int:
    row_id: int = await db.fetchval(
        "INSERT INTO dlq_webhooks (stage, provider, event_id, error_class, error_message,"
        " payload, received_at) VALUES ('settlement', 'stripe', $1, 'UNKNOWN_MERCHANT', 'x',"
        " '\\x7b7d', now() - interval '1 hour') RETURNING id",
        event_id,
    )
    return row_id


async def new_job(
    settings: settings_mod.Settings, ids: list[int], key: str | None = None, **kw: object
) -> int:
    async with ops.database(settings) as pool, transaction(pool) as conn:
        job_id, _ = await store.create_job(
            conn,
            NewJob(
                JobKind.DLQ,
                "console:alice",
                {"ids": ids},
                tuple(ids),
                idempotency_key=key,
                **kw,  # type: ignore[arg-type]
            ),
        )
    return job_id


def options(**kw: object) -> jobs_mod.RunnerOptions:
    return jobs_mod.RunnerOptions(once=True, poll_s=0.05, heartbeat_s=0.1, **kw)  # type: ignore[arg-type]


async def run_once(settings: settings_mod.Settings, **kw: object) -> int:
    return await jobs_mod.run_jobs(settings, options(**kw))


async def job_state(db: asyncpg.Connection, job_id: int) -> str:
    state: str = await db.fetchval("SELECT state FROM replay_jobs WHERE id = $1", job_id)
    return state


async def items(db: asyncpg.Connection, job_id: int) -> list[tuple[str, str | None]]:
    rows = await db.fetch(
        "SELECT state, error_class FROM replay_job_items WHERE job_id = $1 ORDER BY position",
        job_id,
    )
    return [(r["state"], r["error_class"]) for r in rows]


async def test_a_job_replays_its_rows_in_plan_order_and_resolves_them(
    settings: settings_mod.Settings, db: asyncpg.Connection, handler: Handler
) -> None:
    ids = [await park(db, f"evt_{n}") for n in range(3)]
    plan_order = [ids[2], ids[0], ids[1]]
    job_id = await new_job(settings, plan_order)
    assert await run_once(settings) == 1
    assert handler.calls == ["evt_2", "evt_0", "evt_1"]
    assert await job_state(db, job_id) == "done"
    assert await items(db, job_id) == [("replayed", None)] * 3
    resolved = await db.fetch("SELECT resolution FROM dlq_webhooks WHERE is_resolved")
    assert [r["resolution"] for r in resolved] == ["replayed"] * 3


async def test_failed_items_fail_the_job_and_retry_runs_them_again(
    settings: settings_mod.Settings, db: asyncpg.Connection, handler: Handler
) -> None:
    ids = [await park(db, f"evt_{n}") for n in range(3)]
    handler.failing = {"evt_1"}
    job_id = await new_job(settings, ids)
    await run_once(settings)
    assert await job_state(db, job_id) == "failed"
    assert await items(db, job_id) == [
        ("replayed", None),
        ("failed", "UNKNOWN_MERCHANT"),
        ("replayed", None),
    ]
    error = await db.fetchval("SELECT error FROM replay_jobs WHERE id = $1", job_id)
    assert error == "1 of 3 items failed"
    handler.failing = set()  # the cause is fixed
    async with ops.database(settings) as pool, transaction(pool) as conn:
        job, applied = await store.apply_action(conn, job_id, JobAction.RETRY)
    assert applied and job is not None and job.state is JobState.PLANNED
    await run_once(settings)
    assert await job_state(db, job_id) == "done"
    assert await items(db, job_id) == [("replayed", None)] * 3
    assert handler.calls == ["evt_0", "evt_1", "evt_2", "evt_1"]  # only the failed one again


async def action(settings: settings_mod.Settings, job_id: int, act: JobAction) -> bool:
    async with ops.database(settings) as pool, transaction(pool) as conn:
        _, applied = await store.apply_action(conn, job_id, act)
    return applied


@pytest.mark.parametrize(
    ("act", "state"), [(JobAction.PAUSE, "paused"), (JobAction.CANCEL, "cancelled")]
)
async def test_pause_and_cancel_stop_a_running_job_between_items(
    settings: settings_mod.Settings,
    db: asyncpg.Connection,
    handler: Handler,
    act: JobAction,
    state: str,
) -> None:
    ids = [await park(db, f"evt_{n}") for n in range(4)]
    job_id = await new_job(settings, ids)

    async def stop_after_first(event_id: str) -> None:
        if event_id == "evt_0":
            assert await action(settings, job_id, act)

    handler.on_call = stop_after_first
    await run_once(settings)
    assert handler.calls == ["evt_0"]  # the item under way finished; no other began
    assert await job_state(db, job_id) == state
    assert [s for s, _ in await items(db, job_id)] == ["replayed", "pending", "pending", "pending"]
    if act is JobAction.PAUSE:
        handler.on_call = None
        assert await action(settings, job_id, JobAction.RESUME)
        assert await job_state(db, job_id) == "planned"
        await run_once(settings)
        assert handler.calls == ["evt_0", "evt_1", "evt_2", "evt_3"]
        assert await job_state(db, job_id) == "done"
    else:
        assert not await action(settings, job_id, JobAction.RESUME)  # cancelled for good
        assert await run_once(settings) == 0


async def test_a_killed_runners_job_is_finished_by_another_with_no_row_replayed_twice(
    settings: settings_mod.Settings, db: asyncpg.Connection, handler: Handler
) -> None:
    ids = [await park(db, f"evt_{n}") for n in range(4)]
    job_id = await new_job(settings, ids)
    handler.block_on = "evt_2"
    first = asyncio.create_task(
        jobs_mod.run_jobs(settings, jobs_mod.RunnerOptions(poll_s=0.05, heartbeat_s=0.1))
    )
    await asyncio.wait_for(handler.blocked.wait(), 10)
    # A second runner now finds nothing to take: the job's heartbeat is fresh.
    assert await run_once(settings, stale_after_s=5.0) == 0
    first.cancel()  # killed mid-item: its transaction rolls back, the row stays open
    with pytest.raises(asyncio.CancelledError):
        await first
    assert await job_state(db, job_id) == "running"
    handler.block_on = None
    await asyncio.sleep(0.3)
    assert await run_once(settings, stale_after_s=0.2) == 1
    assert await job_state(db, job_id) == "done"
    assert handler.calls == ["evt_0", "evt_1", "evt_2", "evt_3"]
    assert await items(db, job_id) == [("replayed", None)] * 4


async def test_an_item_replayed_but_not_recorded_is_skipped_on_the_rerun(
    settings: settings_mod.Settings, db: asyncpg.Connection, handler: Handler
) -> None:
    """A runner killed between the row's commit and the item's record: the next runner's
    replay re-checks the row, finds it resolved, and does not run it again."""
    ids = [await park(db, f"evt_{n}") for n in range(2)]
    job_id = await new_job(settings, ids)
    await db.execute(
        "UPDATE dlq_webhooks SET is_resolved = true, resolved_at = now(),"
        " resolution = 'replayed' WHERE id = $1",
        ids[0],
    )
    await db.execute(
        "UPDATE replay_jobs SET state = 'running', runner = 'gone:1',"
        " heartbeat_at = now() - interval '1 minute' WHERE id = $1",
        job_id,
    )
    assert await run_once(settings) == 1
    assert handler.calls == ["evt_1"]
    assert [s for s, _ in await items(db, job_id)] == ["skipped", "replayed"]
    message = await db.fetchval(
        "SELECT message FROM replay_job_items WHERE job_id = $1 AND position = 1", job_id
    )
    assert message == "already resolved (replayed)"


async def test_the_same_idempotency_key_gives_the_same_job(
    settings: settings_mod.Settings, db: asyncpg.Connection
) -> None:
    ids = [await park(db, "evt_0")]
    first = await new_job(settings, ids, key="k-1")
    assert await new_job(settings, ids, key="k-1") == first
    assert await new_job(settings, ids, key="k-2") != first
    assert await db.fetchval("SELECT count(*) FROM replay_jobs") == 2
    assert await db.fetchval("SELECT count(*) FROM replay_job_items") == 2


async def test_a_run_that_cannot_build_its_handler_fails_the_job_with_the_reason(
    settings: settings_mod.Settings, db: asyncpg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(ctx: ReplayContext) -> StageHandler:
        raise RuntimeError("ledger is down")

    monkeypatch.setattr(replay_mod, "STAGE_HANDLERS", {**STAGE_HANDLERS, "settlement": broken})
    ids = [await park(db, f"evt_{n}") for n in range(2)]
    job_id = await new_job(settings, ids)
    await run_once(settings)
    row = await db.fetchrow("SELECT state, error FROM replay_jobs WHERE id = $1", job_id)
    assert row is not None
    assert (row["state"], row["error"]) == ("failed", "RuntimeError: ledger is down")
    assert [s for s, _ in await items(db, job_id)] == ["pending", "pending"]
    assert not await db.fetchval("SELECT bool_or(is_resolved) FROM dlq_webhooks")


async def test_run_jobs_once_from_the_command_line(
    cfg: str, db: asyncpg.Connection, handler: Handler, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = [await park(db, f"evt_{n}") for n in range(2)]
    settings = settings_mod.load(cfg)
    job_id = await new_job(settings, ids)
    status = await asyncio.to_thread(cli.main, ["dlq", "run-jobs", "--once", "--config", cfg])
    assert (status, capsys.readouterr().out) == (0, "ran 1 job(s)\n")
    assert await job_state(db, job_id) == "done"
    async with ops.database(settings) as pool, connection(pool) as conn:
        counts = (await store.progress(conn, [job_id]))[job_id]
    assert counts.replayed == 2 and counts.pending == 0
    assert [s for s, _ in await items(db, job_id)] == [ItemState.REPLAYED.value] * 2


async def test_a_pause_during_a_slow_rates_wait_takes_effect_within_a_heartbeat(
    settings: settings_mod.Settings, db: asyncpg.Connection, handler: Handler
) -> None:
    """At 0.2 rows/s the second row waits 5 s; a pause 0.3 s into it stops the run then."""
    ids = [await park(db, f"evt_{n}") for n in range(2)]
    job_id = await new_job(settings, ids, rate_per_s=0.2)
    run = asyncio.create_task(run_once(settings))
    await asyncio.wait_for(_until(lambda: bool(handler.calls)), 10)
    await asyncio.sleep(0.3)
    assert await action(settings, job_id, JobAction.PAUSE)
    await asyncio.wait_for(run, 2)  # well before the 5 s wait would have ended
    assert handler.calls == ["evt_0"]
    assert await job_state(db, job_id) == "paused"


async def _until(predicate: Callable[[], bool]) -> None:
    while not predicate():
        await asyncio.sleep(0.02)


async def test_an_events_job_stops_when_nats_is_away_and_keeps_its_items_pending(
    tmp_path: Path, database_url: str, db: asyncpg.Connection
) -> None:
    """The first publish fails: the job fails with the reason, its items stay pending
    for "retry" to continue once NATS is back."""
    doc = with_urls(
        {
            "database": {"url": database_url},
            "nats": {"url": f"nats://127.0.0.1:{free_port()}", "request_timeout_s": 1},
        }
    )
    settings = settings_mod.load(str(write_toml(tmp_path / "nats-away.toml", doc)))
    ids = [
        await db.fetchval(
            "INSERT INTO processed_webhooks (provider, event_id, event_type, subject, body)"
            " VALUES ('stripe', $1, 'invoice.paid', 'webhooks.stripe.invoice.paid', '\\x7b7d')"
            " RETURNING id",
            f"evt_{n}",
        )
        for n in range(2)
    ]
    async with ops.database(settings) as pool, transaction(pool) as conn:
        job_id, _ = await store.create_job(
            conn, NewJob(JobKind.EVENTS, "console:alice", {"ids": ids}, tuple(ids))
        )
    assert await run_once(settings) == 1
    row = await db.fetchrow("SELECT state, error FROM replay_jobs WHERE id = $1", job_id)
    assert row is not None and row["state"] == "failed"
    assert row["error"].startswith(f"stopped at event {ids[0]}: NATS is not reachable")
    assert [s for s, _ in await items(db, job_id)] == ["pending", "pending"]
