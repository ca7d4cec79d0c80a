"""How `gateway events` prints: the table, the `show` page and JSON documents. Pure: text
in, text out, with the DLQ commands' helpers (secret headers redacted, provider text made
harmless for a terminal)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gateway.adapters.postgres.events import EventBrief, EventRow
from gateway.dlq.format import decode_payload, record_lines, shown_headers, table, when

_EVENT_ID_CHARS = 40


def _short(text: str, width: int = _EVENT_ID_CHARS) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _published(r: EventBrief) -> str:
    """Whether the event is on the stream, in words."""
    return {
        "published": "yes",
        "waiting": "not yet (in the outbox)",
        "parked": "no (parked: see gateway dlq)",
        "no subject": "never (no subject)",
    }.get(r.publish_state, r.publish_state)


def brief_table(rows: Sequence[EventBrief]) -> str:
    """The `list` table: no body, no headers."""
    return table(
        ("id", "provider", "event id", "type", "source", "received", "published"),
        [
            (
                r.id,
                r.provider,
                _short(r.event_id),
                r.event_type or "-",
                r.source,
                when(r.received_at),
                _published(r),
            )
            for r in rows
        ],
    )


def brief_doc(r: EventBrief) -> dict[str, Any]:
    return {
        "id": r.id,
        "provider": r.provider,
        "event_id": r.event_id,
        "event_type": r.event_type,
        "subject": r.subject,
        "source": r.source,
        "received_at": r.received_at,
        "publish_state": r.publish_state,
        "payload_removed_at": r.payload_removed_at,
    }


def row_doc(row: EventRow) -> dict[str, Any]:
    """Everything `show --json` prints about an event (secret headers redacted)."""
    doc = brief_doc(row.brief) | {
        "publish_attempts": row.publish_attempts,
        "headers": shown_headers(row.headers),
    }
    if row.brief.payload_removed_at is not None:
        return doc | {"payload_format": "removed", "payload": None}
    payload_format, payload = decode_payload(row.body)
    return doc | {"payload_format": payload_format, "payload": payload}


def show_page(row: EventRow) -> str:
    """The `show` page: the row's fields, then its headers and body."""
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
