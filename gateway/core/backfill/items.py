"""Pure checks of one entry of a provider's event listing, for `gateway backfill`.

A listing is the provider's word, but one malformed entry must never stop a run: each
check says what is wrong with an entry (a `Failure` with a `BACKFILL_ITEM_*` class),
and the entry is then recorded and parked instead of offered to the stream. The first
failure found is kept: the entry's shape, then its id, then its time, then its bytes.

`encode` gives the bytes an entry is recorded with. orjson writes the webhook's own
form, but refuses nesting deeper than 254 and integers wider than 64 bits, and writes a
non-finite number as `null`; such an entry is written by the standard JSON encoder
instead (its value kept exactly) and parked, since those bytes are not the webhook's.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import orjson

from gateway.core.bodies.content import has_control_chars
from gateway.core.events.ids import MAX_EVENT_ID_CHARS
from gateway.core.events.model import Failure
from gateway.errors import ErrorClass

#: How much of a bad value a failure's message repeats.
_SHOWN_CHARS = 64


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + "..."


def not_object(entry: Any) -> Failure | None:
    """Why an entry is not an object the listing's rules can read, or None."""
    if isinstance(entry, dict):
        return None
    kinds: dict[type, str] = {str: "a string", list: "a list"}
    kind = kinds.get(type(entry), f"a {type(entry).__name__}")
    return Failure(
        ErrorClass.BACKFILL_ITEM_NOT_OBJECT, f"the listing's entry is {kind}, not an object"
    )


def entry_id(value: Any, field: str) -> tuple[str, Failure | None]:
    """The entry's id, or "" with the failure that makes it unusable."""
    if not isinstance(value, str) or not value.strip(" \t"):
        what = "missing" if value is None else f"not a non-empty string ({_shown(value)})"
        return "", Failure(ErrorClass.BACKFILL_ITEM_ID_INVALID, f"{field} is {what}")
    if len(value) > MAX_EVENT_ID_CHARS:
        return "", Failure(
            ErrorClass.BACKFILL_ITEM_ID_INVALID,
            f"{field} is longer than {MAX_EVENT_ID_CHARS} characters",
        )
    if has_control_chars(value):
        return "", Failure(
            ErrorClass.BACKFILL_ITEM_ID_INVALID, f"{field} holds a control character (a NUL, ...)"
        )
    return value, None


def entry_type(value: Any) -> str | None:
    """The listed type when it is text (the body's own type is what the gate reads)."""
    return value if isinstance(value, str) and value else None


def unix_time(value: Any, field: str) -> tuple[datetime | None, Failure | None]:
    """A time given as whole Unix seconds (Stripe's `created`)."""
    if not isinstance(value, int) or isinstance(value, bool):
        what = "missing" if value is None else f"not an integer ({_shown(value)})"
        return None, Failure(ErrorClass.BACKFILL_ITEM_TIME_INVALID, f"{field} is {what}")
    try:
        return datetime.fromtimestamp(value, UTC), None
    except (OverflowError, OSError, ValueError):
        return None, Failure(
            ErrorClass.BACKFILL_ITEM_TIME_INVALID, f"{field} is out of range ({_shown(value)})"
        )


def iso_time(value: Any, field: str) -> tuple[datetime | None, Failure | None]:
    """A time given as ISO 8601 text with its zone (`Z` or an offset)."""
    if not isinstance(value, str):
        what = "missing" if value is None else f"not a string ({_shown(value)})"
        return None, Failure(ErrorClass.BACKFILL_ITEM_TIME_INVALID, f"{field} is {what}")
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None, Failure(
            ErrorClass.BACKFILL_ITEM_TIME_INVALID,
            f"{field} is not an ISO 8601 time ({_shown(value)})",
        )
    if when.tzinfo is None:
        return None, Failure(
            ErrorClass.BACKFILL_ITEM_TIME_INVALID, f"{field} has no time zone ({_shown(value)})"
        )
    return when, None


def encode(doc: Any, *, indent: bool) -> tuple[bytes | None, Failure | None]:
    """The entry as its webhook's body (compact, or with two-space indents as Stripe
    sends), or as the standard encoder writes it with the failure saying why; None for
    bytes when no encoder can write it (nesting past the interpreter's limit)."""
    try:
        body = orjson.dumps(doc, option=orjson.OPT_INDENT_2 if indent else 0)
        # orjson writes NaN and infinities as null: exact only if it reads back the same.
        if orjson.loads(body) == doc:
            return body, None
    except (orjson.JSONEncodeError, orjson.JSONDecodeError):
        pass
    failure = Failure(
        ErrorClass.BACKFILL_ITEM_UNENCODABLE,
        "the entry cannot be written as its webhook was (nesting deeper than 254, an "
        "integer wider than 64 bits, a non-finite number or a lone surrogate); kept as "
        "the standard JSON encoder writes it",
    )
    separators = (",", ": ") if indent else (",", ":")
    for ascii_only in (False, True):  # a lone surrogate cannot be UTF-8: escape it
        try:
            text = json.dumps(
                doc, ensure_ascii=ascii_only, indent=2 if indent else None, separators=separators
            )
            return text.encode(), failure
        except UnicodeEncodeError:
            continue
        except (RecursionError, ValueError, TypeError):
            break
    return None, failure
