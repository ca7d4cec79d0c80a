"""Stream messages the forwarder cannot read as events, and the dead letter that keeps one.

A message is an event to the forwarder when it carries what the relay writes on every
message it publishes (`adapters.jetstream.broker.message_headers`) and a delivery needs:
`Nats-Msg-Id`, `Gateway-Provider` (a sender's name), `Gateway-Event-Id` (printable, as
the relay writes it) and `Gateway-Received-At` (an ISO 8601 time). Any other message was
not published by the gateway as an event (a hand-made `nats pub`, a foreign publisher):
sending it would make up an identity nobody gave it, and leaving it unanswered brings it
back for ever, each copy holding one of the destination's `max_ack_pending` places.

Such a message is parked at the destination's stage under an id of its own, made of its
stream sequence and a digest of what it holds, so a redelivery of it (its answer lost)
finds its open row and no other message ever does; the row keeps its subject, headers
and body as the stream held them.

Header values reach us decoded as UTF-8 with U+FFFD where bytes were not UTF-8, so a
value that was not text is only caught where it breaks a rule (a sender's name, a time):
an event id may hold U+FFFD of its own (the relay's `printable` writes one for a
character a header cannot carry).

Pure: the headers, body, sequence and time come in; a reason or a dead letter goes out.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from datetime import datetime

import orjson

from gateway.core.bodies.content import NEVER_STORED, nul_free
from gateway.core.events.model import Event

MSG_ID_HEADER = "Nats-Msg-Id"
PROVIDER_HEADER = "Gateway-Provider"
EVENT_ID_HEADER = "Gateway-Event-Id"
EVENT_TYPE_HEADER = "Gateway-Event-Type"
RECEIVED_AT_HEADER = "Gateway-Received-At"

#: The headers every event message carries, in the order they are checked.
REQUIRED_HEADERS = (MSG_ID_HEADER, PROVIDER_HEADER, EVENT_ID_HEADER, RECEIVED_AT_HEADER)
#: A provider's name, or `service:NAME` for an internal publisher's events.
_SENDER = re.compile(r"(?:service:)?[A-Za-z0-9_-]+")
#: How a parked unreadable message's id starts: it is no event id a sender gave.
UNREADABLE_ID_PREFIX = "unreadable:"
#: Hex digits of the digest in that id: enough that two messages never share one.
_DIGEST_CHARS = 32


def unreadable_reason(headers: Mapping[str, str]) -> str | None:
    """Why a message with these headers is no event the forwarder can send; None when it
    is one. The reason names the header, never its value (values go nowhere but the row)."""
    for name in REQUIRED_HEADERS:
        if not headers.get(name, "").strip():
            return f"no {name} header"
    if not _SENDER.fullmatch(headers[PROVIDER_HEADER]):
        return f"{PROVIDER_HEADER} is not a provider or service name"
    if not headers[EVENT_ID_HEADER].isprintable():
        return f"{EVENT_ID_HEADER} holds a character a header cannot carry"
    try:
        datetime.fromisoformat(headers[RECEIVED_AT_HEADER])
    except ValueError:
        return f"{RECEIVED_AT_HEADER} is not an ISO 8601 time"
    return None


def unreadable_id(
    subject: str, headers: Mapping[str, str], body: bytes, stream_seq: int | None
) -> str:
    """`unreadable:<stream sequence>:<digest>`: the same for every delivery of one message,
    different for any other (a stream recreated numbers its messages from 1 again)."""
    digest = hashlib.sha256(orjson.dumps([subject, sorted(headers.items())]))
    digest.update(body)
    seq = "?" if stream_seq is None else str(stream_seq)
    return f"{UNREADABLE_ID_PREFIX}{seq}:{digest.hexdigest()[:_DIGEST_CHARS]}"


def unreadable_event(
    subject: str,
    headers: Mapping[str, str],
    body: bytes,
    stream_seq: int | None,
    now: datetime,
) -> Event:
    """What the dead letter of an unreadable message records: its subject, headers and
    body as the stream held them, under `unreadable_id`, with no ordering key (it holds
    none). The provider and the time are the headers' when they can be read.

    NULs are replaced (PostgreSQL refuses them) and credential headers left out
    (`NEVER_STORED`), as wherever the gateway stores headers.
    """
    provider = headers.get(PROVIDER_HEADER, "")
    received_at = now
    with_zone = _time(headers.get(RECEIVED_AT_HEADER, ""))
    if with_zone is not None:
        received_at = with_zone
    return Event(
        provider=provider if _SENDER.fullmatch(provider) else "",
        event_id=unreadable_id(subject, headers, body, stream_seq),
        event_type=nul_free(headers.get(EVENT_TYPE_HEADER, "")) or None,
        subject=nul_free(subject),
        headers={
            nul_free(name): nul_free(value)
            for name, value in headers.items()
            if name.lower() not in NEVER_STORED
        },
        body=body,
        received_at=received_at,
    )


def _time(text: str) -> datetime | None:
    """An ISO 8601 time with its zone (a stored time needs one), else None."""
    try:
        found = datetime.fromisoformat(text)
    except ValueError:
        return None
    return found if found.tzinfo is not None else None
