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
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from gateway import tracing
from gateway.adapters.jetstream.broker import message_headers
from gateway.adapters.jetstream.one_shot import OneShotPublisher
from gateway.adapters.postgres import Pool, connection
from gateway.adapters.postgres import backfill as progress
from gateway.adapters.postgres.webhooks import StoredEvent, insert_events
from gateway.adapters.provider_api import EventSource, Listed
from gateway.backfill import traced
from gateway.backfill.shape import shape
from gateway.core.backfill import Outcome, PageState, Tally, Window, passed_window
from gateway.core.dlq_filters import pace_delay_s
from gateway.core.model import Event
from gateway.errors import BrokerUnavailable, GatewayError, ProviderApiRefused, RequestRejected
from gateway.metrics import Metrics
from gateway.settings import ProviderSettings

log = logging.getLogger("gateway.backfill")

#: The most event ids a report lists (the counts are always complete).
_LISTED_MAX = 1000


@dataclass
class BackfillParts:
    """What a run works with; the composition root opens and closes them."""

    pool: Pool
    source: EventSource
    provider: ProviderSettings
    metrics: Metrics
    publisher: OneShotPublisher | None = None  # None: leave publishing to the relay
    sleep: Callable[[float], Awaitable[None]] | None = None
    monotonic: Callable[[], float] = time.monotonic


@dataclass
class BackfillReport:
    """The summary: fetched, present, recovered, failed (and what was listed)."""

    provider: str
    window: Window
    dry_run: bool
    tally: Tally = field(default_factory=Tally)
    unpublished: int = 0  # recorded but left to the outbox relay (NATS did not ack)
    continued: list[Window] = field(default_factory=list)  # unfinished runs continued
    events: list[dict[str, Any]] = field(default_factory=list)  # recovered / would
    errors: list[str] = field(default_factory=list)  # one line per failed event

    def to_json(self) -> dict[str, Any]:
        return {
            "provider": self.provider,
            "since": self.window.since.isoformat(),
            "until": self.window.until.isoformat(),
            "types": list(self.window.types),
            "dry_run": self.dry_run,
            **self.tally.to_json(),
            "unpublished": self.unpublished,
            "continued": [
                {"since": w.since.isoformat(), "until": w.until.isoformat()} for w in self.continued
            ],
            "events": self.events,
            "errors": self.errors,
        }


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
) -> BackfillReport:
    """Recover what the provider's API has in `window` and the gateway never recorded."""
    report = BackfillReport(parts.provider.name, window, dry_run)
    span = traced.pass_span(report.provider, window, dry_run) if tracing.ENABLED else None
    if span is None:  # off, or a pass not sampled (its events then carry flags 00)
        await _run(parts, report, rate_per_s)
        return report
    try:
        with tracing.activated(span):  # its log lines and each recovered event join it
            await _run(parts, report, rate_per_s)
    except BaseException as exc:
        error = exc.error_class if isinstance(exc, GatewayError) else type(exc).__name__
        traced.pass_done(span, report.tally.to_json(), report.unpublished, error)
        raise
    traced.pass_done(span, report.tally.to_json(), report.unpublished, None)
    return report


async def _run(parts: BackfillParts, report: BackfillReport, rate_per_s: float | None) -> None:
    """The pass: an unfinished run of this provider first, then the window; fills `report`."""
    name, window, dry_run = report.provider, report.window, report.dry_run
    segments = [window]
    if not dry_run:
        async with connection(parts.pool) as conn:
            found = await progress.find_unfinished(conn, name, window)
        if found is not None:
            # Continue the run that died from its cursor, then whatever it did not ask for.
            report.continued.append(found.window)
            segments = [found.window]
            if window.until > found.window.until:
                segments.append(Window(found.window.until, window.until, window.types))
            log.info(
                "continuing an unfinished backfill",
                extra={
                    "provider": name,
                    "since": found.window.since.isoformat(),
                    "until": found.window.until.isoformat(),
                    "cursor": found.state.cursor,
                },
            )
    pace = _Pacer(parts, rate_per_s)
    seen: set[str] = set()
    for segment in segments:
        await _segment(parts, segment, report, seen, pace)
    if not dry_run:
        parts.metrics.backfill_last_complete.set(datetime.now(UTC).timestamp(), provider=name)
    log.info("backfill done", extra=report.to_json() | {"events": len(report.events)})


async def _segment(
    parts: BackfillParts,
    window: Window,
    report: BackfillReport,
    seen: set[str],
    pace: Callable[[], Awaitable[None]],
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
        await pace()
        page = await parts.source.page(cursor, window)
        wanted = [
            i
            for i in page.items
            if window.holds(i.occurred_at) and window.wants(i.event_type) and i.event_id not in seen
        ]
        seen.update(i.event_id for i in wanted)
        tally = await _offer(parts, wanted, report, pace)
        next_cursor = page.next_cursor
        if next_cursor is not None and next_cursor in cursors:
            raise ProviderApiRefused(
                f"{name}: the API returned a page cursor it had already given "
                f"({next_cursor[:64]!r}); stopping instead of reading the same pages again"
            )
        cursors.add(next_cursor)
        done = next_cursor is None or passed_window([i.occurred_at for i in page.items], window)
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


async def _offer(
    parts: BackfillParts,
    items: list[Listed],
    report: BackfillReport,
    pace: Callable[[], Awaitable[None]],
) -> Tally:
    """One page's wanted events through the gate; the page's counts."""
    tally = Tally()
    provider = parts.provider
    async with connection(parts.pool) as conn:
        recorded = await progress.recorded_ids(conn, provider.name, [i.event_id for i in items])
    tally.add(Outcome.PRESENT, sum(1 for i in items if i.event_id in recorded))
    missing = [i for i in items if i.event_id not in recorded]
    if report.dry_run:
        for item in missing:
            tally.add(Outcome.WOULD_RECOVER)
            _listed(report, item.event_id, item.event_type, Outcome.WOULD_RECOVER)
        return tally
    events: dict[tuple[str, str], Event] = {}
    inexact: set[tuple[str, str]] = set()
    now = datetime.now(UTC)
    for item in missing:
        try:
            if item.body is None:
                await pace()  # a second call per event (GitHub)
            shaped = shape(provider, item, await parts.source.fetch(item), now)
        except (ProviderApiRefused, RequestRejected) as exc:
            tally.add(Outcome.FAILED)
            report.errors.append(f"{item.event_id}: {type(exc).__name__}: {exc}")
            log.warning(
                "backfill could not take an event",
                extra={"provider": provider.name, "event_id": item.event_id, "error": str(exc)},
            )
            continue
        key = (shaped.event.provider, shaped.event.event_id)
        if key in events:  # two listings of one event
            tally.add(Outcome.PRESENT)
            continue
        events[key] = shaped.event
        if not shaped.exact:
            inexact.add(key)
    if not events:
        return tally
    spans: dict[tuple[str, str], tracing.Span] = {}
    if tracing.ENABLED:  # each row and message carries its event's span
        traced_events, started = traced.recover_spans(events.values())
        events = {k: e for k, e in zip(events, traced_events, strict=True)}
        spans = {k: s for k, s in zip(events, started, strict=True) if s is not None}
    async with connection(parts.pool) as conn:
        inserted = await insert_events(conn, list(events.values()))  # the gate
    stored: list[StoredEvent] = []
    for key, event in events.items():
        if key in inserted:
            tally.add(Outcome.RECOVERED)
            tally.inexact += key in inexact
            _listed(report, event.event_id, event.event_type, Outcome.RECOVERED)
            stored.append(StoredEvent(inserted[key], event))
        else:  # a webhook or another run recorded it since the look-up
            tally.add(Outcome.PRESENT)
            if key in spans:
                traced.recover_done(spans.pop(key), Outcome.PRESENT.value)
    if inexact & set(inserted):
        log.warning(
            "recovered GitHub deliveries whose exact bytes could not be proven",
            extra={"provider": provider.name, "events": sorted(k[1] for k in inexact)[:100]},
        )
    published = await _publish(parts, stored, report)
    for key, span in spans.items():
        done = inserted[key] in published
        traced.recover_done(span, "published" if done else "unpublished")
    return tally


def _listed(report: BackfillReport, event_id: str, event_type: str | None, o: Outcome) -> None:
    if len(report.events) < _LISTED_MAX:
        report.events.append({"event_id": event_id, "event_type": event_type, "outcome": o.value})


async def _publish(
    parts: BackfillParts, stored: list[StoredEvent], report: BackfillReport
) -> set[int]:
    """Publish recovered rows now; any NATS trouble leaves them to the outbox relay. The
    webhook ids of the rows published."""
    publishable = [s for s in stored if s.event.subject is not None]
    if parts.publisher is None or report.unpublished or not publishable:
        report.unpublished += len(publishable) if parts.publisher is not None else 0
        return set()
    acked: list[int] = []
    try:
        await parts.publisher.connect()
        for item in publishable:
            await parts.publisher.publish(
                item.event.subject or "", item.event.body, message_headers(item)
            )
            acked.append(item.webhook_id)
    except BrokerUnavailable as exc:
        report.unpublished += len(publishable) - len(acked)
        log.warning(
            "NATS did not take recovered events; the outbox relay will publish them",
            extra={"provider": parts.provider.name, "error": str(exc)},
        )
    # Nothing is marked: the outbox relay publishes these rows too when its walk reaches
    # them, and the duplicate window absorbs it.
    return set(acked)
