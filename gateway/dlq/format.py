"""How the DLQ commands print: aligned tables, the `show` page and JSON documents. Pure:
text in, text out (`dlq.progress` draws on the terminal while a replay runs)."""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import orjson

from gateway.adapters.postgres.dead_letters import DlqStats
from gateway.core.content import NEVER_STORED
from gateway.core.dlq_filters import format_age
from gateway.core.dlq_model import DlqRow, RowBrief
from gateway.dlq.plan import RowResult

_EVENT_ID_CHARS = 40
#: Parts of header names that carry credentials or signatures. Rows recorded before the
#: header allow-list kept every header (an `hmac` provider's signature header has any
#: name), so `show` hides these whatever the row holds.
_SECRET_NAME_PARTS = ("signature", "hmac", "auth", "cookie", "token", "secret", "api-key")
REDACTED = "[redacted]"
_JSON_OPTIONS = orjson.OPT_INDENT_2 | orjson.OPT_UTC_Z


def safe(text: str) -> str:
    """Provider-controlled text made harmless for a terminal (no escape sequences)."""
    return "".join(c if c.isprintable() or c in "\n\t" else f"\\x{ord(c):02x}" for c in text)


def when(value: datetime | None) -> str:
    return "-" if value is None else value.strftime("%Y-%m-%dT%H:%M:%SZ")


def table(headings: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Left-aligned columns, two spaces apart, headings in capitals."""
    cells = [[h.upper() for h in headings]] + [[safe(str(v)) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headings))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells
    )


def _short(text: str, width: int = _EVENT_ID_CHARS) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def brief_table(rows: Sequence[RowBrief], now: datetime) -> str:
    """The `list` table: no payload, no message, nothing a sender could have put a secret in."""
    return table(
        ("id", "stage", "provider", "event id", "error class", "attempts", "age", "source"),
        [
            (
                r.id,
                r.stage,
                r.provider,
                _short(r.event_id),
                r.error_class,
                r.attempts,
                format_age((now - r.first_failed_at).total_seconds()),
                r.source or "-",
            )
            for r in rows
        ],
    )


def brief_doc(r: RowBrief, now: datetime) -> dict[str, Any]:
    return {
        "id": r.id,
        "stage": r.stage,
        "provider": r.provider,
        "event_id": r.event_id,
        "subject": r.subject,
        "source": r.source,
        "error_class": r.error_class,
        "attempts": r.attempts,
        "received_at": r.received_at,
        "first_failed_at": r.first_failed_at,
        "last_failed_at": r.last_failed_at,
        "age_s": round((now - r.first_failed_at).total_seconds(), 3),
        "is_resolved": r.is_resolved,
        "resolution": r.resolution,
    }


def dumps(doc: object) -> str:
    return orjson.dumps(doc, option=_JSON_OPTIONS).decode()


def decode_payload(payload: bytes) -> tuple[str, Any]:
    """("json", value) when the payload is JSON that can be printed again, ("text", str)
    when UTF-8, else base64.

    orjson parses 1024 levels of nesting but serializes only 254, so a deep payload is
    parsed, found unprintable, and shown as text (it is parked, and must stay readable).
    """
    try:
        value = orjson.loads(payload)
        orjson.dumps(value)
        return "json", value
    except (orjson.JSONDecodeError, orjson.JSONEncodeError):
        pass
    try:
        return "text", payload.decode("utf-8")
    except UnicodeDecodeError:
        return "base64", base64.b64encode(payload).decode()


def secret_header(name: str) -> bool:
    """True for a header that may carry a credential or a signature (never printed)."""
    name = name.lower()
    return name in NEVER_STORED or any(part in name for part in _SECRET_NAME_PARTS)


def shown_headers(headers: Mapping[str, Any]) -> dict[str, Any]:
    """`headers` with the value of every `secret_header` replaced by `[redacted]`."""
    return {k: REDACTED if secret_header(k) else v for k, v in headers.items()}


def row_doc(row: DlqRow) -> dict[str, Any]:
    """Everything `show --json` prints about a row (secret headers redacted)."""
    doc = {k: v for k, v in vars(row).items() if k != "payload"}
    doc["headers"] = shown_headers(row.headers)
    if row.payload_removed_at is not None:  # emptied by retention: say so, show nothing
        return doc | {"payload_format": "removed", "payload": None}
    payload_format, payload = decode_payload(row.payload)
    return doc | {"payload_format": payload_format, "payload": payload}


def record_lines(
    title: str,
    fields: Sequence[tuple[str, object]],
    headers: Mapping[str, str],
    payload: bytes,
    payload_removed_at: datetime | None,
) -> list[str]:
    """A stored event's page, for `dlq show` and `events show`: its fields, the headers
    kept (secrets redacted), then the payload as indented JSON or text, or when
    retention removed it."""
    lines = [title]
    lines += [f"  {name:<14} {safe(str(value))}" for name, value in fields]
    lines += ["", "headers"]
    shown = sorted(shown_headers(headers).items())
    lines += [f"  {safe(k)}: {safe(str(v))}" for k, v in shown] or ["  -"]
    if payload_removed_at is not None:
        return [*lines, "", f"payload removed at {when(payload_removed_at)} (retention)"]
    payload_format, decoded = decode_payload(payload)
    lines += ["", f"payload ({payload_format}, {len(payload)} bytes)"]
    if payload_format == "json":
        lines.append(safe(orjson.dumps(decoded, option=orjson.OPT_INDENT_2).decode()))
    else:
        lines.append(safe(str(decoded)))
    return lines


def show_page(row: DlqRow, now: datetime) -> str:
    """The `show` page: the row's fields, then headers, payload and stack."""
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
        ("first failure", f"{when(row.first_failed_at)} ({_ago(row.first_failed_at, now)})"),
        ("last failure", f"{when(row.last_failed_at)} ({_ago(row.last_failed_at, now)})"),
        ("resolution", resolution),
    ]
    lines = record_lines(
        f"dead letter {row.id}", fields, row.headers, row.payload, row.payload_removed_at
    )
    if row.error_detail:
        lines += ["", "stack", safe(row.error_detail.rstrip())]
    return "\n".join(lines)


def _ago(value: datetime, now: datetime) -> str:
    return format_age((now - value).total_seconds()) + " ago"


def stats_page(s: DlqStats, now: datetime) -> str:
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
    """`replay --json`: the counts and every row's outcome."""
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
