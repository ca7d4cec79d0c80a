"""GoCardless's events confirmed by a fetch of the object they name. Pure.

A GoCardless event says what happened to a payment, a refund or a payout, and names it
(`links.payment`, `links.refund`, `links.payout`), but carries no amount
(developer.gocardless.com/api-reference, "Events"; the `webhook_body.json` fixture of
`gocardless-pro-python`). The events that move money wait for the confirm stage, which
fetches the object they name (`GET /payments/PM…`, `/refunds/RF…`, `/payouts/PO…`,
answered as `{"payments": {...}}`) and records the event again, with the object's
amount, currency and metadata, as a confirmed event:

- its id is the webhook event's with `:confirmed` (`EV123:confirmed`), so a retried
  batch, or a replay, confirms to the same id and the gate makes it a duplicate;
- its type is the webhook event's (`payments.confirmed`);
- its body a compact JSON object: the event's id, type and time, the payment it
  belongs to (`payment_id`: the payment itself, a refund's `links.payment`; none for a
  payout), the object's id, `amount` (an integer of minor units, as GoCardless's API
  gives every amount), `currency`, `metadata` and `creditor` (`links.creditor`).

The object is read as it stands when fetched, and only the fields an event's movement
needs and that do not change once the object exists are taken (an amount, a currency,
the payment a refund belongs to), so a fetch made late confirms the same movement.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import orjson

from gateway.core.bodies.fields import get_currency
from gateway.core.providers.base import Confirmed
from gateway.errors import ConfirmationMismatch, PayloadInvalid

#: The webhook event types whose movement needs the object's amount (`gocardless.py`
#: maps them), by the resource their `links` name.
AWAITED: Mapping[str, str] = {
    "payments.confirmed": "payment",
    "payments.charged_back": "payment",
    "payments.chargeback_cancelled": "payment",
    "refunds.created": "refund",
    "refunds.failed": "refund",
    "refunds.funds_returned": "refund",
    "payouts.paid": "payout",
}
#: Each resource's id (GoCardless ids are a two-letter prefix and alphanumerics) and
#: the API's plural path and answer key.
_RESOURCES: Mapping[str, tuple[re.Pattern[str], str]] = {
    "payment": (re.compile(r"PM[0-9A-Z]{1,62}", re.ASCII), "payments"),
    "refund": (re.compile(r"RF[0-9A-Z]{1,62}", re.ASCII), "refunds"),
    "payout": (re.compile(r"PO[0-9A-Z]{1,62}", re.ASCII), "payouts"),
}
_PAYMENT_ID = _RESOURCES["payment"][0]
#: The suffix of a confirmed event's id.
CONFIRMED_SUFFIX = ":confirmed"
#: The most bytes of an object's `metadata` carried along (GoCardless allows 3 keys
#: of 50 characters and values of 500).
METADATA_BYTES_MAX = 4_096
_TEXT_MAX = 64
API_VERSION = "2015-07-06"


def awaits(event_type: str) -> bool:
    """Whether a webhook event of `event_type` waits for its object's fetch."""
    return event_type in AWAITED


def auth(key: str) -> Mapping[str, str]:
    """An access token as a bearer token, with the API version every request names
    (developer.gocardless.com/api-reference, "Making requests")."""
    return {"Authorization": f"Bearer {key}", "GoCardless-Version": API_VERSION}


def locate(doc: Any) -> str:
    """The object a recorded event names: `/payments/PM…`, `/refunds/RF…`, `/payouts/PO…`."""
    event = _event(doc)
    resource, object_id = _named(event)
    return f"/{_RESOURCES[resource][1]}/{object_id}"


def confirmed(doc: Any, answer: Any) -> tuple[Confirmed, ...]:
    """The event again, with the fetched object's amount, currency and metadata."""
    event = _event(doc)
    resource, object_id = _named(event)
    plural = _RESOURCES[resource][1]
    obj = answer.get(plural) if isinstance(answer, Mapping) else None
    if not isinstance(obj, Mapping):
        raise PayloadInvalid(f"the answer has no {plural} object")
    if obj.get("id") != object_id:
        found = obj.get("id")
        shown = found[:_TEXT_MAX] if isinstance(found, str) else type(found).__name__
        raise ConfirmationMismatch(f"the answer is about {shown!r}, not {object_id}")
    event_type = f"{event['resource_type']}.{event['action']}"
    body = {
        "event_id": event["id"],
        "event_type": event_type,
        "created_at": _optional_text(event, "created_at"),
        "payment_id": _payment_of(resource, obj),
        "object_id": object_id,
        "amount": _amount(obj, plural),
        "currency": get_currency(obj, "currency", f"{plural}."),
        "metadata": _metadata(obj),
        "creditor": _creditor(obj),
    }
    item = Confirmed(event["id"] + CONFIRMED_SUFFIX, event_type, orjson.dumps(body))
    return (item,)


def _event(doc: Any) -> Mapping[str, Any]:
    """The one event of a recorded item (`{"events": [EVENT], ...}`, as the batch was
    split), of a type that is fetched."""
    events = doc.get("events") if isinstance(doc, Mapping) else None
    if not isinstance(events, list) or len(events) != 1 or not isinstance(events[0], Mapping):
        raise PayloadInvalid("not one GoCardless event: nothing to fetch")
    event = events[0]
    _text(event, "id", "the event's ")
    event_type = f"{event.get('resource_type')}.{event.get('action')}"
    if event_type not in AWAITED:
        raise PayloadInvalid(f"a {event_type[:_TEXT_MAX]!r} event is not fetched")
    return event


def _named(event: Mapping[str, Any]) -> tuple[str, str]:
    """The resource the event is about and its id, from `links`."""
    resource = AWAITED[f"{event['resource_type']}.{event['action']}"]
    links = event.get("links")
    object_id = links.get(resource) if isinstance(links, Mapping) else None
    if not isinstance(object_id, str) or not _RESOURCES[resource][0].fullmatch(object_id):
        raise PayloadInvalid(f"the event's links.{resource} is not a GoCardless {resource} id")
    return resource, object_id


def _payment_of(resource: str, obj: Mapping[str, Any]) -> str | None:
    """The payment the object belongs to: itself, a refund's `links.payment`."""
    if resource == "payment":
        return str(obj["id"])
    if resource == "payout":
        return None
    links = obj.get("links")
    payment = links.get("payment") if isinstance(links, Mapping) else None
    if not isinstance(payment, str) or not _PAYMENT_ID.fullmatch(payment):
        raise PayloadInvalid("the refund's links.payment is not a GoCardless payment id")
    return payment


def _amount(obj: Mapping[str, Any], plural: str) -> int:
    """`amount` as the API wrote it, an integer of minor units (never a string, a float
    or a bool); whether it is one the ledger takes is settlement's to say, which parks
    the event with the reason."""
    amount = obj.get("amount")
    if type(amount) is not int:
        raise PayloadInvalid(f"{plural}.amount is not an integer of minor units")
    return amount


def _metadata(obj: Mapping[str, Any]) -> Any:
    metadata = obj.get("metadata")
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping) or len(orjson.dumps(metadata)) > METADATA_BYTES_MAX:
        raise PayloadInvalid(f"the object's metadata is not an object of at most "
                             f"{METADATA_BYTES_MAX} bytes")  # fmt: skip
    return metadata


def _creditor(obj: Mapping[str, Any]) -> str | None:
    links = obj.get("links")
    creditor = links.get("creditor") if isinstance(links, Mapping) else None
    return creditor if isinstance(creditor, str) and len(creditor) <= _TEXT_MAX else None


def _optional_text(obj: Mapping[str, Any], key: str) -> str | None:
    value = obj.get(key)
    return value if isinstance(value, str) and 0 < len(value) <= _TEXT_MAX else None


def _text(obj: Mapping[str, Any], key: str, where: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str) or not value or len(value) > _TEXT_MAX:
        raise PayloadInvalid(f"{where}{key} is not a string of 1 to {_TEXT_MAX} characters")
    return value
