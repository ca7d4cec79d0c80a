"""What a backfill pass does when a page, or an entry of one, cannot be used.

- An entry whose bytes could not even be had is counted `failed` with one line.
- An entry recorded and parked (`shape`) is logged and counted in `gateway_dlq_total`.
- A page that fails (the API refuses it, answers what is not its listing, too much, too
  slowly, a redirect, an untrusted certificate) is counted on its progress row. The pass
  fails, as before, unless this made `api_page_attempts` failed passes in a row: then
  the row is skipped (sql/011), the skip is logged at error level and counted in
  `gateway_backfill_pages_skipped_total` (the `GatewayBackfillPageSkipped` rule; the
  in-process alerts read the row itself: `backfill_page_skipped`), and the pass goes
  on. A credentials failure (401/403) never counts: it is no page's fault, and
  skipping would skip everything.
- A fetch of one event that keeps failing (GitHub) fails its page the same way.
- A bound of the pass reached (`api_max_pages`, `api_max_pass_s`) stops it between
  pages, its cursor saved: the next pass continues from there.
"""

from __future__ import annotations

import logging

from gateway.adapters.postgres import backfill as progress
from gateway.adapters.postgres import connection
from gateway.backfill.parts import BackfillParts, BackfillReport
from gateway.core.backfill.decisions import Outcome, Tally, Window
from gateway.core.events.model import Event, Stage
from gateway.errors import ErrorClass, GatewayError

log = logging.getLogger(__name__)


def unusable(parts: BackfillParts, report: BackfillReport, lines: list[str]) -> Tally:
    """Entries the page could not even record: each counted failed, with its line."""
    tally = Tally()
    for line in lines:
        tally.add(Outcome.FAILED)
        report.failed(f"(entry) {line}")
        log.warning(
            "backfill could not take a listing entry",
            extra={"provider": parts.provider.name, "error": line},
        )
    return tally


def parked(parts: BackfillParts, event: Event) -> None:
    """A malformed entry recorded and parked at stage `ingest`."""
    if event.failure is None:
        return
    parts.metrics.dlq_total.inc(stage=Stage.INGEST.value, error_class=event.failure.error_class)
    log.warning(
        "backfill recorded a malformed entry and parked it",
        extra={
            "provider": event.provider,
            "event_id": event.event_id,
            "error_class": event.failure.error_class,
            "error": event.failure.message,
        },
    )


async def page_failed(
    parts: BackfillParts,
    report: BackfillReport,
    window: Window,
    cursor: str | None,
    exc: GatewayError,
) -> bool:
    """Count the failed page on its row; True when that skipped the row (go on)."""
    name = parts.provider.name
    attempts = parts.limits.page_attempts
    line = f"{type(exc).__name__}: {exc}"
    async with connection(parts.pool) as conn:
        failed = await progress.page_failed(conn, name, window, line, attempts)
    if failed < attempts:
        log.warning(
            "backfill page failed; the next pass tries it again",
            extra={
                "provider": name,
                "cursor": cursor,
                "failed_passes": failed,
                "page_attempts": attempts,
                "error": line,
            },
        )
        return False
    skipped = (
        f"{window.since.isoformat()} .. {window.until.isoformat()} from cursor {cursor!r}: "
        f"failed {failed} passes in a row ({line}); the rest of this window was not read"
    )
    report.skipped.append(skipped)
    parts.metrics.backfill_pages_skipped_total.inc(provider=name)
    log.error(
        "backfill page skipped after failing every pass",
        extra={
            "provider": name,
            "error_class": ErrorClass.BACKFILL_PAGE_SKIPPED,
            "since": window.since.isoformat(),
            "until": window.until.isoformat(),
            "cursor": cursor,
            "failed_passes": failed,
            "error": line,
        },
    )
    return True


def stopped(
    parts: BackfillParts, report: BackfillReport, window: Window, cursor: str | None
) -> None:
    """The pass reached a bound before the end of `window`."""
    log.warning(
        "backfill pass stopped at its bound; the next pass continues from the cursor",
        extra={
            "provider": parts.provider.name,
            "bound": report.stopped,
            "pages": report.pages,
            "since": window.since.isoformat(),
            "until": window.until.isoformat(),
            "cursor": cursor,
        },
    )
