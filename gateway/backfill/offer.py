"""One page's wanted events through the idempotency gate: each missing one fetched,
shaped as its webhook would have been (or as a parked entry), recorded once, and what
was recorded published at once (`publish`)."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

from gateway.adapters.postgres import backfill as progress
from gateway.adapters.postgres import connection
from gateway.adapters.postgres.webhooks import StoredEvent, record_events
from gateway.adapters.provider_api import Listed
from gateway.backfill import pages, traced
from gateway.backfill.parts import BackfillParts, BackfillReport
from gateway.backfill.publish import publish_recovered
from gateway.backfill.shape import shape
from gateway.core.backfill.decisions import Outcome, Tally
from gateway.core.events.model import Event
from gateway.errors import ProviderApiRefused, RequestRejected

log = logging.getLogger(__name__)


async def offer(
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
            report.listed(item.event_id, item.event_type, Outcome.WOULD_RECOVER)
        return tally
    events: dict[tuple[str, str], Event] = {}
    inexact: set[tuple[str, str]] = set()
    now = datetime.now(UTC)
    for item in missing:
        try:
            if item.body is None:
                await pace()  # a second call per event (GitHub)
            fetched = await parts.source.fetch(item)
            shaped = shape(provider, item, fetched, now, parts.max_body_bytes, parts.ordered)
        except (ProviderApiRefused, RequestRejected) as exc:
            tally.add(Outcome.FAILED)
            shown = item.event_id or f"delivery {item.handle}"
            report.failed(f"{shown}: {type(exc).__name__}: {exc}")
            log.warning(
                "backfill could not take an event",
                extra={"provider": provider.name, "event_id": shown, "error": str(exc)},
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
    # Each row and message carries its event's span (None: tracing off, or not sampled).
    traced_events, started = traced.recover_spans(events.values())
    events = dict(zip(events, traced_events, strict=True))
    spans = dict(zip(events, started, strict=True))
    async with connection(parts.pool) as conn:
        rows = await record_events(conn, list(events.values()))  # the gate
    inserted = {key: row.webhook_id for key, row in rows.items()}
    stored: list[StoredEvent] = []
    for key, event in events.items():
        if key in inserted:
            tally.add(Outcome.RECOVERED)
            tally.inexact += key in inexact
            report.listed(event.event_id, event.event_type, Outcome.RECOVERED)
            # With its number: published now, the message must carry it.
            numbered = dataclasses.replace(event, key_seq=rows[key].key_seq)
            stored.append(StoredEvent(inserted[key], numbered))
            if event.failure is not None:
                pages.parked(parts, event)
        else:  # a webhook or another run recorded it since the look-up
            tally.add(Outcome.PRESENT)
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


async def _publish(
    parts: BackfillParts, stored: list[StoredEvent], report: BackfillReport
) -> set[int]:
    """Publish recovered rows now; any NATS trouble leaves them to the outbox relay. The
    webhook ids of the rows published."""
    publishable = [s for s in stored if s.event.subject is not None]
    if parts.publisher is None or report.unpublished or not publishable:
        report.unpublished += len(publishable) if parts.publisher is not None else 0
        return set()
    acked, left = await publish_recovered(parts.pool, parts.publisher, publishable, parts.metrics)
    report.unpublished += left
    return acked
