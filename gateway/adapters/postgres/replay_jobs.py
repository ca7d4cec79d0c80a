"""The SQL of replay jobs (`replay_jobs`, `replay_job_items`): created by the console,
claimed and run by `gateway dlq run-jobs`; and the planner's read of the dead letters a
job of a filter would replay (`plan_rows`).

Every state change is a compare-and-set on the state `core.replay.jobs` allowed it from,
so an operator's pause and a runner's finish cannot both land. Times are the database's
clock (`clock_timestamp()`): heartbeats from runners on several hosts are compared with
one clock. Statements that change a job take the caller's connection, so the console
writes its audit row in the same transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import asyncpg
import orjson

from gateway.adapters.postgres import Conn, translate_errors
from gateway.adapters.postgres.dead_letters.pages import bounded
from gateway.adapters.postgres.dead_letters.rows import _LIST, _filtered, replay_order
from gateway.core.dlq.filters import DlqFilter
from gateway.core.dlq.model import RowBrief
from gateway.core.failures.excerpt import capped
from gateway.core.replay.jobs import (
    TRANSITIONS,
    ItemState,
    JobAction,
    JobItem,
    JobKind,
    JobState,
    NewJob,
    Progress,
    ReplayJob,
)

_JOB_COLUMNS = """id, kind, state, created_by, created_at, idempotency_key,
       request::text AS request, rate_per_s, max_attempts, ordered, total, runner,
       heartbeat_at, started_at, finished_at, error"""
_ITEM_COLUMNS = "job_id, position, dlq_id, webhook_id, state, error_class, message, done_at"
# A runnable job, as `core.replay.jobs.may_take` says: planned, or running under a runner
# whose heartbeat is older than $2 seconds.
_CLAIM = """UPDATE replay_jobs SET state = 'running', runner = $1,
       heartbeat_at = clock_timestamp(), started_at = coalesce(started_at, clock_timestamp())
WHERE id = (SELECT id FROM replay_jobs
            WHERE state = 'planned'
               OR (state = 'running' AND (heartbeat_at IS NULL
                   OR heartbeat_at < clock_timestamp() - make_interval(secs => $2)))
            ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)"""
# $2 the new state, $3 the states it may come from. A cancel is finished now; a job
# planned again (resumed, retried) has no end and no error yet.
_TRANSITION = """UPDATE replay_jobs SET state = $2,
       finished_at = CASE WHEN $2 = 'cancelled' THEN clock_timestamp() END,
       error = CASE WHEN $2 = 'planned' THEN NULL ELSE error END
WHERE id = $1 AND state = ANY($3::text[])"""


def _job(r: asyncpg.Record) -> ReplayJob:
    values = dict(r)
    values["kind"] = JobKind(values["kind"])
    values["state"] = JobState(values["state"])
    values["request"] = orjson.loads(values["request"])
    return ReplayJob(**values)


def _item(r: asyncpg.Record) -> JobItem:
    values = dict(r)
    values["state"] = ItemState(values["state"])
    return JobItem(**values)


async def create_job(conn: Conn, new: NewJob) -> tuple[int, bool]:
    """Create the job and its items (the plan's rows, in replay order); (id, created).

    Run it inside the caller's transaction. A repeat of (created_by, idempotency_key)
    creates nothing and returns the first job's id with created False: a double submit
    of the planner's form, or an API client's retry, is one job.
    """
    column = "dlq_id" if new.kind is JobKind.DLQ else "webhook_id"
    with translate_errors():
        job_id = await conn.fetchval(
            "INSERT INTO replay_jobs (kind, created_by, idempotency_key, request, rate_per_s,"
            " max_attempts, ordered, total) VALUES ($1, $2, $3, $4::jsonb, $5, $6, $7, $8)"
            " ON CONFLICT (created_by, idempotency_key) WHERE idempotency_key IS NOT NULL"
            " DO NOTHING RETURNING id",
            new.kind.value,
            new.created_by,
            new.idempotency_key,
            orjson.dumps(dict(new.request)).decode(),
            new.rate_per_s,
            new.max_attempts,
            new.ordered,
            len(new.row_ids),
        )
        if job_id is None:  # the key was used: the job it made (committed, or waited for)
            existing = await conn.fetchval(
                "SELECT id FROM replay_jobs WHERE created_by = $1 AND idempotency_key = $2",
                new.created_by,
                new.idempotency_key,
            )
            return int(existing), False
        # The column name is one of two fixed strings, never input.
        await conn.execute(
            " ".join(
                [
                    "INSERT INTO replay_job_items (job_id, position,",
                    column,
                    ") SELECT $1, ord::integer, row_id",
                    "FROM unnest($2::bigint[]) WITH ORDINALITY AS t(row_id, ord)",
                ]
            ),
            job_id,
            list(new.row_ids),
        )
    return int(job_id), True


async def claim_job(conn: Conn, runner: str, stale_after_s: float) -> ReplayJob | None:
    """Take the oldest runnable job for `runner`: planned, or running under a runner whose
    heartbeat is older than `stale_after_s` (`core.replay.jobs.may_take`); None if none.

    SKIP LOCKED: two runners claiming at once take two different jobs.
    """
    with translate_errors():
        record = await conn.fetchrow(
            " ".join([_CLAIM, "RETURNING", _JOB_COLUMNS]),
            runner,
            stale_after_s,
        )
    return None if record is None else _job(record)


async def heartbeat(conn: Conn, job_id: int, runner: str) -> bool:
    """Renew `runner`'s hold on the job; False when it is no longer the runner's to run
    (paused, cancelled, or taken by another runner after a stall)."""
    with translate_errors():
        found = await conn.fetchval(
            "UPDATE replay_jobs SET heartbeat_at = clock_timestamp()"
            " WHERE id = $1 AND runner = $2 AND state = 'running' RETURNING id",
            job_id,
            runner,
        )
    return found is not None


async def runs(conn: Conn, job_id: int, runner: str) -> bool:
    """Whether the job is running under `runner` now (a read: it takes no lock on the
    job, so an item's transaction never holds up a pause or a heartbeat)."""
    with translate_errors():
        found = await conn.fetchval(
            "SELECT id FROM replay_jobs WHERE id = $1 AND runner = $2 AND state = 'running'",
            job_id,
            runner,
        )
    return found is not None


async def take_next(conn: Conn, job_id: int) -> JobItem | None:
    """Lock the job's first pending item, in plan order, for the caller's transaction;
    None when another transaction holds it (a runner still running it) or none is left.

    Only the first: a runner never passes over an item another may still be running, so
    a job's items run one at a time, in order, whichever runners hold it in turn. Run it
    inside the transaction that replays the item and records its outcome (`record_item`):
    the lock ends when the outcome is recorded, or with the runner's connection.
    """
    with translate_errors():
        record = await conn.fetchrow(
            " ".join(
                [
                    "SELECT",
                    _ITEM_COLUMNS,
                    "FROM replay_job_items WHERE job_id = $1 AND state = 'pending'",
                    "AND position = (SELECT min(position) FROM replay_job_items",
                    "WHERE job_id = $1 AND state = 'pending')",
                    "FOR UPDATE SKIP LOCKED",
                ]
            ),
            job_id,
        )
    return None if record is None else _item(record)


async def next_pending(conn: Conn, job_id: int) -> JobItem | None:
    """The job's first item still pending, in plan order."""
    with translate_errors():
        record = await conn.fetchrow(
            " ".join(
                [
                    "SELECT",
                    _ITEM_COLUMNS,
                    "FROM replay_job_items WHERE job_id = $1 AND state = 'pending'",
                    "ORDER BY position LIMIT 1",
                ]
            ),
            job_id,
        )
    return None if record is None else _item(record)


async def record_item(
    conn: Conn,
    job_id: int,
    position: int,
    state: ItemState,
    error_class: str | None = None,
    message: str | None = None,
) -> bool:
    """Record a pending item's outcome; False if it was not pending (recorded already).

    A runner records an item in the transaction of `take_next` that locked it: only the
    runner running the item records it, even when the job was taken over meanwhile (the
    new runner waits for the lock), so no outcome is lost and none recorded twice."""
    with translate_errors():
        found = await conn.fetchval(
            "UPDATE replay_job_items SET state = $3, error_class = $4, message = $5,"
            " done_at = clock_timestamp()"
            " WHERE job_id = $1 AND position = $2 AND state = 'pending' RETURNING position",
            job_id,
            position,
            state.value,
            error_class,
            None if message is None else capped(message),  # as the dead letter keeps it
        )
    return found is not None


async def finish(
    conn: Conn, job_id: int, runner: str, state: JobState, error: str | None = None
) -> bool:
    """End `runner`'s run of the job in `state` (done or failed); False if the job was
    paused, cancelled or taken meanwhile (the operator's word stands)."""
    with translate_errors():
        found = await conn.fetchval(
            "UPDATE replay_jobs SET state = $3, error = $4, finished_at = clock_timestamp()"
            " WHERE id = $1 AND runner = $2 AND state = 'running' RETURNING id",
            job_id,
            runner,
            state.value,
            error,
        )
    return found is not None


async def apply_action(conn: Conn, job_id: int, action: JobAction) -> tuple[ReplayJob | None, bool]:
    """Apply an operator's action if the job's state allows it: (the job as it now is, or
    None when there is no such job; whether the action was applied).

    Compare-and-set: the UPDATE names the states the action applies to, so a runner that
    finished the job a moment earlier makes a late pause refused, not lost. A retry puts
    the failed items back to pending in the same transaction (run it in the caller's).
    """
    sources, target = TRANSITIONS[action]
    with translate_errors():
        record = await conn.fetchrow(
            " ".join([_TRANSITION, "RETURNING", _JOB_COLUMNS]),
            job_id,
            target.value,
            [s.value for s in sources],
        )
        if record is None:
            return await get_job(conn, job_id), False
        if action is JobAction.RETRY:
            await conn.execute(
                "UPDATE replay_job_items SET state = 'pending', error_class = NULL,"
                " message = NULL, done_at = NULL WHERE job_id = $1 AND state = 'failed'",
                job_id,
            )
    return _job(record), True


async def get_job(conn: Conn, job_id: int) -> ReplayJob | None:
    with translate_errors():
        record = await conn.fetchrow(
            " ".join(["SELECT", _JOB_COLUMNS, "FROM replay_jobs WHERE id = $1"]), job_id
        )
    return None if record is None else _job(record)


async def progress(conn: Conn, job_ids: Sequence[int]) -> dict[int, Progress]:
    """Each job's items counted by state (a job with no items counts all zeros)."""
    with translate_errors():
        records = await conn.fetch(
            "SELECT job_id, state, count(*) AS n FROM replay_job_items"
            " WHERE job_id = ANY($1::bigint[]) GROUP BY job_id, state",
            list(job_ids),
        )
    counts: dict[int, dict[str, int]] = {int(i): {} for i in job_ids}
    for r in records:
        counts[int(r["job_id"])][r["state"]] = int(r["n"])
    return {job_id: Progress.of(c) for job_id, c in counts.items()}


async def list_jobs(
    conn: Conn,
    limit: int,
    *,
    before_id: int | None = None,
    states: Sequence[JobState] = (),
) -> list[ReplayJob]:
    """Jobs newest first, `limit` at most, after the keyset `before_id` (the last id of
    the previous page), optionally only those in `states`."""
    parts = ["true"]
    args: list[Any] = []
    if before_id is not None:
        args.append(before_id)
        parts.append(f"id < ${len(args)}")
    if states:
        args.append([s.value for s in states])
        parts.append(f"state = ANY(${len(args)}::text[])")
    args.append(limit)
    sql = " ".join(
        [
            "SELECT",
            _JOB_COLUMNS,
            "FROM replay_jobs WHERE",
            " AND ".join(parts),
            f"ORDER BY id DESC LIMIT ${len(args)}",
        ]
    )
    with translate_errors():
        records = await conn.fetch(sql, *args)
    return [_job(r) for r in records]


async def job_items(
    conn: Conn, job_id: int, limit: int, *, after_position: int = 0, only: ItemState | None = None
) -> list[JobItem]:
    """The job's items in plan order, `limit` at most, after the keyset `after_position`
    (positions start at 1), optionally only those in state `only`."""
    args: list[Any] = [job_id, after_position, limit]
    where = "job_id = $1 AND position > $2"
    if only is not None:
        args.append(only.value)
        where += " AND state = $4"
    with translate_errors():
        records = await conn.fetch(
            " ".join(
                [
                    "SELECT",
                    _ITEM_COLUMNS,
                    "FROM replay_job_items WHERE",
                    where,
                    "ORDER BY position LIMIT $3",
                ]
            ),
            *args,
        )
    return [_item(r) for r in records]


@dataclass(frozen=True)
class PlanRows:
    """The rows a replay of a filter considers, as its plan sorts them, read with LIMITs
    so that a filter matching a million rows loads a bounded number of them."""

    to_replay: list[RowBrief]  # in replay order, at most the limit asked
    passed: list[RowBrief]  # the first rows passed over, in replay order
    skipped: int  # passed over in all as skipped: resolved, or at max attempts
    failed: int  # passed over in all as failed: a stage with no handler


async def plan_rows(
    conn: Conn,
    f: DlqFilter,
    *,
    stages: Sequence[str],
    max_attempts: int | None,
    ordered: bool,
    limit: int,
    passed_limit: int,
    timeout_s: float | None,
) -> PlanRows:
    """The rows of `f` a replay would run (open, of a stage in `stages`, under
    `max_attempts` unless None), the first `limit` in replay order; the first
    `passed_limit` of those it passes over, and how many it passes over in all.

    The same sorting as `gateway.dlq.plan.plan` in the same order, in SQL: `limit` counts
    rows to replay, as `gateway dlq replay --limit` does, whatever is passed over between
    them. Each read is bounded by `timeout_s` (`dead_letter_pages.bounded`).
    """
    order = replay_order(ordered=ordered)
    replayable = _filtered(replace(f, resolved=False))
    replayable.add("stage = ANY({}::text[])", list(stages))
    if max_attempts is not None:
        replayable.add("attempts < {}", max_attempts)
    passed = _filtered(f)
    passed.args.append(list(stages))
    in_stages = f"stage = ANY(${len(passed.args)}::text[])"
    skipped_sql = "is_resolved"
    if max_attempts is not None:
        passed.args.append(max_attempts)
        skipped_sql = f"(is_resolved OR ({in_stages} AND attempts >= ${len(passed.args)}))"
    failed_sql = f"(NOT is_resolved AND NOT {in_stages})"
    passed.parts.append(f"({skipped_sql} OR {failed_sql})")
    # The fragments are this function's own, the values parameters.
    counts_head = " ".join(
        [
            "SELECT count(*) FILTER (WHERE",
            skipped_sql,
            ") AS skipped, count(*) FILTER (WHERE",
            failed_sql,
            ") AS failed FROM dlq_webhooks",
        ]
    )
    with translate_errors():
        async with bounded(conn, timeout_s):
            to_replay = (
                []
                if f.resolved is True  # every row resolved: nothing to replay
                else await conn.fetch(*replayable.query(_LIST, order, limit))
            )
            shown = await conn.fetch(*passed.query(_LIST, order, passed_limit))
            counts = await conn.fetchrow(*passed.query(counts_head))
            if timeout_s is not None:
                # Inside a caller's transaction the bound would outlast these reads.
                await conn.execute("SET LOCAL statement_timeout TO DEFAULT")
    assert counts is not None  # an aggregate answers one row
    return PlanRows(
        [RowBrief(**dict(r)) for r in to_replay],
        [RowBrief(**dict(r)) for r in shown],
        int(counts["skipped"]),
        int(counts["failed"]),
    )
