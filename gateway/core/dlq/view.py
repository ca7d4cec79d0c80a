"""What a dead letter's page shows of its stored request: headers with credentials
masked, the payload pretty-printed, as text, or as hex, its size and digest, and the
trace it belongs to. Pure: bytes and mappings in, plain values out.

Everything here is provider-controlled and hostile: the console escapes it when it
renders (autoescape), and this module never marks anything as markup. What it decides
is what may be shown at all (masked headers) and in which form (hex for bytes that are
not UTF-8, so a byte the browser would mangle or hide is visible as itself).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

import orjson

from gateway.core.trace_context import HEADER as TRACEPARENT
from gateway.core.trace_context import parse_traceparent

MASKED = "[masked]"
#: Headers whose whole name is a credential or a signature.
_SECRET_NAMES = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "cookie",
        "set-cookie",
        "signature",
        "webhook-signature",
        "x-shopify-hmac-sha256",
        "paddle-signature",
        "stripe-signature",
    }
)
#: Endings and beginnings of such names (`X-Acme-Signature`, `X-Hub-Signature-256`).
_SECRET_SUFFIXES = ("-signature",)
_SECRET_PREFIXES = ("x-hub-signature",)
#: Parts of names that may carry one whatever the provider called it (an `hmac`
#: provider's signature header can have any name), as `gateway dlq show` hides them.
_SECRET_PARTS = ("signature", "hmac", "auth", "cookie", "token", "secret", "api-key")
#: The most bytes a page shows in its views; the download has all of them.
SHOWN_MAX_BYTES = 256 * 1024


def secret_header(name: str) -> bool:
    """True for a header whose value may be a credential or a signature."""
    low = name.strip().lower()
    return (
        low in _SECRET_NAMES
        or low.endswith(_SECRET_SUFFIXES)
        or low.startswith(_SECRET_PREFIXES)
        or any(part in low for part in _SECRET_PARTS)
    )


@dataclass(frozen=True)
class HeaderLine:
    name: str
    value: str  # MASKED for a secret one
    masked: bool


def masked_headers(headers: Mapping[str, object]) -> list[HeaderLine]:
    """The stored headers, sorted by name, every secret value replaced by `MASKED`."""
    lines = []
    for name, value in sorted(headers.items(), key=lambda kv: kv[0].lower()):
        hide = secret_header(name)
        shown = value if isinstance(value, str) else orjson.dumps(value).decode()
        lines.append(HeaderLine(name, MASKED if hide else shown, hide))
    return lines


def trace_id(headers: Mapping[str, object], stored: str | None = None) -> str | None:
    """The W3C trace id (32 hex digits) of the request, from its `traceparent` header
    or the value the event's row kept; None when neither is a valid one."""
    for value in (
        next((v for k, v in headers.items() if k.lower() == TRACEPARENT), None),
        stored,
    ):
        parsed = parse_traceparent(value) if isinstance(value, str) else None
        if parsed is not None:
            return f"{parsed.trace_id:032x}"
    return None


class PayloadForm(StrEnum):
    """How a payload can be shown."""

    JSON = "json"  # valid JSON: pretty-printed on the server
    TEXT = "text"  # UTF-8 that is not JSON
    HEX = "hex"  # not UTF-8: shown as bytes
    REMOVED = "removed"  # emptied by retention


@dataclass(frozen=True)
class PayloadView:
    form: PayloadForm
    size_bytes: int
    sha256: str
    pretty: str  # indented JSON, the text, or the hex dump
    raw: str  # the text as received, or the hex dump
    truncated: bool  # the views show the first SHOWN_MAX_BYTES only


def hex_dump(data: bytes) -> str:
    """Offset, 16 bytes in hex, and the printable ASCII of each line."""
    lines = []
    for at in range(0, len(data), 16):
        chunk = data[at : at + 16]
        hexes = " ".join(f"{b:02x}" for b in chunk)
        text = "".join(chr(b) if 0x20 <= b < 0x7F else "." for b in chunk)
        lines.append(f"{at:08x}  {hexes:<47}  {text}")
    return "\n".join(lines)


def payload_view(payload: bytes, *, removed: bool = False) -> PayloadView:
    """The views of a stored payload, its size and SHA-256."""
    digest = hashlib.sha256(payload).hexdigest()
    if removed:
        return PayloadView(PayloadForm.REMOVED, len(payload), digest, "", "", False)
    shown, truncated = payload[:SHOWN_MAX_BYTES], len(payload) > SHOWN_MAX_BYTES
    try:
        text = shown.decode("utf-8")
    except UnicodeDecodeError:
        dump = hex_dump(shown)
        return PayloadView(PayloadForm.HEX, len(payload), digest, dump, dump, truncated)
    if not truncated:
        try:
            # orjson parses deeper nesting than it writes: such a payload is text.
            pretty = orjson.dumps(orjson.loads(payload), option=orjson.OPT_INDENT_2).decode()
            return PayloadView(PayloadForm.JSON, len(payload), digest, pretty, text, False)
        except (orjson.JSONDecodeError, orjson.JSONEncodeError):
            pass
    return PayloadView(PayloadForm.TEXT, len(payload), digest, text, text, truncated)
