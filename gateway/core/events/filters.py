"""What an operator asked `gateway events` for: which accepted events, and how a replayed
one is told apart on the stream.

Pure: `now` and the replay's token are passed in. Every problem is an `EventsUsageError`
whose message is the one line the operator sees.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from gateway.core.events.model import Source
from gateway.core.operator_input import parse_ids, parse_instant
from gateway.core.type_patterns import TypePattern, parse_pattern
from gateway.errors import EventsUsageError, UsageError


@dataclass(frozen=True)
class EventFilter:
    """Which `processed_webhooks` rows a command applies to (empty tuples mean any)."""

    providers: tuple[str, ...] = ()
    types: tuple[TypePattern, ...] = ()
    since: datetime | None = None  # received at or after
    until: datetime | None = None  # received before
    ids: tuple[int, ...] = ()  # row ids
    event_ids: tuple[str, ...] = ()  # the provider's event ids
    source: str | None = None  # live | backfill

    @property
    def narrowed(self) -> bool:
        """True if any filter at all was given."""
        return bool(
            self.providers
            or self.types
            or self.since
            or self.until
            or self.ids
            or self.event_ids
            or self.source
        )


def parse_type(text: str) -> TypePattern:
    """`--type`: a pattern of `core.type_patterns`, the language of `event_types`, with
    the spaces an operator typed around it trimmed."""
    try:
        return parse_pattern(text.strip())
    except ValueError as exc:
        raise EventsUsageError(
            f"--type: {exc}; give a type exactly (invoice.paid) or a prefix ending in * (invoice.*)"
        ) from None


def build_event_filter(
    now: datetime,
    *,
    providers: Sequence[str] = (),
    types: Sequence[str] = (),
    since: str | None = None,
    until: str | None = None,
    ids: Sequence[str] = (),
    event_ids: Sequence[str] = (),
    source: str | None = None,
) -> EventFilter:
    """Check the filter flags together and turn them into an `EventFilter`."""
    try:
        start = parse_instant(since, now, "--since") if since else None
        end = parse_instant(until, now, "--until") if until else None
        row_ids = parse_ids(ids, "--id")
    except UsageError as exc:  # the shared syntax, reported as this command's mistake
        raise EventsUsageError(str(exc)) from None
    if start is not None and end is not None and start >= end:
        raise EventsUsageError("--since must be earlier than --until")
    known = [s.value for s in Source]
    if source is not None and source not in known:
        raise EventsUsageError(f"--source: {source!r} is not one of {', '.join(known)}")
    return EventFilter(
        providers=tuple(dict.fromkeys(p.strip() for p in providers if p.strip())),
        types=tuple(dict.fromkeys(parse_type(t) for t in types)),
        since=start,
        until=end,
        ids=row_ids,
        event_ids=tuple(dict.fromkeys(e.strip() for e in event_ids if e.strip())),
        source=source,
    )


def check_replay_choice(f: EventFilter, replay_all: bool) -> None:
    """A replay names its events: by --id / --event-id, or --all with filters (or none,
    for every accepted event, which --all must say out loud)."""
    chosen = bool(f.ids or f.event_ids)
    if chosen and replay_all:
        raise EventsUsageError("--id/--event-id and --all exclude each other; give one")
    if not chosen and not replay_all:
        raise EventsUsageError(
            "say which events: --id ID or --event-id ID (repeatable), or --all with filters "
            "such as --since 2h --provider stripe"
        )


# --- replay on the stream -------------------------------------------------------------

#: What follows `{provider}:{event_id}` in a replayed message's `Nats-Msg-Id`.
REPLAY_MARK = ":replay:"


def replay_msg_id(provider: str, event_id: str, token: str) -> str:
    """The de-duplication id of a replayed message: `{provider}:{event_id}:replay:{token}`.

    The original is `{provider}:{event_id}` (`Event.msg_id`); JetStream drops a second
    message with that id inside its duplicate window, which is exactly what a replay must
    get past. A fresh token per message lets it through once and keeps the replay itself
    idempotent against a retried publish of the same message.
    """
    return f"{provider}:{event_id}{REPLAY_MARK}{token}"


def skip_reason(subject: str | None, payload_removed_at: datetime | None) -> str | None:
    """Why a row cannot be re-published, or None when it can."""
    if payload_removed_at is not None:
        when = payload_removed_at.strftime("%Y-%m-%dT%H:%M:%SZ")
        return f"payload removed at {when} by retention: nothing to re-publish"
    if subject is None:
        return "no subject: the event was parked at ingest and never published (see gateway dlq)"
    return None
