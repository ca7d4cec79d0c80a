"""The console's page cursors: an opaque, url-safe token of the last row's keyset
(its time and id), so the next page starts after it (never an OFFSET, which reads and
drops every row before the page).

Pure. A cursor is base64url of `[iso time, id]` without padding; anything else is
refused with `BadCursor`, whose message is the one line the user sees.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from datetime import datetime

import orjson

from gateway.core.operator_input import MAX_ROW_ID
from gateway.errors import UsageError

#: A cursor longer than this is not one the console gave out.
CURSOR_MAX_CHARS = 200


class BadCursor(UsageError):
    """A page cursor that the console did not give out (or that was altered)."""


@dataclass(frozen=True, order=True)
class Keyset:
    """Where a page ended: the last row's time and id (rows are ordered by both)."""

    at: datetime
    id: int


def encode_cursor(key: Keyset) -> str:
    raw = orjson.dumps([key.at.isoformat(), key.id])
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def decode_cursor(text: str) -> Keyset:
    """The keyset a cursor carries; `BadCursor` for anything else."""
    refused = BadCursor("cursor: not a page cursor of this console; start from the first page")
    if not text or len(text) > CURSOR_MAX_CHARS:
        raise refused
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        at_text, row_id = orjson.loads(raw)
        at = datetime.fromisoformat(at_text)
    except (binascii.Error, ValueError, TypeError, orjson.JSONDecodeError):
        raise refused from None
    if at.tzinfo is None or not isinstance(row_id, int) or not 0 < row_id <= MAX_ROW_ID:
        raise refused
    return Keyset(at, row_id)


@dataclass(frozen=True)
class KeyKeyset:
    """Where a page of held keys ended: the hold's start, then the key itself."""

    at: datetime
    provider: str
    order_key: str


def encode_key_cursor(key: KeyKeyset) -> str:
    raw = orjson.dumps([key.at.isoformat(), key.provider, key.order_key])
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def decode_key_cursor(text: str) -> KeyKeyset:
    """The keyset a held-keys cursor carries; `BadCursor` for anything else."""
    refused = BadCursor("cursor: not a page cursor of this console; start from the first page")
    # A key is at most 200 bytes; its provider short: a cursor stays well under 1 KiB.
    if not text or len(text) > 4 * CURSOR_MAX_CHARS:
        raise refused
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        at_text, provider, order_key = orjson.loads(raw)
        at = datetime.fromisoformat(at_text)
    except (binascii.Error, ValueError, TypeError, orjson.JSONDecodeError):
        raise refused from None
    if at.tzinfo is None or not isinstance(provider, str) or not isinstance(order_key, str):
        raise refused
    return KeyKeyset(at, provider, order_key)
