"""Stripe's thin events (event destinations): the `stripe_thin` provider. Pure.

An event destination with the thin payload sends a notification that names the object
that changed instead of carrying it (docs.stripe.com/event-destinations, "thin events";
for API v1 resources a private preview): `{"id": "evt_…", "object": "v2.core.event",
"type": "v1.payment_intent.succeeded", "created": "…", "livemode": false, "context":
"acct_…" or null, "related_object": {"id": "pi_…", "type": "payment_intent", "url":
"/v1/payment_intents/pi_…"}}`. It is signed as Stripe signs every webhook
(`Stripe-Signature: t=…,v1=…` over `{t}.{body}`), with the destination's own secret,
so a thin destination is a provider of its own: a snapshot endpoint's secret does not
verify it, nor the other way round (the mix-up of stripe-node #2337).

A thin event of a v1 type that moves money (the `stripe` provider's `MOVEMENT_TYPES`
with `v1.` in front) waits for the confirm stage, which fetches its related object from
`related_object.url` (with `Stripe-Context: {context}` for a connected account, as
stripe-python's `fetch_related_object` sends it) and records the event again in the
snapshot shape, `{"id": "evt_…", "object": "event", "type": "payment_intent.succeeded",
"account": context, "data": {"object": OBJECT}}`, under `evt_…:confirmed`: the
`stripe` provider's movements settle it as they settle a snapshot event. Every other
thin event (v2 types, v1 types that move nothing) is published as it came.

The object fetched is its state now, not at the event's time, so only movements that
read fields fixed once the object exists, or running totals the settlement nets
(`charge.refunded`'s `amount_refunded`), are taken: the same as the snapshot provider's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import orjson

from gateway.core.ordering.keys import parse_rules
from gateway.core.providers.base import Confirmation, Confirmed, Movements, Provider
from gateway.core.providers.stripe.snapshot import MOVEMENT_TYPES, UNITS, instruction
from gateway.core.signatures.timestamped import TimestampedPairsScheme
from gateway.errors import ConfirmationMismatch, PayloadInvalid

#: A thin event's type for a v1 resource: the snapshot type behind this prefix.
V1_PREFIX = "v1."
#: The suffix of a confirmed event's id.
CONFIRMED_SUFFIX = ":confirmed"
#: `related_object.url`: a v1 resource by its id, nothing else (no query, no `..`).
_URL = re.compile(r"/v1/[a-z_]{1,40}(?:/[a-z_]{1,40})?/[A-Za-z0-9_]{1,255}", re.ASCII)
#: `context`: an account, or a path of them (`acct_1/acct_2`, stripe-python's
#: `StripeContext`), the last the one the event happened on.
_CONTEXT = re.compile(r"acct_[A-Za-z0-9]{1,64}(?:/acct_[A-Za-z0-9]{1,64}){0,7}", re.ASCII)
_TEXT_MAX = 255


def awaits(event_type: str) -> bool:
    """Whether a thin event of `event_type` waits for its related object's fetch."""
    return event_type.startswith(V1_PREFIX) and event_type[len(V1_PREFIX) :] in MOVEMENT_TYPES


def auth(key: str) -> Mapping[str, str]:
    """A secret or restricted key (one that may read the objects) as a bearer token."""
    return {"Authorization": f"Bearer {key}"}


def locate(doc: Any) -> str:
    """`related_object.url`, once it is a v1 resource's path ending in its id."""
    return _related(doc)[1]


def headers(doc: Any) -> Mapping[str, str]:
    """`Stripe-Context` for an event of a connected account (its `context`)."""
    context = _context(doc)
    return {} if context is None else {"Stripe-Context": context}


def confirmed(doc: Any, answer: Any) -> tuple[Confirmed, ...]:
    """The thin event again, in the snapshot shape, with the fetched object."""
    (object_id, _), event = _related(doc), doc
    if not isinstance(answer, Mapping):
        raise PayloadInvalid("the answer is not an object")
    if answer.get("id") != object_id or answer.get("object") != doc["related_object"]["type"]:
        found = answer.get("id")
        shown = found[:_TEXT_MAX] if isinstance(found, str) else type(found).__name__
        raise ConfirmationMismatch(f"the answer is about {shown!r}, not {object_id}")
    snapshot_type = event["type"][len(V1_PREFIX) :]
    body = {
        "id": event["id"],
        "object": "event",
        "type": snapshot_type,
        "created": event.get("created"),
        "livemode": event.get("livemode") is True,
        "account": _account(doc),
        "data": {"object": answer},
    }
    return (Confirmed(event["id"] + CONFIRMED_SUFFIX, snapshot_type, orjson.dumps(body)),)


def _related(doc: Any) -> tuple[str, str]:
    """The related object's id and url, checked against each other."""
    if not isinstance(doc, Mapping) or not isinstance(doc.get("type"), str):
        raise PayloadInvalid("not a Stripe thin event: nothing to fetch")
    if not awaits(doc["type"]):
        raise PayloadInvalid(f"a {doc['type'][:_TEXT_MAX]!r} thin event is not fetched")
    if not isinstance(doc.get("id"), str) or not doc["id"].startswith("evt_"):
        raise PayloadInvalid("the thin event's id is not a Stripe event id")
    related = doc.get("related_object")
    if not isinstance(related, Mapping):
        raise PayloadInvalid("the thin event has no related_object")
    object_id, url, kind = related.get("id"), related.get("url"), related.get("type")
    if not isinstance(url, str) or not _URL.fullmatch(url):
        raise PayloadInvalid("related_object.url is not the path of a v1 resource")
    if not isinstance(object_id, str) or not url.endswith("/" + object_id):
        raise PayloadInvalid("related_object.url does not end in related_object.id")
    if not isinstance(kind, str) or not kind or len(kind) > _TEXT_MAX:
        raise PayloadInvalid("related_object.type is not a resource name")
    return object_id, url


def _context(doc: Mapping[str, Any]) -> str | None:
    """The connected account the event happened on, or None (the platform's own)."""
    context = doc.get("context")
    if context is None:
        return None
    if not isinstance(context, str) or not _CONTEXT.fullmatch(context):
        raise PayloadInvalid("the thin event's context is not a connected account's path")
    return context


def _account(doc: Mapping[str, Any]) -> str | None:
    """The account of the snapshot shape (a Connect event's `account`): the context's
    last."""
    context = _context(doc)
    return None if context is None else context.rsplit("/", 1)[-1]


STRIPE_THIN = Provider(
    name="stripe_thin",
    title="Stripe thin events",
    scheme=TimestampedPairsScheme(
        "stripe_thin", "Stripe-Signature", ",", "t", "v1", b".", "id", "type"
    ),
    movements=Movements(
        instruction,
        MOVEMENT_TYPES,
        parse_rules(("/data/object/metadata/merchant_id",)),
    ),
    units=UNITS,
    order_keys=parse_rules(("/data/object/payment_intent", "/data/object/id")),
    confirmation=Confirmation(locate, confirmed, auth, awaits=awaits, headers=headers),
    cross_check="`StripeClient.parse_event_notification` (stripe-python)",
)
