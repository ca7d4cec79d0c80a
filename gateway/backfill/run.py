"""One backfill run over a window: list the provider's events newest first, page by
page; each one already recorded is `present`; each missing one is fetched, shaped as
its webhook would have been, and offered to the idempotency gate (the same
`INSERT ... ON CONFLICT DO NOTHING` as a webhook, `adapters.postgres.webhooks`), so a
webhook or a second run recording it at the same moment makes it `present`, never a
second row. What the gate inserted is published at once with the usual
`Nats-Msg-Id` (plus `Gateway-Source: backfill`); what could not be published stays in
the outbox for the relay of `gateway serve` or `gateway relay`.

After each page the provider's cursor and the page's counts are saved in
`backfill_progress` (a dry run saves nothing), so a run that dies continues from the
last finished page: its events are offered to the gate again and found present.

A pass is bounded (`ApiLimits`): it stops between pages after `max_pages` pages or
`max_pass_s` seconds, its cursor saved for the next pass. A malformed entry never fails
its page (it is recorded and parked, or counted failed with one line). A page that
fails is counted on its progress row; after `page_attempts` passes in a row the row is
skipped (`pages.page_failed`) and the pass goes on with the rest of its window.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from gateway import tracing
from gateway.adapters.postgres import Conn, connection
from gateway.adapters.postgres import backfill as progress
from gateway.adapters.provider_api import Listed, Page
from gateway.backfill import pages, traced
from gateway.backfill.offer import offer
from gateway.backfill.parts import BackfillParts, BackfillReport
from gateway.core.backfill.decisions import Outcome, PageState, Window, passed_window
from gateway.core.operator_input import pace_delay_s
from gateway.errors import ProviderApiRefused, ProviderApiUnavailable, error_class_of

__all__ = ["BackfillParts", "BackfillReport", "backfill"]

log = logging.getLogger(__name__)


class _Pacer:
    """At most `rate_per_s` API calls a second, averaged from the start."""

    def __init__(self, parts: BackfillParts, rate_per_s: float | None) -> None:
        self._parts, self._rate = parts, rate_per_s
        self._started = parts.monotonic()
        self._calls = 0

    async def __call__(self) -> None:
        delay_s = pace_delay_s(self._started, self._calls, self._rate, self._parts.monotonic())
        self._calls += 1
        if delay_s > 0:
            await (self._parts.sleep or asyncio.sleep)(delay_s)


async def backfill(
    parts: BackfillParts,
    window: Window,
    *,
    dry_run: bool = False,
    rate_per_s: float | None = None,
    session: Conn | None = None,
) -> BackfillReport:
    """Recover what the provider's API has in `window` and the gateway never recorded.
    `session`: a connection the caller holds for the pass anyway (a scheduled pass's,
    with its lock), which then holds the pass's rows too, rather than one more of the
    pool's."""
    report = BackfillReport(parts.provider.name, window, dry_run)
    # None: tracing off, or a pass not sampled (its events then carry flags 00).
    span = traced.pass_span(report.provider, window, dry_run)
    try:
        with tracing.activated(span):  # its log lines and each recovered event join it
            await _run(parts, report, rate_per_s, session)
    except BaseException as exc:
        error = error_class_of(exc)
        traced.pass_done(span, report.tally.to_json(), report.unpublished, error)
        raise
    traced.pass_done(span, report.tally.to_json(), report.unpublished, None)
    return report


async def _run(
    parts: BackfillParts, report: BackfillReport, rate_per_s: float | None, session: Conn | None
) -> None:
    """The pass: an unfinished run of this provider first, then the window; fills `report`."""
    if report.dry_run:
        await _segments(parts, report, [report.window], rate_per_s, None)
    else:
        # One session for the pass holds the rows it advances (`progress.Claims`): the
        # caller's, or one of the pool's.
        async with contextlib.AsyncExitStack() as stack:
            if session is None:
                session = await stack.enter_async_context(connection(parts.pool))
            claims = progress.Claims(session, report.provider)
            await _segments(parts, report, await _plan(claims, report), rate_per_s, claims)
            await claims.release()
    if not report.dry_run and report.stopped is None:
        parts.metrics.backfill_last_complete.set(
            datetime.now(UTC).timestamp(), provider=report.provider
        )
    log.info("backfill done", extra=report.to_json() | {"events": len(report.events)})


async def _plan(claims: progress.Claims, report: BackfillReport) -> list[Window]:
    """The windows of the pass: a run that died, continued from its cursor, then
    whatever of `report.window` it did not ask for; or the window alone."""
    window = report.window
    found = await claims.continue_unfinished(window)
    if found is None:
        return [window]
    report.continued.append(found.window)
    log.info(
        "continuing an unfinished backfill",
        extra={
            "provider": report.provider,
            "since": found.window.since.isoformat(),
            "until": found.window.until.isoformat(),
            "cursor": found.state.cursor,
        },
    )
    if window.until > found.window.until:
        return [found.window, Window(found.window.until, window.until, window.types)]
    return [found.window]


async def _segments(
    parts: BackfillParts,
    report: BackfillReport,
    segments: list[Window],
    rate_per_s: float | None,
    claims: progress.Claims | None,
) -> None:
    pace = _Pacer(parts, rate_per_s)
    seen: set[str] = set()
    ends_s = parts.monotonic() + parts.limits.max_pass_s
    for segment in segments:
        if claims is not None:
            # Held before its row exists, so no other run sees the row unheld; a live run
            # of the very same window holds it too (shared), and both go on: the gate
            # decides what each records.
            await claims.take(segment)
        await _segment(parts, segment, report, seen, pace, ends_s)
        if report.stopped is not None:
            break


def _bound_reached(parts: BackfillParts, report: BackfillReport, ends_s: float) -> str | None:
    """Which bound of the pass stops it before its next page, if one does."""
    if report.pages >= parts.limits.max_pages:
        return "api_max_pages"
    if parts.monotonic() >= ends_s:
        return "api_max_pass_s"
    return None


async def _segment(
    parts: BackfillParts,
    window: Window,
    report: BackfillReport,
    seen: set[str],
    pace: Callable[[], Awaitable[None]],
    ends_s: float,
) -> None:
    name = parts.provider.name
    state = PageState()
    if not report.dry_run:
        async with connection(parts.pool) as conn:
            state = await progress.start(conn, name, window)
        if state.done:
            return
    cursor = state.cursor
    cursors = {cursor}  # an API that hands back a cursor it gave before would loop for ever
    while True:
        report.stopped = _bound_reached(parts, report, ends_s)
        if report.stopped is not None:
            pages.stopped(parts, report, window, cursor)
            return
        await pace()
        report.pages += 1
        # A page fails as a whole: its answer, or a fetch of one of its events that kept
        # failing (GitHub); what it recorded first is found present when it is read again.
        try:
            page = await parts.source.page(cursor, window)
            next_cursor = page.next_cursor
            if next_cursor is not None and next_cursor in cursors:
                raise ProviderApiRefused(
                    f"{name}: the API returned a page cursor it had already given "
                    f"({next_cursor[:64]!r}); stopping instead of reading the same pages again"
                )
            wanted = _wanted(page, window, seen)
            seen.update(i.event_id for i in wanted if i.event_id)
            tally = pages.unusable(parts, report, page.unusable)
            tally.merge(await offer(parts, wanted, report, pace))
        except (ProviderApiRefused, ProviderApiUnavailable) as exc:
            if report.dry_run or not await pages.page_failed(parts, report, window, cursor, exc):
                raise
            return  # skipped: the pass goes on with the rest of its window
        cursors.add(next_cursor)
        occurred = [i.occurred_at for i in page.items if i.occurred_at is not None]
        done = next_cursor is None or passed_window(occurred, window)
        if not report.dry_run:
            async with connection(parts.pool) as conn:
                await progress.save(conn, name, window, next_cursor, tally, done)
        report.tally.merge(tally)
        for outcome in Outcome:
            count = getattr(tally, outcome.value)
            if count:
                parts.metrics.backfill_events_total.inc(count, provider=name, outcome=outcome.value)
        if done:
            return
        cursor = next_cursor


def _wanted(page: Page, window: Window, seen: set[str]) -> list[Listed]:
    """The page's entries to offer: in the window and the type filter (an entry whose
    time or type could not be read is kept: it is recorded and parked), not seen yet."""
    return [
        i
        for i in page.items
        if (i.occurred_at is None or window.holds(i.occurred_at))
        and (window.wants(i.event_type) or (i.failure is not None and i.event_type is None))
        and (not i.event_id or i.event_id not in seen)
    ]
