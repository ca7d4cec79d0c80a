"""What the console's event log was asked for: the filter `gateway events list` reads
(parsed by the same `build_event_filter`), inside a required time window, with the
console's own additions: the publish state, JSON containment, and a page cursor.

Pure: `now` is passed in. Every problem is an `EventsUsageError` whose message is the
one line the user sees.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

import orjson

from gateway.core.events.filters import EventFilter, build_event_filter
from gateway.core.instants import instant
from gateway.core.keyset import BadCursor, Keyset, decode_cursor
from gateway.errors import EventsUsageError

#: The widest window one search may cover: a wider one would read months of events.
WINDOW_MAX = timedelta(days=31)
#: The window when none is given.
WINDOW_DEFAULT = timedelta(hours=24)
#: The largest containment document: it is matched against every body in the window.
CONTAINS_MAX_BYTES = 4096
#: How long a containment search may read: no index holds the bodies as JSON, so a
#: document that matches nothing reads the whole window (about 2.6 s per 155,000 events
#: measured on a 2-core machine); past this the search is refused, asking for a
#: narrower window, instead of holding a connection for minutes.
CONTAINS_TIMEOUT_S = 5.0
PAGE_DEFAULT = 50
PAGE_MAX = 200


class PublishState(enum.StrEnum):
    """Whether an event reached the stream, as `gateway events` names it."""

    PUBLISHED = "published"
    WAITING = "waiting"  # owed: still in the outbox
    PARKED = "parked"  # the relay gave up; a publish dead letter holds it
    NO_SUBJECT = "no subject"  # parked at ingest, never to be published


@dataclass(frozen=True)
class EventSearch:
    """One page of the event log: `filter.since` and `filter.until` are always set."""

    filter: EventFilter
    state: PublishState | None = None
    #: The containment document (checked JSON, as typed), or None.
    contains: str | None = None
    after: Keyset | None = None  # the last row of the previous page
    limit: int = PAGE_DEFAULT

    def query(self) -> list[tuple[str, str]]:
        """The search as query parameters (without the cursor): what a link to the
        same search, or to the replay planner with it, carries. Times are absolute, so
        the link means the same rows later."""
        f = self.filter
        pairs: list[tuple[str, str]] = [("provider", p) for p in f.providers]
        pairs += [("type", t.text) for t in f.types]
        if f.since is not None:
            pairs.append(("since", instant(f.since)))
        if f.until is not None:
            pairs.append(("until", instant(f.until)))
        pairs += [("id", str(i)) for i in f.ids]
        pairs += [("event_id", e) for e in f.event_ids]
        if f.source:
            pairs.append(("source", f.source))
        if self.state is not None:
            pairs.append(("state", self.state.value))
        if self.contains is not None:
            pairs.append(("contains", self.contains))
        return pairs


def _values(params: Mapping[str, Sequence[str]], name: str) -> list[str]:
    """The non-blank values of a parameter (an empty form field means "any")."""
    return [v for v in params.get(name, ()) if v.strip()]


def _one(params: Mapping[str, Sequence[str]], name: str) -> str | None:
    values = _values(params, name)
    if len(values) > 1:
        raise EventsUsageError(f"{name}: give it once")
    return values[0].strip() if values else None


def _unflag(message: str) -> str:
    """The shared parser speaks of `--since`; a form has fields named `since`."""
    return message.replace("--event-id", "event_id").replace("--", "")


def _has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_nul(v) for v in value)
    return False


def parse_contains(text: str) -> str:
    """A containment document: a JSON object or array of at most `CONTAINS_MAX_BYTES`,
    returned as typed (trimmed): PostgreSQL reads its numbers exactly, where a round
    trip through Python would turn a long integer into a float."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > CONTAINS_MAX_BYTES:
        raise EventsUsageError(
            f"contains: {size} bytes of JSON; at most {CONTAINS_MAX_BYTES} are matched"
        )
    try:
        value: Any = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise EventsUsageError(
            f"contains: not valid JSON ({exc.msg} at character {exc.pos}); "
            'give an object such as {"type": "invoice.paid"}'
        ) from None
    if not isinstance(value, dict | list):
        raise EventsUsageError(
            'contains: give a JSON object or array, such as {"data": {"object": {"id": "pi_1"}}}'
        )
    if _has_nul(value):  # jsonb cannot hold \u0000, so no stored body has one
        raise EventsUsageError("contains: \\u0000 matches no stored payload; remove it")
    return text.strip()


def window(
    since: datetime | None,
    until: datetime | None,
    now: datetime,
    default: timedelta = WINDOW_DEFAULT,
    widest: timedelta = WINDOW_MAX,
) -> tuple[datetime, datetime]:
    """The window searched: the last `default` when none is given, one end given moves
    the other `default` from it; wider than `widest` is refused."""
    if until is None:
        until = now if since is None or since < now else since + default
    if since is None:
        since = until - default
    width = until - since
    if width > widest:
        days = width.total_seconds() / 86_400
        raise EventsUsageError(
            f"the time window is {days:.1f} days wide; search at most "
            f"{widest.days} days at a time (narrow since and until)"
        )
    return since, until


def parse_limit(text: str | None) -> int:
    if text is None:
        return PAGE_DEFAULT
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= PAGE_MAX:
        raise EventsUsageError(f"limit: give a whole number from 1 to {PAGE_MAX}")
    return int(text)


def parse_event_search(params: Mapping[str, Sequence[str]], now: datetime) -> EventSearch:
    """The search a query string asks for (the event log's form, or the API)."""
    try:
        f = build_event_filter(
            now,
            providers=_values(params, "provider"),
            types=_values(params, "type"),
            since=_one(params, "since"),
            until=_one(params, "until"),
            ids=_values(params, "id"),
            event_ids=_values(params, "event_id"),
            source=_one(params, "source"),
        )
    except EventsUsageError as exc:
        raise EventsUsageError(_unflag(str(exc))) from None
    since, until = window(f.since, f.until, now)
    state_text = _one(params, "state")
    known = [s.value for s in PublishState]
    if state_text is not None and state_text not in known:
        raise EventsUsageError(f"state: {state_text!r} is not one of {', '.join(known)}")
    contains_text = _one(params, "contains")
    cursor = _one(params, "cursor")
    try:
        after = decode_cursor(cursor) if cursor else None
    except BadCursor as exc:
        raise EventsUsageError(str(exc)) from None
    return EventSearch(
        filter=replace(f, since=since, until=until),
        state=None if state_text is None else PublishState(state_text),
        contains=None if contains_text is None else parse_contains(contains_text),
        after=after,
        limit=parse_limit(_one(params, "limit")),
    )
