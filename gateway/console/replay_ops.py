"""What the replays pages and API do to jobs: create one from a plan (audited in the same
transaction), apply an operator's action (audited, refused or not), and read jobs and
their items a page at a time by keyset. The routes (`replays`, `replays_api`) only parse
and answer."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from starlette.requests import Request

from gateway.adapters.postgres import connection, transaction
from gateway.adapters.postgres import replay_jobs as store
from gateway.console.replay_plans import PlanView, make_plan
from gateway.console.web import Principal, audit, deps
from gateway.core.operator_input import MAX_ROW_ID
from gateway.core.payload_text import shown_message
from gateway.core.replay.jobs import (
    ItemState,
    JobAction,
    JobItem,
    JobState,
    Progress,
    ReplayJob,
    allowed_actions,
    confirmed,
)
from gateway.core.replay.requests import PlanAsk
from gateway.errors import UsageError

JOBS_PER_PAGE = 50
ITEMS_PER_PAGE = 100
#: The longest Idempotency-Key kept (a UUID is 36 characters).
IDEMPOTENCY_KEY_MAX_CHARS = 200


class NotConfirmed(UsageError):
    """A plan of more than 100 rows started without its row count typed."""

    def __init__(self, count: int) -> None:
        super().__init__(f"this replays {count} rows: type {count} to confirm")
        self.count = count


class NothingToReplay(UsageError):
    """A plan with no row to replay: no job is made of it."""


def encode_cursor(value: int) -> str:
    """An opaque cursor for a keyset of one number (a job id, an item position)."""
    return base64.urlsafe_b64encode(str(value).encode()).rstrip(b"=").decode()


def decode_cursor(text: str | None) -> int | None:
    if not text:
        return None
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode("ascii")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raw = ""
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 19):
        raise UsageError("cursor: not one this console gave out; start from the first page")
    return int(raw)


def job_id_of(request: Request) -> int | None:
    """The path's job id, or None past the table's bigint ids (no such job)."""
    job_id = int(request.path_params["job_id"])
    return job_id if 0 < job_id <= MAX_ROW_ID else None


def idempotency_key(text: str | None) -> str | None:
    key = (text or "").strip()
    if len(key) > IDEMPOTENCY_KEY_MAX_CHARS:
        raise UsageError(f"Idempotency-Key: at most {IDEMPOTENCY_KEY_MAX_CHARS} characters")
    return key or None


def job_doc(job: ReplayJob, counts: Progress) -> dict[str, Any]:
    """A job as the API answers it, and as the pages show it."""
    return {
        "id": job.id,
        "kind": job.kind.value,
        "state": job.state.value,
        "created_by": job.created_by,
        "created_at": job.created_at.isoformat(),
        "total": job.total,
        "counts": counts.to_json(),
        "done": counts.done,
        "percent": counts.percent,
        "rate": job.rate_per_s,
        "max_attempts": job.max_attempts,
        "ordered": job.ordered,
        "request": dict(job.request),
        "runner": job.runner,
        "heartbeat_at": None if job.heartbeat_at is None else job.heartbeat_at.isoformat(),
        "started_at": None if job.started_at is None else job.started_at.isoformat(),
        "finished_at": None if job.finished_at is None else job.finished_at.isoformat(),
        "error": job.error,
        "actions": [a.value for a in allowed_actions(job.state, counts)],
    }


def item_doc(item: JobItem, *, reads_payloads: bool) -> dict[str, Any]:
    """An item; its message (the replayed stage's failure, which may quote the event)
    only `reads_payloads`, else its length (`core.payload_text`)."""
    shown = shown_message(item.message, None, reads_payloads=reads_payloads)
    return {
        "position": item.position,
        "dlq_id": item.dlq_id,
        "webhook_id": item.webhook_id,
        "state": item.state.value,
        "error_class": item.error_class,
        "message": shown.text,
        "message_chars": shown.length_chars,
        "message_withheld": shown.withheld,
        "done_at": None if item.done_at is None else item.done_at.isoformat(),
    }


async def plan_of(request: Request, ask: PlanAsk) -> PlanView:
    console = deps(request)
    async with connection(console.pool) as conn:
        return await make_plan(conn, ask, console.now())


async def create_job(
    request: Request, principal: Principal, ask: PlanAsk, key: str | None, typed: str | None
) -> tuple[int, bool, PlanView]:
    """Plan `ask` again (rows change between a page and its submit) and make the job of
    it with the `replay.create` audit row in one transaction: (job id, created, plan).
    A repeated `key` answers the first job (created False) and writes nothing."""
    console = deps(request)
    async with transaction(console.pool) as conn:
        view = await make_plan(conn, ask, console.now())
        if not confirmed(view.count, typed):
            raise NotConfirmed(view.count)
        if not view.count:
            raise NothingToReplay("nothing to replay: every row chosen is skipped (see why)")
        job_id, created = await store.create_job(conn, view.new_job(principal.actor, key))
        if created:
            detail = {"kind": ask.kind.value, "rows": view.count, "request": ask.request_doc()}
            await audit(
                request, principal, "replay.create", f"job:{job_id}", detail=detail, conn=conn
            )
    return job_id, created, view


async def act(
    request: Request, principal: Principal, job_id: int, action: JobAction
) -> tuple[ReplayJob | None, bool]:
    """Apply `action` and audit it (`replay.<action>`, refused when the state does not
    allow it) in one transaction; (the job as it now is or None, applied)."""
    async with transaction(deps(request).pool) as conn:
        job, applied = await store.apply_action(conn, job_id, action)
        if job is not None:
            outcome = "ok" if applied else "refused"
            state = {"state": job.state.value}
            what = f"replay.{action.value}"
            await audit(request, principal, what, f"job:{job_id}", outcome, state, conn=conn)
    return job, applied


@dataclass(frozen=True)
class JobsPage:
    jobs: list[tuple[ReplayJob, Progress]]
    next_cursor: str | None


async def jobs_page(
    request: Request, cursor: str | None, states: tuple[JobState, ...] = ()
) -> JobsPage:
    before = decode_cursor(cursor)
    async with connection(deps(request).pool) as conn:
        jobs = await store.list_jobs(conn, JOBS_PER_PAGE + 1, before_id=before, states=states)
        shown = jobs[:JOBS_PER_PAGE]
        counts = await store.progress(conn, [j.id for j in shown])
    more = len(jobs) > JOBS_PER_PAGE
    return JobsPage(
        [(j, counts[j.id]) for j in shown], encode_cursor(shown[-1].id) if more else None
    )


@dataclass(frozen=True)
class JobDetail:
    job: ReplayJob
    counts: Progress
    items: list[JobItem]
    next_cursor: str | None
    now: datetime


async def job_detail(
    request: Request, job_id: int, cursor: str | None = None, only: ItemState | None = None
) -> JobDetail | None:
    after = decode_cursor(cursor) or 0
    console = deps(request)
    async with connection(console.pool) as conn:
        job = await store.get_job(conn, job_id)
        if job is None:
            return None
        counts = (await store.progress(conn, [job_id]))[job_id]
        items = await store.job_items(
            conn, job_id, ITEMS_PER_PAGE + 1, after_position=after, only=only
        )
    shown = items[:ITEMS_PER_PAGE]
    more = len(items) > ITEMS_PER_PAGE
    return JobDetail(
        job, counts, shown, encode_cursor(shown[-1].position) if more else None, console.now()
    )
