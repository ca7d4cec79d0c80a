"""Replay jobs run by `gateway dlq run-jobs`'s runner against a real database: items run
in the plan's order through `gateway dlq replay`'s code, pause and cancel stop a job
between items, "retry" runs the failed items again, a killed runner's job is finished by
another with no row replayed twice, a runner taking over a job waits for the item the
one before it still runs, an error replaying one row fails only its item, an error of a
job fails that job and not the runner, and a repeated idempotency key makes one job.

The stage table's `settlement` handler is replaced by one that records each row it is
given (and can be told to fail or to block), as in test_replay_order.py.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
import pytest

from gateway import cli
from gateway import settings as settings_mod
from gateway.adapters.postgres import Conn, connection, transaction
from gateway.adapters.postgres import replay_jobs as store
from gateway.adapters.postgres.dead_letters import rows as dead_letters
from gateway.cli.common import LOG_LEVEL_ENV
from gateway.core.dlq.model import DlqRow
from gateway.core.replay.jobs import ItemState, JobAction, JobKind, JobState, NewJob
from gateway.dlq import jobs as jobs_mod
from gateway.dlq import replay as replay_mod
from gateway.dlq.parts import ReplayContext, StageHandler, StageHandlers
from gateway.dlq.replay import STAGE_HANDLERS
from gateway.errors import DatabaseError, UnknownMerchant
from gateway.wiring import jobs as wiring_jobs
from gateway.wiring import ops
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
    return await wiring_jobs.run_jobs(settings, options(**kw))


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
        wiring_jobs.run_jobs(settings, jobs_mod.RunnerOptions(poll_s=0.05, heartbeat_s=0.1))
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
    await asyncio.wait_for(run, 30)  # a hang guard only
    assert handler.calls == ["evt_0"]  # the second row never began
    assert await job_state(db, job_id) == "paused"
    assert [s for s, _ in await items(db, job_id)] == ["replayed", "pending"]


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


async def test_a_runner_taking_over_waits_for_the_item_the_one_before_still_runs(
    settings: settings_mod.Settings,
    db: asyncpg.Connection,
    handler: Handler,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Runner A is inside the second row when the job is paused and resumed; runner B
    takes the job and must neither record that item (as skipped) nor go on to the third
    row before A's outcome is in: A's failure is the item's, and retry finds it."""
    caplog.set_level(logging.INFO, logger=jobs_mod.__name__)
    ids = [await park(db, f"evt_{n}") for n in range(3)]
    job_id = await new_job(settings, ids)
    handler.block_on = "evt_1"
    handler.failing = {"evt_1"}
    a = asyncio.create_task(run_once(settings, name="runner-a"))
    await asyncio.wait_for(handler.blocked.wait(), 30)
    assert await action(settings, job_id, JobAction.PAUSE)
    assert await action(settings, job_id, JobAction.RESUME)
    b = asyncio.create_task(run_once(settings, name="runner-b"))

    def b_waits() -> bool:
        return any("another runner is running" in r.getMessage() for r in caplog.records)

    await asyncio.wait_for(_until(lambda: b.done() or b_waits()), 30)
    assert not b.done()  # B waits for the item A runs, rather than passing over it
    assert await db.fetchval("SELECT runner FROM replay_jobs WHERE id = $1", job_id) == "runner-b"
    assert [s for s, _ in await items(db, job_id)] == ["replayed", "pending", "pending"]
    handler.release.set()
    assert await asyncio.wait_for(b, 30) == 1
    await asyncio.wait_for(a, 30)
    assert handler.calls == ["evt_0", "evt_1", "evt_2"]  # each once, in order
    assert await items(db, job_id) == [
        ("replayed", None),
        ("failed", "UNKNOWN_MERCHANT"),
        ("replayed", None),
    ]
    row = await db.fetchrow("SELECT state, error FROM replay_jobs WHERE id = $1", job_id)
    assert row is not None and (row["state"], row["error"]) == ("failed", "1 of 3 items failed")
    dead = await db.fetchrow("SELECT is_resolved, attempts FROM dlq_webhooks WHERE id = $1", ids[1])
    assert dead is not None and (dead["is_resolved"], dead["attempts"]) == (False, 2)  # one more
    handler.failing = set()
    assert await action(settings, job_id, JobAction.RETRY)
    await run_once(settings)
    assert await job_state(db, job_id) == "done"
    assert handler.calls == ["evt_0", "evt_1", "evt_2", "evt_1"]


async def test_an_item_whose_row_another_replay_holds_stays_pending_until_it_is_free(
    settings: settings_mod.Settings,
    database_url: str,
    db: asyncpg.Connection,
    handler: Handler,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """`gateway dlq replay` (here: a transaction holding the row's lock) has the first
    row: the job waits for it rather than passing it over as skipped."""
    caplog.set_level(logging.INFO, logger=jobs_mod.__name__)
    ids = [await park(db, f"evt_{n}") for n in range(2)]
    job_id = await new_job(settings, ids)
    holder = await asyncpg.connect(database_url)
    try:
        tx = holder.transaction()
        await tx.start()
        await holder.execute("SELECT 1 FROM dlq_webhooks WHERE id = $1 FOR UPDATE", ids[0])
        run = asyncio.create_task(run_once(settings))

        def waits() -> bool:
            return any("another replay holds" in r.getMessage() for r in caplog.records)

        await asyncio.wait_for(_until(lambda: run.done() or waits()), 30)
        assert not run.done() and handler.calls == []
        assert [s for s, _ in await items(db, job_id)] == ["pending", "pending"]
        await tx.rollback()
    finally:
        await holder.close()
    assert await asyncio.wait_for(run, 30) == 1
    assert handler.calls == ["evt_0", "evt_1"]
    assert await items(db, job_id) == [("replayed", None)] * 2
    assert await job_state(db, job_id) == "done"


async def test_an_error_recording_one_rows_outcome_fails_its_item_and_the_job_goes_on(
    settings: settings_mod.Settings,
    db: asyncpg.Connection,
    handler: Handler,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ids = [await park(db, f"evt_{n}") for n in range(3)]
    job_id = await new_job(settings, ids)
    mark_replayed = dead_letters.mark_replayed

    async def refusing(conn: Conn, row_id: int) -> None:
        if row_id == ids[1]:
            raise DatabaseError("database error 22021: CharacterNotInRepertoireError", "22021")
        await mark_replayed(conn, row_id)

    monkeypatch.setattr(dead_letters, "mark_replayed", refusing)
    assert await run_once(settings) == 1
    assert await items(db, job_id) == [
        ("replayed", None),
        ("failed", "DATABASE_ERROR"),
        ("replayed", None),
    ]
    row = await db.fetchrow("SELECT state, error FROM replay_jobs WHERE id = $1", job_id)
    assert row is not None and (row["state"], row["error"]) == ("failed", "1 of 3 items failed")
    assert not await db.fetchval("SELECT is_resolved FROM dlq_webhooks WHERE id = $1", ids[1])
    monkeypatch.setattr(dead_letters, "mark_replayed", mark_replayed)
    assert await action(settings, job_id, JobAction.RETRY)
    await run_once(settings)
    assert await job_state(db, job_id) == "done"
    assert handler.calls == ["evt_0", "evt_1", "evt_2", "evt_1"]


async def test_a_database_error_of_one_job_fails_it_and_the_runner_runs_the_next(
    settings: settings_mod.Settings,
    db: asyncpg.Connection,
    handler: Handler,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first = await new_job(settings, [await park(db, "evt_0")])
    second = await new_job(settings, [await park(db, "evt_1")])
    record_item = store.record_item

    async def refusing(conn: object, job_id: int, *args: object) -> bool:
        if job_id == first:
            raise DatabaseError("database error 23514: CheckViolationError", "23514")
        return await record_item(conn, job_id, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(store, "record_item", refusing)
    assert await run_once(settings) == 2
    row = await db.fetchrow("SELECT state, error FROM replay_jobs WHERE id = $1", first)
    assert row is not None
    assert (row["state"], row["error"]) == (
        "failed",
        "DatabaseError: database error 23514: CheckViolationError",
    )
    assert await job_state(db, second) == "done"
    assert await items(db, second) == [("replayed", None)]
