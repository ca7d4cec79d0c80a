"""How the operator commands print: aligned tables, times and ages, JSON documents, and
stored payloads and headers made safe for a terminal. Pure, values in and text out, but
for `print_json`, which writes its document to stdout.

The pages of each command (`cli.pages`) are built from these; `dlq.progress` draws on
the terminal while a replay runs.
"""

from __future__ import annotations

import base64
import sys
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import orjson

from gateway.core.bodies.content import NEVER_STORED

#: Parts of header names that carry credentials or signatures. Rows recorded before the
#: header allow-list kept every header (an `hmac` provider's signature header has any
#: name), so `show` hides these whatever the row holds.
_SECRET_NAME_PARTS = ("signature", "hmac", "auth", "cookie", "token", "secret", "api-key")
REDACTED = "[redacted]"
_JSON_OPTIONS = orjson.OPT_INDENT_2 | orjson.OPT_UTC_Z
_EVENT_ID_CHARS = 40


def safe(text: str) -> str:
    """Provider-controlled text made harmless for a terminal (no escape sequences)."""
    return "".join(c if c.isprintable() or c in "\n\t" else f"\\x{ord(c):02x}" for c in text)


def when(value: datetime | None) -> str:
    """A stored time as the tables print it (UTC, to the second), `-` when there is none."""
    return "-" if value is None else value.strftime("%Y-%m-%dT%H:%M:%SZ")


def format_age(seconds: float) -> str:
    """A compact age for tables: `42s`, `5m`, `2h05m`, `3d04h`."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m"
    if s < 86_400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86_400}d{s % 86_400 // 3600:02d}h"


def ago(value: datetime, now: datetime) -> str:
    """How long before `now` `value` was, in words for a page: `2h05m ago`."""
    return format_age((now - value).total_seconds()) + " ago"


def short(text: str, width: int = _EVENT_ID_CHARS) -> str:
    """`text` cut to `width` characters for a table column, marked with `…` when cut."""
    return text if len(text) <= width else text[: width - 1] + "…"


def table(headings: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Left-aligned columns, two spaces apart, headings in capitals."""
    cells = [[h.upper() for h in headings]] + [[safe(str(v)) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headings))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells
    )


def dumps(doc: object) -> str:
    """A `--json` document: indented, times in UTC with a `Z`."""
    return orjson.dumps(doc, option=_JSON_OPTIONS).decode()


def print_json(doc: object) -> None:
    """One JSON document on stdout, indented for a person, parseable by `jq` (times as
    they are: the documents of `ledger`, `backfill` and the like carry their offsets)."""
    sys.stdout.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n")
    sys.stdout.flush()


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


def payload_doc(payload: bytes, payload_removed_at: datetime | None) -> dict[str, Any]:
    """A stored payload in a `show --json` document: its format and value, or `removed`
    (and nothing shown) once retention emptied it."""
    if payload_removed_at is not None:
        return {"payload_format": "removed", "payload": None}
    payload_format, value = decode_payload(payload)
    return {"payload_format": payload_format, "payload": value}


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
