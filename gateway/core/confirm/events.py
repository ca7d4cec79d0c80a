"""The events a confirmed answer becomes. Pure.

Each `Confirmed` item the provider module found in the API's answer becomes an event of
the webhook's provider, recorded through the idempotency gate under its own id (so a
change already confirmed by an earlier fetch is a duplicate), with `source =
'confirmed'`. An item the gateway cannot publish (an id or type it refuses, a type off
the provider's allow-list, a body that is not a JSON object) is still recorded, and
parked at stage `ingest` as a webhook with the same fault would be.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import orjson

from gateway.core.bodies.content import body_digest_id
from gateway.core.events.ids import as_text, event_id_problem
from gateway.core.events.model import (
    Event,
    Failure,
    OrderedSubject,
    Source,
    type_failure,
    webhook_subject,
)
from gateway.core.ordering.keys import KeyRule, order_key_of
from gateway.core.providers.base import Confirmed
from gateway.core.type_patterns import type_allowed
from gateway.errors import ErrorClass


@dataclass(frozen=True)
class Shaping:
    """One provider's rules for the events its confirmations hold."""

    provider: str  # the configured name, `[providers.NAME]`
    event_types: tuple[str, ...] | None = None
    order_rules: tuple[KeyRule, ...] = ()
    ordered: OrderedSubject | None = None


def confirmed_events(
    shaping: Shaping, items: Sequence[Confirmed], received_at: datetime
) -> list[Event]:
    """The events of `items`, in their order, repeats of one id after its first dropped
    (the gate takes each (provider, event_id) once per statement)."""
    events: list[Event] = []
    seen: set[str] = set()
    for item in items:
        event = _event(shaping, item, received_at)
        if event.event_id not in seen:
            seen.add(event.event_id)
            events.append(event)
    return events


def _event(shaping: Shaping, item: Confirmed, received_at: datetime) -> Event:
    doc: object
    try:
        doc = orjson.loads(item.body)
    except orjson.JSONDecodeError:
        doc = None
    id_problem = _id_problem(item.event_id)
    event_id, failure = item.event_id, _failure(shaping, item, doc, id_problem)
    if id_problem is not None:  # kept under its digest, as a webhook is
        event_id = body_digest_id(item.body)
    subject = None if failure is not None else webhook_subject(shaping.provider, item.event_type)
    order_key = None
    ordered = shaping.ordered
    if subject is not None and shaping.order_rules and ordered is not None and ordered(subject):
        order_key = order_key_of(shaping.order_rules, item.event_type, doc)
    return Event(
        shaping.provider,
        event_id,
        item.event_type if failure is None else _kept_type(item.event_type),
        subject,
        {},
        item.body,
        received_at,
        failure,
        source=Source.CONFIRMED,
        order_key=order_key,
    )


def _id_problem(event_id: str) -> str | None:
    """Why the id cannot key the gate, read as a webhook's is (blank is absent)."""
    text = as_text(event_id)
    return event_id_problem(text) if text == event_id else "the event id is blank or padded"


def _failure(
    shaping: Shaping, item: Confirmed, doc: object, id_problem: str | None
) -> Failure | None:
    """Why the item goes no further than its row, or None."""
    if id_problem is not None:
        return Failure(ErrorClass.EVENT_ID_INVALID, id_problem)
    if type(doc) is not dict:
        return Failure(ErrorClass.PAYLOAD_NOT_OBJECT, "the confirmed body is not a JSON object")
    failure = type_failure(as_text(item.event_type))
    if failure is not None:
        return failure
    if shaping.event_types is not None and not type_allowed(item.event_type, shaping.event_types):
        return Failure(
            ErrorClass.EVENT_TYPE_NOT_ALLOWED,
            f"event type {item.event_type!r} matches none of the provider's event_types",
        )
    return None


def _kept_type(event_type: str) -> str | None:
    """The type stored beside a failure, as a webhook's is: a usable one kept."""
    return event_type if type_failure(as_text(event_type)) is None else None
