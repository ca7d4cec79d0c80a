"""What `gateway dlq` and `gateway events` print: their `list` tables, `show` pages and
JSON documents, built from `cli.format`; a row's JSON is the console's API's
(`core.dlq.public`, `core.events.public`). Pure: values in, text out.

Nothing a sender controls reaches a table unescaped, and no table shows a payload,
a message or headers: a sender could have put a secret in any of them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from gateway.cli.format import (
    ago,
    format_age,
    payload_doc,
    record_lines,
    safe,
    short,
    shown_headers,
    table,
    when,
)
from gateway.core.dlq import public as dlq_public
from gateway.core.dlq.columns import Amount, severity_of
from gateway.core.dlq.model import DlqRow, DlqStats, RowBrief
from gateway.core.events import public as events_public
from gateway.core.events.rows import EventBrief, EventRow
from gateway.dlq.plan import RowResult

# --- gateway dlq -----------------------------------------------------------------------


def dead_letter_table(
    rows: Sequence[RowBrief], now: datetime, amounts: Mapping[int, Amount | None] | None = None
) -> str:
    """`dlq list`: one line per row, oldest failure first, with its severity, and the
    amount its event would move when `amounts` are given (blank when unknown)."""
    headings = ["id", "severity", "stage", "provider", "event id", "error class"]
    headings += ["amount"] if amounts is not None else []
    headings += ["attempts", "age", "source"]
    lines = []
    for r in rows:
        cells: list[object] = [r.id, severity_of(r.error_class), r.stage, r.provider]
        cells += [short(r.event_id), r.error_class]
        if amounts is not None:
            found = amounts.get(r.id)
            cells.append("-" if found is None else found.text())
        cells += [r.attempts, format_age((now - r.first_failed_at).total_seconds())]
        lines.append([*cells, r.source or "-"])
    return table(headings, lines)


def dead_letter_doc(r: RowBrief, now: datetime, amount: Amount | None = None) -> dict[str, Any]:
    """`dlq list --json`: one row as the console's API lists it (`core.dlq.public`), its
    message and amount included: the CLI reads what an investigator reads."""
    return dlq_public.brief_doc(r, now, reads_payloads=True, amount=amount)


def dead_letter_row_doc(row: DlqRow) -> dict[str, Any]:
    """`dlq show --json`: the row as the console's API answers it (`core.dlq.public`,
    the stack included), then the stored headers (secret values redacted) and the
    payload, decoded, which the API serves apart."""
    doc = dlq_public.row_doc(row, reads_payloads=True)
    doc["headers"] = shown_headers(row.headers)
    return doc | payload_doc(row.payload, row.payload_removed_at)


def dead_letter_page(row: DlqRow, now: datetime) -> str:
    """`dlq show`: the row's fields, then headers, payload and stack."""
    if row.is_resolved:
        resolution = f"{row.resolution or 'resolved'} at {when(row.resolved_at)}"
        if row.resolved_by:
            resolution += f" by {row.resolved_by}"
        if row.resolution_note:
            resolution += f": {row.resolution_note}"
    else:
        resolution = "open"
    fields = [
        ("stage", row.stage),
        ("provider", row.provider),
        ("event id", row.event_id),
        ("subject", row.subject or "-"),
        ("source", row.source or "-"),
        ("webhook row", row.webhook_id or "-"),
        ("error class", row.error_class),
        ("error", row.error_message),
        ("attempts", row.attempts),
        ("received", when(row.received_at)),
        ("first failure", f"{when(row.first_failed_at)} ({ago(row.first_failed_at, now)})"),
        ("last failure", f"{when(row.last_failed_at)} ({ago(row.last_failed_at, now)})"),
        ("resolution", resolution),
    ]
    lines = record_lines(
        f"dead letter {row.id}", fields, row.headers, row.payload, row.payload_removed_at
    )
    if row.error_detail:
        lines += ["", "stack", safe(row.error_detail.rstrip())]
    return "\n".join(lines)


def stats_page(s: DlqStats, now: datetime) -> str:
    """`dlq stats`: the counts, then the unresolved rows by stage and error class."""
    oldest = "-"
    if s.oldest_unresolved_at is not None:
        age = format_age((now - s.oldest_unresolved_at).total_seconds())
        oldest = f"{age} (since {when(s.oldest_unresolved_at)})"
    window = format_age(s.window_s)
    lines = [
        f"unresolved rows          {s.unresolved}",
        f"added in the last {window:<6} {s.added_in_window}",
        f"oldest unresolved        {oldest}",
    ]
    if s.by_class:
        lines += ["", table(("stage", "error class", "unresolved"), s.by_class)]
    return "\n".join(lines)


def stats_doc(s: DlqStats, now: datetime) -> dict[str, Any]:
    """`dlq stats --json`."""
    oldest = s.oldest_unresolved_at
    return {
        "unresolved": s.unresolved,
        "by_stage_error_class": [
            {"stage": stage, "error_class": cls, "unresolved": n} for stage, cls, n in s.by_class
        ],
        "added_in_window": s.added_in_window,
        "window_s": s.window_s,
        "oldest_unresolved_at": oldest,
        "oldest_unresolved_age_s": None if oldest is None else (now - oldest).total_seconds(),
    }


def replay_doc(results: Sequence[RowResult], dry_run: bool) -> dict[str, Any]:
    """`dlq replay --json`: the counts and every row's outcome."""
    counts = {"replayed": 0, "failed": 0, "skipped": 0, "would_replay": 0}
    rows = []
    for r in results:
        counts[r.outcome.value] += 1
        rows.append(
            {
                "id": r.row.id,
                "stage": r.row.stage,
                "provider": r.row.provider,
                "event_id": r.row.event_id,
                "outcome": r.outcome.value,
                "error_class": r.error_class,
                "message": r.message,
            }
        )
    return {"dry_run": dry_run, **counts, "rows": rows}


# --- gateway events --------------------------------------------------------------------


def _published(r: EventBrief) -> str:
    """Whether the event is on the stream, in words."""
    return {
        "published": "yes",
        "waiting": "not yet (in the outbox)",
        "parked": "no (parked: see gateway dlq)",
        "no subject": "never (no subject)",
    }.get(r.publish_state, r.publish_state)


def event_table(rows: Sequence[EventBrief]) -> str:
    """`events list`: no body, no headers."""
    return table(
        ("id", "provider", "event id", "type", "source", "received", "published"),
        [
            (
                r.id,
                r.provider,
                short(r.event_id),
                r.event_type or "-",
                r.source,
                when(r.received_at),
                _published(r),
            )
            for r in rows
        ],
    )


def event_doc(r: EventBrief) -> dict[str, Any]:
    """`events list --json`: one event as the console's API lists it
    (`core.events.public`)."""
    return events_public.brief_doc(r)


def event_row_doc(row: EventRow) -> dict[str, Any]:
    """`events show --json`: the event's own fields as the console's API answers them
    (`core.events.public`), then the stored headers (secret values redacted) and the
    body, decoded."""
    doc = events_public.row_doc(row) | {"headers": shown_headers(row.headers)}
    return doc | payload_doc(row.body, row.brief.payload_removed_at)


def event_page(row: EventRow) -> str:
    """`events show`: the event's fields, then its headers and body."""
    r = row.brief
    fields = [
        ("provider", r.provider),
        ("event id", r.event_id),
        ("type", r.event_type or "-"),
        ("subject", r.subject or "-"),
        ("source", r.source),
        ("received", when(r.received_at)),
        ("published", _published(r)),
        ("failed publishes", row.publish_attempts),
    ]
    return "\n".join(
        record_lines(f"event {r.id}", fields, row.headers, row.body, r.payload_removed_at)
    )
