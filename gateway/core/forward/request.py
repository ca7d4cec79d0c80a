"""The HTTP request `gateway forward` sends for one event: its stable identity, its
headers, its signature and (optionally) its envelope.

Pure: the event, the attempt, the time and the secrets come in; a body and headers go
out. The body is the stored body byte for byte unless the destination asks for the
envelope; the signature covers exactly the bytes sent.
"""

from __future__ import annotations

import base64
import enum
import hashlib
from dataclasses import dataclass

import orjson

from gateway.core.providers import get_scheme
from gateway.core.signatures import SchemeParams

#: The prefix of the derived message id, as Standard Webhooks senders write theirs.
WEBHOOK_ID_PREFIX = "msg_"


class ResignAs(enum.StrEnum):
    """Whose signature a delivery carries, so an unchanged handler can verify it."""

    STANDARD = "standard"
    STRIPE = "stripe"
    GITHUB = "github"
    SHOPIFY = "shopify"
    PADDLE = "paddle"


#: Schemes whose header carries several signatures at once: every secret of a rotation
#: signs, and the receiver accepts whichever it knows. GitHub and Shopify have room for
#: one, so they sign with the first secret.
_MULTI_SIGNATURE = frozenset({ResignAs.STANDARD, ResignAs.STRIPE, ResignAs.PADDLE})


@dataclass(frozen=True)
class ForwardedEvent:
    """One event as the forwarder read it from the stream."""

    provider: str
    event_id: str
    event_type: str
    received_at: str  # ISO 8601, as the message's `Gateway-Received-At`
    body: bytes
    order_key: str | None = None
    key_seq: int | None = None
    traceparent: str | None = None


def webhook_id(provider: str, event_id: str) -> str:
    """The delivery id of an event: the same for every attempt, replay, backfill and
    restart, because it is derived from the idempotency key the gateway already keeps.

    A digest rather than the id itself: provider event ids may hold any character, and
    two providers may use the same id.
    """
    digest = hashlib.sha256(f"{provider}\x00{event_id}".encode()).digest()
    return WEBHOOK_ID_PREFIX + base64.b32encode(digest[:20]).decode("ascii").lower()


def envelope(event: ForwardedEvent) -> bytes:
    """The event wrapped with where it came from: the stored body is embedded as JSON
    when it is JSON (byte for byte), else as a base64 string under `body_base64`."""
    meta = {
        "provider": event.provider,
        "event_id": event.event_id,
        "type": event.event_type,
        "received_at": event.received_at,
    }
    try:
        orjson.loads(event.body)
    except orjson.JSONDecodeError:
        meta["body_base64"] = base64.b64encode(event.body).decode("ascii")
        return orjson.dumps(meta)
    return orjson.dumps({**meta, "body": orjson.Fragment(event.body)})


def header_text(value: str) -> str:
    """A value an HTTP header can carry: ASCII, anything else escaped (`\\xe9`), as an
    event id or type may hold any character and HTTP/1.1 clients refuse the rest."""
    return value if value.isascii() else value.encode("ascii", "backslashreplace").decode()


def gateway_headers(event: ForwardedEvent, attempt: int, delivery_id: str) -> dict[str, str]:
    """What every delivery carries besides its signature."""
    headers = {
        "Content-Type": "application/json",
        "Idempotency-Key": delivery_id,
        "Gateway-Provider": event.provider,
        "Gateway-Event-Id": header_text(event.event_id),
        "Gateway-Event-Type": header_text(event.event_type),
        "Gateway-Received-At": event.received_at,
        "Gateway-Attempt": str(attempt),
    }
    if event.traceparent:
        headers["traceparent"] = event.traceparent
    if event.order_key is not None and event.key_seq is not None:
        headers["Gateway-Order-Key"] = event.order_key
        headers["Gateway-Key-Seq"] = str(event.key_seq)
    return headers


def signature_headers(
    resign_as: ResignAs,
    secrets: tuple[str, ...],
    body: bytes,
    now_s: int,
    *,
    delivery_id: str,
    event_type: str,
) -> dict[str, str]:
    """The signature headers of `resign_as` over `body` at `now_s`, made with the
    project's own signers. ValueError if there is no secret, or one the scheme cannot use."""
    if not secrets:
        raise ValueError("a re-signed delivery needs at least one secret")
    scheme = get_scheme(resign_as.value)
    signing = secrets if resign_as in _MULTI_SIGNATURE else secrets[:1]
    signed = [
        scheme.sign(
            SchemeParams(secrets=(secret,)),
            body,
            now_s,
            event_id=delivery_id,
            event_type=event_type or "unknown",
        )
        for secret in signing
    ]
    headers = signed[0]
    for more in signed[1:]:
        for name, value in more.items():
            headers[name] = _merge_signatures(resign_as, headers[name], value)
    return headers


def _merge_signatures(resign_as: ResignAs, first: str, other: str) -> str:
    """One header value with both values' signatures (they share the id and timestamp)."""
    if first == other:  # the id or timestamp header: the same in every signing
        return first
    if resign_as is ResignAs.STANDARD:  # `v1,AAA v1,BBB`
        return f"{first} {other}"
    separator = "," if resign_as is ResignAs.STRIPE else ";"  # `t=1,v1=a,v1=b`
    return first + separator + other.split(separator, 1)[1]


def delivery_request(
    event: ForwardedEvent,
    attempt: int,
    now_s: int,
    *,
    resign_as: ResignAs,
    secrets: tuple[str, ...],
    wrap: bool = False,
) -> tuple[bytes, dict[str, str]]:
    """The body and headers of one attempt; the signature's timestamp is `now_s`, taken
    at the attempt, so a retry hours later is still inside the receiver's window."""
    delivery_id = webhook_id(event.provider, event.event_id)
    body = envelope(event) if wrap else event.body
    headers = gateway_headers(event, attempt, delivery_id)
    headers.update(
        signature_headers(
            resign_as,
            secrets,
            body,
            now_s,
            delivery_id=delivery_id,
            event_type=header_text(event.event_type),
        )
    )
    if resign_as is not ResignAs.STANDARD:
        # The Standard Webhooks id travels anyway: a receiver can de-duplicate on it
        # whatever signature it checks.
        headers["webhook-id"] = delivery_id
    return body, headers
