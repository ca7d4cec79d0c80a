"""The replay planner: what a replay of dead letters (or of accepted events) asked for in
the console, and the plan `gateway dlq replay --dry-run` (or `gateway events replay
--dry-run`) would print for it, made by the same planner from the same rows in the same
order: the rows to replay, the rows skipped with the reason, and a breakdown.

Imports only the pure planner (`gateway.dlq.plan`), the filters' parsers and the SQL
adapters: never the replayer, whose stage handlers load the settlement side.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from gateway.adapters.postgres import Conn, dead_letters
from gateway.adapters.postgres import events as events_sql
from gateway.adapters.postgres import replay_jobs as store
from gateway.core.dlq_filters import (
    FILTER_KEYS,
    DlqFilter,
    check_replay_flags,
    filter_from_query,
    filter_query,
)
from gateway.core.event_filters import EventFilter, skip_reason
from gateway.core.event_search import parse_event_search
from gateway.core.operator_input import parse_ids
from gateway.core.replay_jobs import JobKind, NewJob
from gateway.dlq.plan import REPLAYABLE_STAGES, RowOutcome, plan
from gateway.errors import (
    DlqRowNotFound,
    DlqUsageError,
    EventRowNotFound,
    EventsUsageError,
    UsageError,
)

#: The most rows one job replays: a wider replay is narrowed, or given a limit.
JOB_MAX_ROWS = 100_000
#: The rows shown at each end of the plan, and the skipped rows listed.
SHOWN_AT_EACH_END = 5
SKIPPED_SHOWN = 200
#: The event log's filter keys (`core.event_search`), which the planner reads for events.
EVENT_KEYS = frozenset({"provider", "type", "since", "until", "event_id", "source"})


def _unflag(message: str) -> str:
    """The shared parsers speak of `--limit`; a form has a field named `limit`."""
    return (
        message.replace("--id and --all exclude each other; give one", "give ids or a filter")
        .replace("--event-id", "event_id")
        .replace("--max-attempts", "max_attempts")
        .replace("--", "")
    )


def _shown(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() else str(bound)


def _number(text: str | None, name: str, low: float, high: float, *, whole: bool) -> float | None:
    if text is None or not str(text).strip():
        return None
    try:
        value = int(str(text).strip()) if whole else float(str(text).strip())
    except ValueError:
        value = math.nan
    if not (low <= value <= high):
        kind = "a whole number" if whole else "a number"
        raise UsageError(
            f"{name}: must be {kind} from {_shown(low)} to {_shown(high)}, got {text!r}"
        )
    return value


@dataclass(frozen=True)
class PlanAsk:
    """What was asked: which rows (a filter as query parameters, or ids) and how."""

    kind: JobKind = JobKind.DLQ
    params: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # the filter only
    ids: tuple[int, ...] = ()
    limit: int | None = None
    rate_per_s: float | None = None
    max_attempts: int = 5
    ordered: bool = True
    force: bool = False

    def request_doc(self) -> dict[str, Any]:
        """As stored in `replay_jobs.request`."""
        doc: dict[str, Any] = {"kind": self.kind.value}
        if self.ids:
            doc["ids"] = list(self.ids)
        else:
            doc["filter"] = {k: list(v) for k, v in self.params.items()}
        doc.update(
            limit=self.limit,
            rate=self.rate_per_s,
            max_attempts=self.max_attempts,
            ordered=self.ordered,
            force=self.force,
        )
        return doc

    def hidden_fields(self) -> list[tuple[str, str]]:
        """The choice of rows as form fields, carried from the plan to its start."""
        pairs = [("kind", self.kind.value)]
        if self.ids:
            return pairs + [("id", str(i)) for i in self.ids]
        return pairs + [(k, v) for k, values in self.params.items() for v in values]


def ask_from_params(params: Mapping[str, Sequence[str]]) -> PlanAsk:
    """The planner's query string or form: `kind`, the filter (the DLQ list's keys, or
    the event log's), `id` or `ids` (repeatable, or separated by commas), `limit`, `rate`,
    `max_attempts`, `order` (key | arrival), `force`."""

    def one(name: str) -> str | None:
        values = [v for v in params.get(name, ()) if v.strip()]
        return values[-1].strip() if values else None

    kind_text = one("kind") or "dlq"
    if kind_text not in {k.value for k in JobKind}:
        raise UsageError(f"kind: {kind_text!r} is not one of dlq, events")
    kind = JobKind(kind_text)
    keys = FILTER_KEYS if kind is JobKind.DLQ else EVENT_KEYS | {"state", "contains"}
    filters = {k: tuple(v for v in vs if v.strip()) for k, vs in params.items() if k in keys}
    # `ids` is read as `id` too: a link may name the rows either way.
    given = [*params.get("id", ()), *params.get("ids", ())]
    ids_text = [p for v in given for p in v.replace(",", " ").split()]
    try:
        ids = parse_ids(ids_text, "id")
    except UsageError as exc:
        raise UsageError(str(exc)) from None
    order = one("order") or "key"
    if order not in ("key", "arrival"):
        raise UsageError(f"order: {order!r} is not one of key, arrival")
    limit = _number(one("limit"), "limit", 1, JOB_MAX_ROWS, whole=True)
    rate = _number(one("rate"), "rate", 0.001, 1_000_000, whole=False)
    attempts = _number(one("max_attempts"), "max_attempts", 1, 1_000_000, whole=True)
    return PlanAsk(
        kind=kind,
        params={k: v for k, v in filters.items() if v},
        ids=ids,
        limit=None if limit is None else int(limit),
        rate_per_s=rate,
        max_attempts=5 if attempts is None else int(attempts),
        ordered=order == "key",
        force=(one("force") or "").lower() in ("1", "true", "on", "yes"),
    )


def ask_from_json(body: Mapping[str, Any]) -> PlanAsk:
    """The API's `{kind, ids | filter, rate, limit, ordered, max_attempts, force}`, read
    as the form is (the filter's keys are the query string's)."""
    params: dict[str, list[str]] = {}
    raw_filter = body.get("filter") or {}
    if not isinstance(raw_filter, Mapping):
        raise UsageError(
            'filter: give an object of query parameters, e.g. {"stage": ["settlement"]}'
        )
    for key, value in raw_filter.items():
        values = value if isinstance(value, list) else [value]
        if not all(isinstance(v, str | int) and not isinstance(v, bool) for v in values):
            raise UsageError(f"filter.{key}: give a string or a list of strings")
        params[str(key)] = [str(v) for v in values]
    ids = body.get("ids") or []
    if not isinstance(ids, list) or not all(
        isinstance(i, int) and not isinstance(i, bool) for i in ids
    ):
        raise UsageError("ids: give a list of row ids (whole numbers)")
    if ids and (raw_filter or body.get("limit") is not None):
        raise UsageError("a filter and limit choose rows instead of ids: give ids, or a filter")
    ordered = body.get("ordered", True)
    force = body.get("force", False)
    if not isinstance(ordered, bool) or not isinstance(force, bool):
        raise UsageError("ordered and force are true or false")
    for name in ("limit", "rate", "max_attempts"):
        value = body.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise UsageError(f"{name}: give a number or null")
    kind = body.get("kind", "dlq")
    if not isinstance(kind, str):
        raise UsageError("kind: dlq or events")

    def text(name: str) -> list[str]:
        value = body.get(name)
        return [] if value is None else [str(value)]

    return ask_from_params(
        {
            **params,
            "kind": [kind],
            "id": [str(i) for i in ids],
            "limit": text("limit"),
            "rate": text("rate"),
            "max_attempts": text("max_attempts"),
            "order": ["key" if ordered else "arrival"],
            "force": ["true" if force else ""],
        }
    )


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
    """The plan of one ask: every row to replay, in order, and those passed over."""

    ask: PlanAsk
    rows: list[PlanRow]
    skipped: list[PlanRow]
    breakdown: list[tuple[str, int]]  # (what, rows), most first

    @property
    def count(self) -> int:
        return len(self.rows)

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
            "skipped": sum(1 for r in self.skipped if r.outcome == RowOutcome.SKIPPED),
            "failed": sum(1 for r in self.skipped if r.outcome == RowOutcome.FAILED),
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
        raise DlqUsageError(_unflag(str(exc))) from None
    briefs = await dead_letters.replay_briefs(conn, f, options.ids, ordered=ask.ordered)
    missing = sorted(set(options.ids) - {b.id for b in briefs})
    if missing:
        raise DlqRowNotFound(missing)
    the_plan = plan(briefs, REPLAYABLE_STAGES, options)
    if len(the_plan.to_replay) > JOB_MAX_ROWS:
        raise DlqUsageError(
            f"{len(the_plan.to_replay)} rows would replay; one job replays at most "
            f"{JOB_MAX_ROWS}: narrow the filter or set a limit"
        )

    def row(
        b: Any, outcome: str = RowOutcome.WOULD_REPLAY.value, why: str | None = None
    ) -> PlanRow:
        what = f"{b.stage} {b.error_class}"
        return PlanRow(b.id, b.provider, b.event_id, what, b.attempts, b.received_at, outcome, why)

    rows = [row(b) for b in the_plan.to_replay]
    passed = [row(r.row, r.outcome.value, r.message) for r in the_plan.results]
    labels = [f"{b.stage} · {b.error_class} · {b.provider}" for b in the_plan.to_replay]
    return PlanView(ask, rows, passed, _breakdown(labels))


async def _events_plan(conn: Conn, ask: PlanAsk, now: datetime) -> PlanView:
    if ask.ids:
        f = EventFilter(ids=ask.ids)
        missing = await events_sql.missing_ids(conn, ask.ids)
        if missing:
            raise EventRowNotFound(f"no accepted event with id {', '.join(map(str, missing))}")
    else:
        if "state" in ask.params or "contains" in ask.params:
            raise EventsUsageError(
                "a replay chooses events by provider, type, time, event id and source; "
                "remove state and contains (they narrow the log, not a replay), or pick ids"
            )
        f = parse_event_search(dict(ask.params), now).filter  # the window is required
    cap = JOB_MAX_ROWS + 1 if ask.limit is None else ask.limit
    briefs = await store.event_briefs(conn, f, cap)
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
    return PlanView(ask, rows, passed, _breakdown(labels))


def filter_summary(ask: PlanAsk, now: datetime) -> list[tuple[str, str]]:
    """The ask's choice of rows as (field, value) pairs for the page (times absolute)."""
    if ask.ids:
        return [("id", ", ".join(map(str, ask.ids)))]
    if ask.kind is JobKind.DLQ:
        try:
            return filter_query(filter_from_query(now, ask.params))
        except UsageError:
            pass
    return [(k, ", ".join(v)) for k, v in ask.params.items()]
