"""The replay planner: what a replay of dead letters (or of accepted events) asked for in
the console, and the plan `gateway dlq replay --dry-run` (or `gateway events replay
--dry-run`) would print for it, made by the same planner from the same rows in the same
order: the rows to replay, the rows skipped with the reason, and a breakdown.

Imports only the pure planner (`gateway.dlq.plan`), the filters' parsers and the SQL
adapters: never the replayer, whose stage handlers load the settlement side.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from gateway.adapters.postgres import Conn
from gateway.adapters.postgres import events as events_sql
from gateway.adapters.postgres import replay_jobs as jobs_sql
from gateway.adapters.postgres.dead_letters import rows as dead_letters
from gateway.core.dlq.filters import (
    DlqFilter,
    check_replay_flags,
    filter_from_query,
    filter_query,
)
from gateway.core.dlq.model import RowOutcome
from gateway.core.dlq.pages import LIST_TIMEOUT_S
from gateway.core.events.filters import EventFilter, skip_reason
from gateway.core.events.search import parse_event_search
from gateway.core.replay.jobs import JobKind, NewJob
from gateway.core.replay.requests import JOB_MAX_ROWS, PlanAsk, unflag
from gateway.dlq.plan import REPLAYABLE_STAGES, RowResult, plan
from gateway.errors import (
    DlqRowNotFound,
    DlqUsageError,
    EventRowNotFound,
    EventsUsageError,
)
from gateway.errors.commands import listed_ids

#: The rows shown at each end of the plan, and the skipped rows listed.
SHOWN_AT_EACH_END = 5
SKIPPED_SHOWN = 200


@dataclass(frozen=True)
class PlanRow:
    """One row of a plan, as the planner shows it (no payload)."""

    id: int
    provider: str
    event_id: str
    what: str  # the dead letter's stage and error class, or the event's type
    attempts: int | None
    at: datetime  # received
    outcome: str = RowOutcome.WOULD_REPLAY.value
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "provider": self.provider,
            "event_id": self.event_id,
            "what": self.what,
            "attempts": self.attempts,
            "received_at": self.at.isoformat(),
            "outcome": self.outcome,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class PlanView:
    """The plan of one ask: every row to replay, in order, and those passed over (the
    first `SKIPPED_SHOWN` of them, and how many in all)."""

    ask: PlanAsk
    rows: list[PlanRow]
    skipped: list[PlanRow]
    breakdown: list[tuple[str, int]]  # (what, rows), most first
    skipped_count: int  # rows passed over as skipped (resolved, at max attempts)
    failed_count: int  # rows passed over as failed (no handler for their stage)

    @property
    def count(self) -> int:
        return len(self.rows)

    @property
    def passed_over(self) -> int:
        return self.skipped_count + self.failed_count

    @property
    def row_ids(self) -> tuple[int, ...]:
        return tuple(r.id for r in self.rows)

    @property
    def first(self) -> list[PlanRow]:
        return self.rows[:SHOWN_AT_EACH_END]

    @property
    def last(self) -> list[PlanRow]:
        """The last rows, none of them among the first."""
        tail = max(SHOWN_AT_EACH_END, len(self.rows) - SHOWN_AT_EACH_END)
        return self.rows[tail:]

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.ask.kind.value,
            "request": self.ask.request_doc(),
            "would_replay": self.count,
            "skipped": self.skipped_count,
            "failed": self.failed_count,
            "first": [r.to_json() for r in self.first],
            "last": [r.to_json() for r in self.last],
            "breakdown": [{"what": what, "rows": n} for what, n in self.breakdown],
            "passed_over": [r.to_json() for r in self.skipped[:SKIPPED_SHOWN]],
        }

    def new_job(self, created_by: str, idempotency_key: str | None) -> NewJob:
        return NewJob(
            kind=self.ask.kind,
            created_by=created_by,
            request={**self.ask.request_doc(), "rows": self.count},
            row_ids=self.row_ids,
            rate_per_s=self.ask.rate_per_s,
            max_attempts=self.ask.max_attempts,
            ordered=self.ask.ordered,
            idempotency_key=idempotency_key,
        )


def _pinned(ask: PlanAsk, pairs: list[tuple[str, str]]) -> PlanAsk:
    """`ask` with its filter as the parser read it, times absolute: what the page carries
    to the start and the job keeps, so "since 2h" means the rows the plan showed, not
    those of two hours before the form was sent."""
    params: dict[str, tuple[str, ...]] = {}
    for key, value in pairs:
        params[key] = (*params.get(key, ()), value)
    return replace(ask, params=params)


def _breakdown(labels: list[str]) -> list[tuple[str, int]]:
    return Counter(labels).most_common()


async def make_plan(conn: Conn, ask: PlanAsk, now: datetime) -> PlanView:
    """The plan of `ask` at `now`; raises a `UsageError` (the message says what to change)
    or a `RowNotFound` for an id with no row."""
    if ask.kind is JobKind.EVENTS:
        return await _events_plan(conn, ask, now)
    return await _dlq_plan(conn, ask, now)


async def _dlq_plan(conn: Conn, ask: PlanAsk, now: datetime) -> PlanView:
    try:
        f = DlqFilter() if ask.ids else filter_from_query(now, ask.params)
        options = check_replay_flags(
            ids=[str(i) for i in ask.ids],
            replay_all=not ask.ids,
            dlq_filter=f,
            limit=None if ask.ids else ask.limit,
            rate_per_s=ask.rate_per_s,
            max_attempts=ask.max_attempts,
            force=ask.force,
            dry_run=True,
            unordered=not ask.ordered,
        )
    except DlqUsageError as exc:
        raise DlqUsageError(unflag(str(exc))) from None
    if options.ids:  # as many rows as ids: all of them read, as the replay reads them
        briefs = await dead_letters.replay_briefs(conn, f, options.ids, ordered=ask.ordered)
        missing = sorted(set(options.ids) - {b.id for b in briefs})
        if missing:
            raise DlqRowNotFound(missing)
    else:
        # LIMITs in SQL: one more row than a job takes says the filter matches too many.
        found = await jobs_sql.plan_rows(
            conn,
            f,
            stages=REPLAYABLE_STAGES,
            max_attempts=None if options.force else options.max_attempts,
            ordered=ask.ordered,
            limit=min(JOB_MAX_ROWS + 1, options.limit or JOB_MAX_ROWS + 1),
            passed_limit=SKIPPED_SHOWN,
            timeout_s=LIST_TIMEOUT_S,
        )
        briefs = found.passed + found.to_replay
    the_plan = plan(briefs, REPLAYABLE_STAGES, options)
    if len(the_plan.to_replay) > JOB_MAX_ROWS:
        raise DlqUsageError(
            f"more than {JOB_MAX_ROWS:,} rows match and would replay; one job replays at"
            f" most {JOB_MAX_ROWS:,}: narrow the filter, or set a limit"
        )
    if options.ids:
        skipped, failed = _counts(the_plan.results)
    else:
        skipped, failed = found.skipped, found.failed

    def row(
        b: Any, outcome: str = RowOutcome.WOULD_REPLAY.value, why: str | None = None
    ) -> PlanRow:
        what = f"{b.stage} {b.error_class}"
        return PlanRow(b.id, b.provider, b.event_id, what, b.attempts, b.received_at, outcome, why)

    rows = [row(b) for b in the_plan.to_replay]
    shown = the_plan.results[:SKIPPED_SHOWN]
    passed = [row(r.row, r.outcome.value, r.message) for r in shown]
    labels = [f"{b.stage} · {b.error_class} · {b.provider}" for b in the_plan.to_replay]
    pinned = ask if ask.ids else _pinned(ask, filter_query(f))
    return PlanView(pinned, rows, passed, _breakdown(labels), skipped, failed)


def _counts(results: list[RowResult]) -> tuple[int, int]:
    """(skipped, failed) among a plan's rows passed over."""
    skipped = sum(1 for r in results if r.outcome is RowOutcome.SKIPPED)
    return skipped, len(results) - skipped


async def _events_plan(conn: Conn, ask: PlanAsk, now: datetime) -> PlanView:
    if ask.ids:
        f = EventFilter(ids=ask.ids)
        missing = await events_sql.missing_ids(conn, ask.ids)
        if missing:
            raise EventRowNotFound(f"no accepted event with id {listed_ids(missing)}")
    else:
        if "state" in ask.params or "contains" in ask.params:
            raise EventsUsageError(
                "a replay chooses events by provider, type, time, event id and source; "
                "remove state and contains (they narrow the log, not a replay), or pick ids"
            )
        search = parse_event_search(dict(ask.params), now)  # the window is required
        f = search.filter
        ask = _pinned(ask, search.query())
    cap = JOB_MAX_ROWS + 1 if ask.limit is None else ask.limit
    briefs = await events_sql.event_briefs(conn, f, cap)
    if len(briefs) > JOB_MAX_ROWS:
        raise EventsUsageError(
            f"more than {JOB_MAX_ROWS} events match; one job replays at most "
            f"{JOB_MAX_ROWS}: narrow the filter or set a limit"
        )
    rows: list[PlanRow] = []
    passed: list[PlanRow] = []
    for b in briefs:
        reason = skip_reason(b.subject, b.payload_removed_at)
        outcome = RowOutcome.WOULD_REPLAY if reason is None else RowOutcome.SKIPPED
        shown = PlanRow(
            b.id,
            b.provider,
            b.event_id,
            b.event_type or "(no type)",
            None,
            b.received_at,
            outcome.value,
            reason,
        )
        (rows if reason is None else passed).append(shown)
    labels = [f"{r.provider} · {r.what}" for r in rows]
    return PlanView(ask, rows, passed[:SKIPPED_SHOWN], _breakdown(labels), len(passed), 0)


def filter_summary(ask: PlanAsk) -> list[tuple[str, str]]:
    """The ask's choice of rows as (field, values) pairs for the page."""
    if ask.ids:
        return [("id", ", ".join(map(str, ask.ids)))]
    return [(k, ", ".join(v)) for k, v in ask.params.items()]
