"""GoCardless's webhooks, verified: one signature over a whole request of several
events, then the request split into one body per event. Pure.

A request is `{"events": [{"id": "EV…", "resource_type": "payments", "action":
"confirmed", ...}, ...], "meta": {"webhook_id": "WB…"}}` and `Webhook-Signature` is the
hex HMAC-SHA256 of the raw body keyed with the endpoint's secret as UTF-8
(`gocardless_pro.webhooks.parse`, 3.22.0). The signature covers the request, never an
event on its own: it is checked once, on the whole body (`Batch.signed_whole`), and a
changed byte anywhere refuses every event of it. GoCardless retries the whole request
on any answer but a 2xx, so a retried request's events are each a duplicate by its id.

Each event is then recorded under its own id (`events[0].id` of its body) and type
(`{resource_type}.{action}`) as the body `{"events":[EVENT],"meta":META}`: GoCardless's
own shape, a request of one event, so whatever reads a GoCardless request reads a
row. EVENT and META are the request's own bytes, cut out of it, never re-serialised.
A request of one event is kept as it came.
"""

from __future__ import annotations

import re

import orjson

from gateway.core.signatures.base import (
    BodySigned,
    Encoding,
    FieldRef,
    Headers,
    SchemeParams,
    Verifier,
    decode_signature,
    encode_signature,
    hmac_sha256,
    matches,
    require_header,
    signing_secret,
    utf8_keys,
)
from gateway.errors import BatchTooLarge, SignatureMismatch

HEADER = "webhook-signature"
_SENT_HEADER = "Webhook-Signature"
_ID_REF = FieldRef("json", "/events/0/id")
#: `payments.confirmed`: the two fields joined with "." as GoCardless's docs and
#: dashboard write an event's kind.
_TYPE_REF = FieldRef("json", "/events/0/resource_type", also=("/events/0/action",), sep=".")


class GoCardlessScheme(BodySigned):
    """`Webhook-Signature`: the hex HMAC-SHA256 of the whole body, UTF-8 secret."""

    name = "gocardless"
    header = HEADER

    def verify(self, params: SchemeParams, headers: Headers, body: bytes, now_s: float) -> None:
        """Decode the header (`SignatureMissing`, `SignatureMalformed`), then compare it
        against every secret's HMAC of the body (`SignatureMismatch`). Nothing time-bound
        is signed."""
        self.verifier(params)(headers, body, now_s)

    def verifier(self, params: SchemeParams) -> Verifier:
        """`verify` with the secrets' keys prepared once."""
        keys = utf8_keys(params.secrets)

        def verify(headers: Headers, body: bytes, now_s: float) -> None:
            # One value, as `gocardless_pro` compares it: a list is not GoCardless's.
            offered = decode_signature(require_header(headers, HEADER), Encoding.HEX)
            if not matches(keys, [offered], body):
                raise SignatureMismatch(f"no configured secret matches {HEADER}")

        return verify

    def sign(
        self,
        params: SchemeParams,
        body: bytes,
        now_s: int,
        *,
        event_id: str | None = None,
        event_type: str | None = None,
    ) -> dict[str, str]:
        """The body's signature; the id and type are in the body."""
        mac = hmac_sha256(signing_secret(params).encode("utf-8"), body)
        return {_SENT_HEADER: encode_signature(mac, Encoding.HEX)}

    def id_ref(self, params: SchemeParams) -> FieldRef:
        """The (single) event's `id` of a split body."""
        return _ID_REF

    def type_ref(self, params: SchemeParams) -> FieldRef:
        """The event's `resource_type` and `action`, joined with "."."""
        return _TYPE_REF


SCHEME = GoCardlessScheme()

# --- batches --------------------------------------------------------------------------

#: A string (escapes included) or a structural character: what the scan steps on.
#: Numbers, literals and blanks lie between tokens and are never looked at.
_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{},:]', re.DOTALL)
_BLANK = b" \t\n\r"
_OPEN, _CLOSE = frozenset(b"[{"), frozenset(b"]}")
_COMMA, _COLON = ord(","), ord(":")


def _children(body: bytes, start: int) -> list[tuple[int, int, int]]:
    """The children of the object or array that opens at `body[start]`: for each,
    (its first byte, its colon's end or -1 in an array, the byte after it), blanks
    around it included. The body must be valid JSON (orjson read it already)."""
    found: list[tuple[int, int, int]] = []
    depth, begin, colon = 0, start + 1, -1
    for match in _TOKEN.finditer(body, start):
        char = body[match.start()]
        if char in _OPEN:
            depth += 1
        elif char in _CLOSE:
            depth -= 1
            if depth == 0:
                if body[begin : match.start()].strip(_BLANK):  # not an empty container
                    found.append((begin, colon, match.start()))
                return found
        elif depth == 1 and char == _COMMA:
            found.append((begin, colon, match.start()))
            begin, colon = match.end(), -1
        elif depth == 1 and char == _COLON and colon < 0:
            colon = match.end()
    raise ValueError("unterminated JSON container")


def _trimmed(body: bytes, start: int, end: int) -> tuple[int, int]:
    """start and end moved past the blanks at either end of `body[start:end]`."""
    while start < end and body[start] in _BLANK:
        start += 1
    while end > start and body[end - 1] in _BLANK:
        end -= 1
    return start, end


def _members(body: bytes) -> dict[str, tuple[int, int]]:
    """Where each value of the top-level object lies; a repeated key keeps its last
    value, as orjson reads it."""
    start = _trimmed(body, 0, len(body))[0]
    members: dict[str, tuple[int, int]] = {}
    for begin, colon, end in _children(body, start):
        key = orjson.loads(body[begin : colon - 1])  # the key's string, unescaped
        members[key] = _trimmed(body, colon, end)
    return members


def split(body: bytes, items_max: int, item_bytes_max: int) -> tuple[bytes, ...]:
    """One body per event, each `{"events":[EVENT],"meta":META}` (no `meta` when the
    request has none) of the request's own bytes; a request of one event as it came.
    A body not of GoCardless's shape comes back whole, for its shaping to refuse (400,
    no event id). `BatchTooLarge` for more than `items_max` events, or, of several, an
    event whose own body is longer than `item_bytes_max` bytes. Call on a verified
    body only: GoCardless signs the request, not its events."""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        return (body,)
    events = doc.get("events") if isinstance(doc, dict) else None
    if not isinstance(events, list) or len(events) < 2:
        return (body,)
    if len(events) > items_max:
        raise BatchTooLarge(f"{len(events)} events in one request; at most {items_max}")
    members = _members(body)
    spans = [_trimmed(body, a, b) for a, _, b in _children(body, members["events"][0])]
    if len(spans) != len(events):  # the scan and orjson read the same JSON differently
        raise ValueError(f"found {len(spans)} events where orjson reads {len(events)}")
    if "meta" in members:
        meta_start, meta_end = members["meta"]
        tail = b'],"meta":' + body[meta_start:meta_end] + b"}"
    else:
        tail = b"]}"
    bodies = tuple(b'{"events":[' + body[a:b] + tail for a, b in spans)
    for index, one in enumerate(bodies):
        if len(one) > item_bytes_max:
            raise BatchTooLarge(
                f"events[{index}] is {len(one)} bytes as its own body; at most {item_bytes_max}"
            )
    return bodies
