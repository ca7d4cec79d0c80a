"""The dead-letter area's documents and checks, shared by its pages, its API and its
export: its payload document (masked headers), an export line, the resolve note, and
the CLI commands a page offers to copy. A row's brief and fields are the CLI's
(`core.dlq.public`). Pure."""

from __future__ import annotations

import base64
import shlex
from collections.abc import Iterable
from datetime import datetime
from typing import Any

import orjson

from gateway.core.bodies.content import has_control_chars
from gateway.core.dlq.model import DlqRow
from gateway.core.dlq.view import masked_headers, payload_view
from gateway.core.instants import instant
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
