"""The dead-letter area's documents and checks, shared by its pages, its API and its
export: a row's brief and its fields as JSON, its payload document (masked headers),
the resolve note, and the CLI commands a page offers to copy. Pure."""

from __future__ import annotations

import base64
import shlex
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

import orjson

from gateway.core.bodies.content import has_control_chars
from gateway.core.dlq.columns import Amount, severity_of
from gateway.core.dlq.model import DlqRow, RowBrief
from gateway.core.dlq.view import masked_headers, payload_view
from gateway.core.payload_text import shown_message
from gateway.errors import DlqUsageError

#: A note says what was done; a page of prose is not one.
MAX_NOTE_CHARS = 2000


def query_lists(items: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    """A query string or a form as each key's list of values."""
    lists: dict[str, list[str]] = {}
    for key, value in items:
        lists.setdefault(key, []).append(value)
    return lists


def instant(value: datetime | None) -> str | None:
    """A stored time in a document: ISO 8601 in UTC with a `Z`."""
    return None if value is None else value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def brief_doc(
    r: RowBrief, now: datetime, *, reads_payloads: bool, amount: Amount | None = None
) -> dict[str, Any]:
    """One row of a list, as `gateway dlq list --json` prints it, with the message, its
    severity and its amount. The message and the amount are payload-derived: a role that
    does not read payloads gets `null` for both and the message's length
    (`core.payload_text`)."""
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


def row_doc(row: DlqRow, *, with_stack: bool) -> dict[str, Any]:
    """Every stored field of a row but its payload and header values (what a viewer
    may see): the header names are listed, their values are the payload's document.

    The stack (`error_detail`) only `with_stack` (READ_PAYLOADS): it may quote the
    event (a library's exception text, a chained error, a frame's source line) up to
    32,000 characters. The message, too, only `with_stack` where it may quote the
    event (`core.payload_text`: a settlement message names the merchant or the amount it
    failed on); without, its length and that it was withheld."""
    shown = shown_message(row.error_message, row.stage, reads_payloads=with_stack)
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
    if with_stack:
        doc["error_detail"] = row.error_detail
    return doc


def payload_doc(row: DlqRow) -> dict[str, Any]:
    """A row's payload (base64, and as text when UTF-8), its digest and masked headers."""
    view = payload_view(row.payload, removed=row.payload_removed_at is not None)
    try:
        text: str | None = row.payload.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    return {
        "id": row.id,
        "form": str(view.form),
        "size_bytes": view.size_bytes,
        "sha256": view.sha256,
        "payload_base64": base64.b64encode(row.payload).decode("ascii"),
        "payload_text": text,
        "headers": {h.name: h.value for h in masked_headers(row.headers)},
    }


def export_doc(record: dict[str, Any]) -> dict[str, Any]:
    """One line of the NDJSON export: the stored fields; the payload as base64 and the
    headers masked when the export carries payloads. The export without payloads
    carries no payload-derived text: a message that may quote the event is withheld
    (its length kept), as it is from a viewer's list."""
    doc = {k: instant(v) if isinstance(v, datetime) else v for k, v in record.items()}
    if "payload" not in doc and "error_message" in doc:
        shown = shown_message(doc["error_message"], doc.get("stage"), reads_payloads=False)
        doc["error_message"] = shown.text
        doc["error_message_chars"] = shown.length_chars
        doc["error_message_withheld"] = shown.withheld
    if "payload" in doc:
        doc["payload_base64"] = base64.b64encode(bytes(record["payload"])).decode("ascii")
        del doc["payload"]
    if "headers" in doc:
        doc["headers"] = {h.name: h.value for h in masked_headers(orjson.loads(record["headers"]))}
    return doc


def parse_note(text: str | None) -> str:
    """The resolve note, as `gateway dlq resolve --note` requires one."""
    note = (text or "").strip()
    if not note:
        raise DlqUsageError("note: say what was done (it is kept as the cause)")
    if len(note) > MAX_NOTE_CHARS:
        raise DlqUsageError(f"note: at most {MAX_NOTE_CHARS} characters")
    if has_control_chars(note.replace("\n", " ").replace("\r", " ").replace("\t", " ")):
        raise DlqUsageError("note: must not hold control characters")
    return note


def cli_commands(row_id: int, is_resolved: bool) -> list[str]:
    """The commands that do from a shell what the page shows or offers."""
    commands = [f"gateway dlq show {row_id}"]
    if not is_resolved:
        commands += [
            f"gateway dlq replay --id {row_id} --dry-run",
            f"gateway dlq replay --id {row_id}",
            f"gateway dlq resolve {row_id} --note {shlex.quote('what was done')}",
        ]
    return commands
