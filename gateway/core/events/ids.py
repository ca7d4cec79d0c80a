"""What makes an event id usable as the idempotency key, one rule for both endpoints.

Usable means: a string or an integer (its decimal text), not blank once the blanks HTTP
trims are removed, at most `MAX_EVENT_ID_CHARS` characters, and free of control and other
non-printable characters. A publish to `/v1/events` without one is refused (400: our own
services fix their code). A verified webhook without one is recorded under its body
digest and parked as `EVENT_ID_INVALID` (`model.webhook_event`): a provider's signed body
is never refused for its content.
"""

from __future__ import annotations

from typing import Any

from gateway.core.bodies.content import has_control_chars
from gateway.core.signatures.base import FieldRef
from gateway.errors import BadRequest, EventIdMissing

MAX_EVENT_ID_CHARS = 255
#: What a JSON value other than a string or an integer is called in a dead letter.
_KINDS: dict[type, str] = {bool: "a boolean", float: "a fractional number", list: "an array"}


def as_text(value: Any) -> str | None:
    """A string or an integer as text, or None when absent, blank or of another type."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | str):
        # Only the blanks HTTP itself trims: `str.strip()` would also eat control
        # characters such as U+001C, turning an id that must be parked into an absent one.
        text = str(value).strip(" \t")
        return text or None
    return None


def event_id_problem(event_id: str | None) -> str | None:
    """Why `event_id` (as `as_text` reads it) cannot key the idempotency gate, or None."""
    if event_id is None:
        return "the event id cannot be found in the request"
    if len(event_id) > MAX_EVENT_ID_CHARS:
        return f"event id longer than {MAX_EVENT_ID_CHARS} characters"
    # Checked after the length, so it only ever scans a short string.
    if has_control_chars(event_id):
        return "event id contains control characters"
    return None


def check_event_id(event_id: str | None) -> str:
    """Return a usable event id or raise `EventIdMissing` / `BadRequest` (answered 400)."""
    problem = event_id_problem(event_id)
    if event_id is None:
        raise EventIdMissing(problem)
    if problem is not None:
        raise BadRequest(problem)
    return event_id


def read_event_id(ref: FieldRef, found: Any, body_is_object: bool) -> tuple[str | None, str]:
    """The usable id in `found` (what `ref` points at, as sent) and "", or None and why
    there is none, in words for the dead letter (`body_is_object`: False when a `json`
    ref points into a body that is JSON but not an object)."""
    event_id = as_text(found)
    if event_id is not None:
        problem = event_id_problem(event_id)
        return (None, problem) if problem is not None else (event_id, "")
    if ref.source == "json" and not body_is_object:
        return None, f"no event id: the body is JSON but not an object, so it has no {ref.where}"
    where, absent = ref.where, "absent" if ref.source == "header" else "absent or null"
    if found is None:
        return None, f"no event id: {where} is {absent}"
    if isinstance(found, str):
        return None, f"no event id: {where} is blank"
    held = _KINDS.get(type(found), "an object")
    return None, f"no event id: {where} is {held}, neither a string nor an integer"
