"""The public JSON of a dead letter: one shape, printed by `gateway dlq list --json` and
`gateway dlq show --json` and answered by the console's API (`GET /console/api/v1/dlq`
and `/dlq/{id}`), so the two cannot drift. Pure: a row's model in, a document of JSON
values out (times as `core.instants` writes them).

What may quote the event is payload (`core.payload_text`): the message at every stage
but `publish`, the amount read from the body, the stack. Without `reads_payloads` a
document says that there is a message and how long it is, and carries neither the
amount nor the stack. The CLI reads with the database's own credentials (its `show`
prints the payload itself) and passes True, as an investigator's API answer does.

A row's payload and header values are in neither document: each reader shows them its
own way (`dlq show --json` inline and decoded, the API at `/dlq/{id}/payload`, masked
and in base64).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from gateway.core.dlq.columns import Amount, severity_of
from gateway.core.dlq.model import DlqRow, RowBrief
from gateway.core.instants import instant
from gateway.core.payload_text import shown_message


def brief_doc(
    r: RowBrief, now: datetime, *, reads_payloads: bool, amount: Amount | None = None
) -> dict[str, Any]:
    """One row of a list: `dlq list --json`, the API's list items. Its age at `now`, its
    severity, its message as the role may read it, and the amount its event would move
    (in minor units with its currency; null when unknown or not `reads_payloads`)."""
    shown = shown_message(r.error_message, r.stage, reads_payloads=reads_payloads)
    return {
        "id": r.id,
        "stage": r.stage,
        "provider": r.provider,
        "event_id": r.event_id,
        "subject": r.subject,
        "source": r.source,
        "error_class": r.error_class,
        "error_message": shown.text,
        "error_message_chars": shown.length_chars,
        "error_message_withheld": shown.withheld,
        "severity": severity_of(r.error_class).value,
        "amount": amount.doc() if amount is not None and reads_payloads else None,
        "attempts": r.attempts,
        "received_at": instant(r.received_at),
        "first_failed_at": instant(r.first_failed_at),
        "last_failed_at": instant(r.last_failed_at),
        "age_s": round((now - r.first_failed_at).total_seconds(), 3),
        "is_resolved": r.is_resolved,
        "resolution": r.resolution,
    }


def row_doc(row: DlqRow, *, reads_payloads: bool) -> dict[str, Any]:
    """Every stored field of one row but its payload and header values: `dlq show
    --json` (which adds those), the API's `/dlq/{id}`. The header names are listed.

    The stack (`error_detail`) only `reads_payloads`: it may quote the event (a
    library's exception text, a chained error, a frame's source line) up to 32,000
    characters, so the key is absent otherwise. The message likewise, where it may
    quote the event; without, its length and that it was withheld."""
    shown = shown_message(row.error_message, row.stage, reads_payloads=reads_payloads)
    doc: dict[str, Any] = {
        "id": row.id,
        "webhook_id": row.webhook_id,
        "stage": row.stage,
        "provider": row.provider,
        "event_id": row.event_id,
        "subject": row.subject,
        "source": row.source,
        "error_class": row.error_class,
        "error_message": shown.text,
        "error_message_chars": shown.length_chars,
        "error_message_withheld": shown.withheld,
        "severity": severity_of(row.error_class).value,
        "attempts": row.attempts,
        "auto_replays": row.auto_replays,
        "received_at": instant(row.received_at),
        "first_failed_at": instant(row.first_failed_at),
        "last_failed_at": instant(row.last_failed_at),
        "is_resolved": row.is_resolved,
        "resolved_at": instant(row.resolved_at),
        "resolution": row.resolution,
        "resolution_note": row.resolution_note,
        "resolved_by": row.resolved_by,
        "payload_removed_at": instant(row.payload_removed_at),
        "payload_size_bytes": len(row.payload),
        "header_names": sorted(row.headers, key=str.lower),
    }
    if reads_payloads:
        doc["error_detail"] = row.error_detail
    return doc
