"""The overview: dead letters (by stage, recent additions, net growth per hour against
the burst alert's threshold, the oldest open row), the outbox, the settlement
consumer's backlog, the webhooks awaiting their confirm fetch by provider, held keys, the
merchants below zero in the ledger, each sender's newest event (a silent one stands out)
and the replay jobs still running.

GET /console/ is the page; htmx polls GET /console/overview/partial every 10 s while
the tab is visible and swaps the figures in; with JavaScript off the page has a
refresh link. GET /console/api/v1/stats/overview answers the same figures as JSON.
Everything here needs VIEW: no payload is shown.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from gateway.adapters.jetstream.consumer_info import ConsumerBacklog, consumer_backlog
from gateway.adapters.postgres import Conn, Pool, connection
from gateway.adapters.postgres import dependency_state as outages
from gateway.adapters.postgres.confirmations import pending_stats
from gateway.adapters.postgres.console import stats
from gateway.console.charts import Bar, Chart, Threshold, bar_chart
from gateway.console.guard import needs
from gateway.console.ledger_reads import negative_merchants
from gateway.console.web import ConsoleDeps, Principal, deps, is_htmx, render
from gateway.core.console.outages import (
    RETRY_OVERDUE_S,
    DependencyBrief,
    RetryBrief,
    dependency_briefs,
)
from gateway.core.console.overview import (
    ConfirmBacklog,
    JobBrief,
    OldestOpen,
    Overview,
    ProviderLast,
    Thresholds,
    UnmappedBrief,
    confirm_backlog,
    provider_names,
    to_json,
)
from gateway.core.console.roles import Capability

#: The polling interval of the page (htmx), in seconds.
REFRESH_S = 10
T = TypeVar("T")


async def _backlog(console: ConsoleDeps) -> ConsumerBacklog:
    s = console.settings
    return await consumer_backlog(console.nats, s.nats.stream, s.settlement.consumer)


@dataclass(frozen=True)
class _Rest:
    outbox: tuple[int, float]
    held: tuple[int, float | None]
    providers: tuple[ProviderLast, ...]
    jobs: tuple[JobBrief, ...]
    unmapped: tuple[UnmappedBrief, ...]
    dependencies: tuple[DependencyBrief, ...]
    retrying: tuple[RetryBrief, ...]
    confirm: tuple[ConfirmBacklog, ...]


async def _on_own_connection(pool: Pool, read: Callable[[Conn], Awaitable[T]]) -> T:
    async with connection(pool) as conn:
        return await read(conn)


async def _outages(
    conn: Conn, now: datetime
) -> tuple[tuple[DependencyBrief, ...], tuple[RetryBrief, ...]]:
    """Each dependency's state, and the events in retry not long overdue."""
    rows = await outages.dependency_states(conn)
    due_after = now - timedelta(seconds=RETRY_OVERDUE_S)
    counts = await outages.retries_by_class(conn, due_after)
    return (
        dependency_briefs(
            (r.dependency, r.state, r.since, r.checked_at, r.checked_by, r.error_class)
            for r in rows
        ),
        tuple(
            RetryBrief(c.error_class, c.dependency, c.events, c.oldest_noted_at, c.next_retry_at)
            for c in counts
        ),
    )


async def gather(console: ConsoleDeps) -> Overview:
    """Every figure, read now, in three parts at once, each on a pooled connection of
    its own: the open rows by stage (the dearest: every open row is counted), the growth
    and the oldest row, and the rest; NATS meanwhile, bounded to about a second, and the
    ledger's merchant balances, bounded to two. The page waits for the slowest part, not
    for their sum."""
    now = console.now()
    settings = console.settings
    thresholds = Thresholds.from_alerts(settings.alerts)
    senders = provider_names(list(settings.providers), list(settings.services))

    async def dead_letters(conn: Conn) -> tuple[stats.Growth, OldestOpen | None]:
        return await stats.growth(conn, now, thresholds), await stats.oldest_open(conn, now)

    async def rest(conn: Conn) -> _Rest:
        return _Rest(
            await stats.outbox_owed(conn),
            await stats.held_keys(conn, now),
            await stats.last_events(conn, senders, now, thresholds.silent_after_s),
            await stats.live_jobs(conn),
            await stats.unmapped_types(conn, now),
            *await _outages(conn, now),
            confirm_backlog(await pending_stats(conn)),
        )

    pool = console.pool
    # A TaskGroup: a part that fails cancels the others; its own error (not the group
    # around it) is what the caller sees, as if the parts had run one after another.
    try:
        async with asyncio.TaskGroup() as group:
            backlog = group.create_task(_backlog(console))
            ledger = group.create_task(negative_merchants(console.books))
            stages = group.create_task(_on_own_connection(pool, stats.open_by_stage))
            growth = group.create_task(_on_own_connection(pool, dead_letters))
            others = group.create_task(_on_own_connection(pool, rest))
    except ExceptionGroup as failed:
        raise failed.exceptions[0]  # noqa: B904 - the group adds nothing to its cause
    added, oldest = growth.result()
    more, consumer = others.result(), backlog.result()
    negative, ledger_note = ledger.result()
    return Overview(
        at=now,
        thresholds=thresholds,
        open_by_stage=stages.result(),
        added_5m=added.added_5m,
        added_1h=added.added_1h,
        added_24h=added.added_24h,
        added_in_window=added.added_in_window,
        hours=added.hours,
        oldest_open=oldest,
        outbox_pending=more.outbox[0],
        outbox_lag_s=more.outbox[1],
        held_keys=more.held[0],
        oldest_hold_s=more.held[1],
        providers=more.providers,
        jobs=more.jobs,
        settlement_pending=consumer.pending,
        settlement_note=consumer.unavailable,
        negative_merchants=None if negative is None else tuple(negative.items()),
        ledger_note=ledger_note,
        unmapped=more.unmapped,
        dependencies=more.dependencies,
        retrying=more.retrying,
        confirm_pending=more.confirm,
    )


def format_age(seconds: float | None) -> str:
    """An age as a reader takes it in at a glance: "45 s", "12 min", "3 h 5 min",
    "2 d 4 h"."""
    if seconds is None:
        return "never"
    s = int(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min"
    if s < 86_400:
        hours, minutes = s // 3600, s % 3600 // 60
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = s // 86_400, s % 86_400 // 3600
    return f"{days} d {hours} h" if hours else f"{days} d"


def _utc(value: datetime | None) -> str:
    return "" if value is None else value.strftime("%Y-%m-%d %H:%M:%S UTC")


def growth_chart(view: Overview) -> Chart:
    """Net growth per hour (opened minus resolved), with the burst alert's line."""
    t = view.thresholds
    window = format_age(t.dlq_window_s)
    line = Threshold(
        t.growth_per_hour,
        f"alert: more than {t.dlq_rows_max} in {window} ({t.growth_per_hour:g} an hour)",
    )
    bars = [
        Bar(b.start.strftime("%H:00"), b.net, f"{b.opened} opened, {b.resolved} resolved")
        for b in view.hours
    ]
    return bar_chart(
        bars,
        chart_id="growth",
        title="Dead letters: net growth per hour (opened minus resolved), UTC",
        description=(
            f"{len(bars)} hourly bars from {bars[0].label if bars else '-'} to "
            f"{bars[-1].label if bars else '-'}; the dashed line is the burst alert's "
            "threshold as an hourly rate."
        ),
        threshold=line,
        label_heading="Hour (UTC)",
        value_heading="Net growth",
        detail_heading="Opened, resolved",
    )


def context(view: Overview) -> dict[str, Any]:
    """What the templates show, every figure formatted once here."""
    t = view.thresholds
    oldest = view.oldest_open
    return {
        "view": view,
        "updated": _utc(view.at),
        "refresh_s": REFRESH_S,
        "chart": growth_chart(view),
        "oldest_age": None if oldest is None else format_age(oldest.age_s),
        "oldest_at": None if oldest is None else _utc(oldest.first_failed_at),
        "oldest_limit": format_age(t.oldest_unresolved_max_s),
        "burst_window": format_age(t.dlq_window_s),
        "lag": format_age(view.outbox_lag_s) if view.outbox_pending else "none owed",
        "lag_over": view.outbox_pending > 0 and view.outbox_lag_s > t.outbox_lag_max_s,
        "lag_limit": format_age(t.outbox_lag_max_s),
        "hold_age": format_age(view.oldest_hold_s) if view.held_keys else None,
        "hold_over": view.oldest_hold_s is not None and view.oldest_hold_s > t.hold_max_s,
        "silent_after": format_age(t.silent_after_s),
        "confirm_pending": [
            {
                "provider": c.provider,
                "pending": f"{c.pending:,}",
                "webhooks": "webhook" if c.pending == 1 else "webhooks",
                "oldest": format_age(c.oldest_s),
                "late": view.confirm_late(c),
            }
            for c in view.confirm_pending
        ],
        "confirm_late": any(view.confirm_late(c) for c in view.confirm_pending),
        "confirm_limit": format_age(t.confirm_backlog_max_s),
        "dependencies": [
            {
                "name": d.dependency.value,
                "state": "not reported" if d.state is None else d.state.value,
                "down": d.down,
                "since": _utc(d.since),
                "for": format_age(None if d.since is None else (view.at - d.since).total_seconds()),
                "checked": _utc(d.checked_at),
                "checked_by": d.checked_by or "",
                "error_class": d.error_class or "",
            }
            for d in view.dependencies
        ],
        "retrying": [
            {
                "brief": r,
                "next": _utc(r.next_retry_at),
                "oldest": format_age((view.at - r.oldest_noted_at).total_seconds()),
            }
            for r in view.retrying
        ],
        "providers": [
            {
                "name": p.provider,
                "last_id": p.last_id,
                "last_at": _utc(p.last_at),
                "age": format_age(p.age_s),
                "silent": p.silent,
            }
            for p in view.providers
        ],
        "jobs": [
            {
                "job": j,
                "done": j.total - j.pending,
                "percent": _percent(j.total - j.pending, j.total),
            }
            for j in view.jobs
        ],
    }


def _percent(done: int, total: int) -> int:
    return 100 if total <= 0 else min(100, round(100 * done / total))


@needs(Capability.VIEW)
async def overview_page(request: Request, principal: Principal) -> Response:
    view = await gather(deps(request))
    template = "overview/_figures.html" if is_htmx(request) else "overview/page.html"
    return render(request, template, context(view))


@needs(Capability.VIEW)
async def overview_partial(request: Request, principal: Principal) -> Response:
    """The figures alone, for htmx to swap into the page (a plain GET shows them too)."""
    view = await gather(deps(request))
    return render(request, "overview/_figures.html", context(view))


@needs(Capability.VIEW)
async def overview_api(request: Request, principal: Principal) -> Response:
    return JSONResponse(to_json(await gather(deps(request))))


ROUTES: list[BaseRoute] = [
    Route("/console/", overview_page, methods=["GET"]),
    Route("/console/overview/partial", overview_partial, methods=["GET"]),
    Route("/console/api/v1/stats/overview", overview_api, methods=["GET"]),
]
