"""The event as the gateway records it, and the pure rules that shape it:
where its id and type come from, which subject it goes to, what makes it invalid."""

from __future__ import annotations

import enum
import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import orjson

from gateway.core.bodies.content import (
    DEFAULT_HEADERS,
    SERVICE_HEADERS,
    HeaderPolicy,
    body_digest_id,
    has_control_chars,
    nul_free,
    storable_headers,
)
from gateway.core.events.ids import (
    as_text,
    check_event_id,
    read_event_id,
)
from gateway.core.ordering.keys import KeyRule, bounded_key, order_key_of
from gateway.core.signatures.base import FieldRef
from gateway.core.type_patterns import type_allowed
from gateway.errors import BadRequest, ErrorClass, Forbidden, PayloadInvalid, PayloadNotJson

MAX_EVENT_TYPE_CHARS = 200
#: The request header of `POST /v1/events` naming the event's ordering key (lower case,
#: as the endpoint reads headers).
ORDERING_KEY_HEADER = "ordering-key"
_SUBJECT_TOKEN_BAD = re.compile(r"[^A-Za-z0-9_\-]")
#: Whether events published to a subject are ordered (an ordered consumer receives it).
OrderedSubject = Callable[[str], bool]


class Outcome(enum.StrEnum):
    """What the idempotency gate decided for one delivery."""

    ACCEPTED = "accepted"
    DUPLICATE = "duplicate"


class Source(enum.StrEnum):
    """How an event reached the gateway, as stored in `processed_webhooks.source`."""

    LIVE = "live"  # POST /webhooks/{provider} or POST /v1/events
    BACKFILL = "backfill"  # fetched from the provider's API by `gateway backfill`
    CONFIRMED = "confirmed"  # found by `gateway confirm` in the API's answer to a webhook


class Stage(enum.StrEnum):
    """Where in the pipeline an event failed, as stored in `dlq_webhooks.stage`."""

    INGEST = "ingest"
    PUBLISH = "publish"
    SETTLEMENT = "settlement"
    CONFIRM = "confirm"  # the fetch that confirms a webhook naming an object (`gateway confirm`)


#: A forwarding destination's stage is this and its name (`forward:billing`).
FORWARD_STAGE_PREFIX = "forward:"
#: A destination's name is part of a consumer name and of a dead-letter stage.
MAX_DESTINATION_CHARS = 64
_DESTINATION_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-_")


def is_destination_name(name: str) -> bool:
    """Whether `name` can name a forwarding destination: 1-64 of a-z, 0-9, `-` and `_`."""
    return 0 < len(name) <= MAX_DESTINATION_CHARS and set(name) <= _DESTINATION_CHARS


def forward_stage(destination: str) -> str:
    """Where a forwarding destination's dead letters are filed."""
    return FORWARD_STAGE_PREFIX + destination


@dataclass(frozen=True)
class Failure:
    """Why a verified event cannot go further, recorded in the dead-letter table."""

    error_class: ErrorClass
    message: str
    detail: str | None = None


@dataclass(frozen=True)
class Event:
    """A verified event ready for the idempotency gate.

    `subject` is None when the event cannot be published (it is then parked in the DLQ
    with `failure` saying why, but still recorded so the provider's data is kept).
    `body_sha256` is set only when the signature does not vouch for `event_id`
    (`Scheme.replay_digest`): a second row with the same digest is a duplicate.
    """

    provider: str
    event_id: str
    event_type: str | None
    subject: str | None
    headers: Mapping[str, str]
    body: bytes
    received_at: datetime
    failure: Failure | None = None
    body_sha256: bytes | None = None
    source: str = Source.LIVE
    # The W3C `traceparent` of the span this event belongs to (the recording request's,
    # then the publish's); None while tracing is off; flags 00 (no span anywhere) when
    # its trace is not sampled. Never a provider's own header.
    traceparent: str | None = None
    # Its ordering key (`core.ordering.keys`), and its number among the key's events, taken
    # when the row was recorded; both None for an unordered event. An event being shaped
    # has a key and no number yet.
    order_key: str | None = None
    key_seq: int | None = None
    # The request only names an object (`Provider.confirmation`): recorded unpublished,
    # with a fetch owed by the confirm stage (a repeat asks for the fetch again).
    awaits_confirmation: bool = False

    @property
    def msg_id(self) -> str:
        """The JetStream de-duplication id: `{provider}:{event_id}`."""
        return f"{self.provider}:{self.event_id}"

    def __repr__(self) -> str:  # never print the body
        return (
            f"Event(provider={self.provider!r}, event_id={self.event_id!r}, "
            f"event_type={self.event_type!r}, subject={self.subject!r})"
        )


def new_event(
    provider: str,
    event_id: str,
    event_type: str | None,
    subject: str | None,
    headers: Mapping[str, str],
    body: bytes,
    received_at: datetime,
    failure: Failure | None = None,
    body_sha256: bytes | None = None,
    source: str = Source.LIVE,
    traceparent: str | None = None,
    order_key: str | None = None,
) -> Event:
    """`Event(...)` in one step: the same frozen value, built for the request path.

    A frozen dataclass's `__init__` sets each of its thirteen fields through
    `object.__setattr__`: about 1.7 µs a request, against 0.5 µs for filling the
    instance's dict at once. `tests/unit/core/test_model_content.py` holds the two equal
    field for field.
    """
    event = _object_new(Event)
    event.__dict__.update(
        provider=provider,
        event_id=event_id,
        event_type=event_type,
        subject=subject,
        headers=headers,
        body=body,
        received_at=received_at,
        failure=failure,
        body_sha256=body_sha256,
        source=source,
        traceparent=traceparent,
        order_key=order_key,
        key_seq=None,
        awaits_confirmation=False,
    )
    return event


_object_new = object.__new__


def awaiting_fetch(event: Event, owed: Callable[[str | None], bool]) -> Event:
    """`event` recorded to wait for the confirm stage's fetch, when `owed` says its type
    needs one: no subject and no key, so it is never published itself. A failed event
    is parked as it is."""
    if event.failure is not None or not owed(event.event_type):
        return event
    return replace(event, subject=None, order_key=None, awaits_confirmation=True)


@dataclass
class ParsedBody:
    """The body parsed once, lazily, so schemes with header ids never parse it twice.

    A provider whose body is not JSON (Braintree's form) brings its `decode`
    (`Provider.document`): its document is read the same way a JSON body's value is.
    """

    raw: bytes
    decode: Callable[[bytes], Any] | None = None
    _value: Any = field(default=None, init=False)
    _error: PayloadInvalid | None = field(default=None, init=False)
    _done: bool = field(default=False, init=False)

    def json(self) -> Any:
        """The parsed document; raise `PayloadNotJson` if the body is not JSON (or the
        `PayloadInvalid` of `decode`, for a body it cannot read)."""
        if not self._done:
            self._done = True
            if self.decode is not None:
                try:
                    self._value = self.decode(self.raw)
                except PayloadInvalid as exc:
                    self._error = exc
            else:
                try:
                    self._value = orjson.loads(self.raw)
                except orjson.JSONDecodeError as exc:
                    where = f"{exc.msg} at byte {exc.pos}"
                    self._error = PayloadNotJson(f"body is not valid JSON: {where}")
        if self._error is not None:
            raise self._error
        return self._value


def _found(ref: FieldRef, headers: Mapping[str, str], body: ParsedBody) -> Any:
    """The value `ref` points at, as sent (None when absent, or in a body that is JSON
    but not an object). Raises `PayloadNotJson` when it lives in a body that is not JSON."""
    if ref.source == "header":
        return headers.get(ref.name)
    return ref.read(headers, body.json())


def lookup(ref: FieldRef, headers: Mapping[str, str], body: ParsedBody) -> str | None:
    """The value `ref` points at, as a string (`as_text`), or None when absent or empty.

    Raises `PayloadNotJson` when the value lives in a body that is not JSON.
    """
    return as_text(_found(ref, headers, body))


def subject_tokens(text: str) -> str:
    """Turn a free-form event type into valid NATS subject tokens.

    Dots and slashes separate tokens (`orders/create` → `orders.create`); any other
    character outside letters, digits, `_` and `-` becomes `_`, so wildcards (`*`, `>`)
    and whitespace can never change what a subject matches. Empty tokens become `_`.
    """
    tokens = text.replace("/", ".").split(".")
    return ".".join(_SUBJECT_TOKEN_BAD.sub("_", t) or "_" for t in tokens)


# Subjects are cached: a provider sends few event types, and the rule runs a regex per
# token on every request otherwise.
@functools.lru_cache(maxsize=4096)
def webhook_subject(provider: str, event_type: str) -> str:
    """`webhooks.{provider}.{event_type}` with the type made subject-safe."""
    return f"webhooks.{subject_tokens(provider)}.{subject_tokens(event_type)}"


@functools.lru_cache(maxsize=4096)
def service_subject(service: str, event_type: str) -> str:
    """`events.{service}.{type}` with the type made subject-safe."""
    return f"events.{subject_tokens(service)}.{subject_tokens(event_type)}"


def sender_subjects(sender: str) -> str:
    """Every subject one sender publishes to: `webhooks.{provider}.>`, or
    `events.{service}.>` for `service:NAME`, made subject-safe as its events' are."""
    service = sender.removeprefix("service:")
    if service != sender:
        return f"events.{subject_tokens(service)}.>"
    return f"webhooks.{subject_tokens(sender)}.>"


def subject_allowed(subject: str, patterns: tuple[str, ...]) -> bool:
    """True if `subject` matches any NATS pattern (`*` one token, `>` the rest)."""
    tokens = subject.split(".")
    for pattern in patterns:
        parts = pattern.split(".")
        for i, part in enumerate(parts):
            if part == ">":
                if len(tokens) > i:
                    return True
                break
            if i >= len(tokens) or (part != "*" and part != tokens[i]):
                break
        else:
            if len(parts) == len(tokens):
                return True
    return False


def ordered_subjects(patterns: tuple[str, ...]) -> OrderedSubject:
    """`subject_allowed` against `patterns` (`[settlement] subjects`), remembered per
    subject: it is asked on every request, and a gateway publishes to few subjects."""

    @functools.lru_cache(maxsize=4096)
    def ordered(subject: str) -> bool:
        return subject_allowed(subject, patterns)

    return ordered


def type_failure(event_type: str | None) -> Failure | None:
    """Why an event type cannot make a subject, or None when it can."""
    if event_type is None:
        return Failure(ErrorClass.EVENT_TYPE_MISSING, "the event carries no event type")
    if len(event_type) > MAX_EVENT_TYPE_CHARS:
        return Failure(
            ErrorClass.EVENT_TYPE_INVALID,
            f"event type longer than {MAX_EVENT_TYPE_CHARS} characters",
        )
    # Checked after the length, so it only ever scans a short string. A control character
    # must never reach a NATS subject or the `Gateway-Event-Type` header.
    if has_control_chars(event_type):
        return Failure(ErrorClass.EVENT_TYPE_INVALID, "event type contains control characters")
    return None


def _webhook_id(
    id_ref: FieldRef, headers: Mapping[str, str], parsed: ParsedBody
) -> tuple[str, Failure | None]:
    """The event id, or a body-digest id with the failure that made it necessary.

    The request is verified, so its content is never a reason to refuse it: a body that
    cannot be parsed for its id, or an id that is not usable (`event_ids`), is kept
    under `sha256:<hex>` and parked, and a retry of the same bytes is a duplicate.
    """
    try:
        found = _found(id_ref, headers, parsed)
        is_object = id_ref.source == "header" or isinstance(parsed.json(), dict)
    except PayloadInvalid as exc:
        return body_digest_id(parsed.raw), Failure(exc.error_class, str(exc))
    event_id, problem = read_event_id(id_ref, found, is_object)
    if event_id is None:
        return body_digest_id(parsed.raw), Failure(ErrorClass.EVENT_ID_INVALID, problem)
    return event_id, None


def webhook_event(
    provider: str,
    id_ref: FieldRef,
    type_ref: FieldRef,
    headers: Mapping[str, str],
    body: bytes,
    received_at: datetime,
    *,
    header_policy: HeaderPolicy = DEFAULT_HEADERS,
    event_types: tuple[str, ...] | None = None,
    body_sha256: bytes | None = None,
    source: str = Source.LIVE,
    order_rules: tuple[KeyRule, ...] = (),
    ordered: OrderedSubject | None = None,
    decode: Callable[[bytes], Any] | None = None,
) -> Event:
    """Shape a verified provider webhook into an `Event`.

    Never raises for the content: every problem becomes the event's `failure` (the first
    one found: id, then body and type, then headers), so the event is still recorded (and
    parked in the DLQ) rather than dropped, and it is never published. Without a usable
    id (`event_ids`) it is recorded under its body digest. A type outside `event_types`
    (the provider's allow-list; None allows every type) is such a problem too.
    Only the headers `header_policy` names are kept, capped.

    A publishable event whose subject is `ordered` gets its key by `order_rules`
    (`core.ordering.keys`); any other event has none.
    """
    parsed = ParsedBody(body, decode)  # `decode`: a body that is not JSON (Braintree's)
    event_id, failure = _webhook_id(id_ref, headers, parsed)
    event_type: str | None = None
    try:
        doc = parsed.json()
        if isinstance(doc, dict):
            event_type = lookup(type_ref, headers, parsed)
            failure = failure or type_failure(event_type)
            if failure is None and event_types is not None and event_type is not None:
                failure = _not_allowed(event_type, event_types)
        else:
            failure = failure or Failure(
                ErrorClass.PAYLOAD_NOT_OBJECT, "the body is JSON but not an object"
            )
    except PayloadInvalid as exc:
        failure = failure or Failure(exc.error_class, str(exc))
    kept_headers, had_nul = storable_headers(headers, header_policy)
    if had_nul:
        failure = failure or Failure(ErrorClass.HEADERS_INVALID, "a header holds a NUL character")
    subject = webhook_subject(provider, event_type) if failure is None and event_type else None
    order_key = None
    if subject is not None and order_rules and ordered is not None and ordered(subject):
        order_key = order_key_of(order_rules, event_type, parsed.json())
    return Event(
        provider,
        event_id,
        nul_free(event_type) if event_type is not None else None,
        subject,
        kept_headers,
        body,
        received_at,
        failure,
        body_sha256,
        source,
        order_key=order_key,
    )


def _not_allowed(event_type: str, patterns: tuple[str, ...]) -> Failure | None:
    """Why a type outside the provider's `event_types` goes no further, or None."""
    if type_allowed(event_type, patterns):
        return None
    return Failure(
        ErrorClass.EVENT_TYPE_NOT_ALLOWED,
        f"event type {event_type!r} matches none of the provider's event_types",
    )


def service_event(
    service: str,
    allowed: tuple[str, ...],
    idempotency_key: str | None,
    headers: Mapping[str, str],
    body: bytes,
    received_at: datetime,
    ordered: OrderedSubject | None = None,
) -> Event:
    """Shape an internal `{"type": ..., "data": {...}}` publish into an `Event`.

    Internal publishers are our own code, so a malformed request is refused (400) for
    the caller to fix, and a subject outside its scope is refused (403).

    On an `ordered` subject its key is the `Ordering-Key` header (`bounded_key`); without
    one, the payment the event names (`data.settlement_id`, or a payout's `payout_id`),
    so one bad payment holds only its own later events; and for an event that names
    none, the subject itself:
    one publisher's events to one subject stay in the order it posted them.
    """
    event_id = check_event_id(as_text(idempotency_key))
    try:
        doc = ParsedBody(body).json()
    except PayloadNotJson as exc:
        raise BadRequest(str(exc)) from None
    if not isinstance(doc, dict):
        raise BadRequest('body must be a JSON object {"type": ..., "data": {...}}')
    event_type = doc.get("type")
    if not isinstance(event_type, str) or not event_type.strip():
        raise BadRequest('"type" must be a non-empty string')
    bad_type = type_failure(event_type)
    if bad_type is not None:
        raise BadRequest(f'"type" is invalid: {bad_type.message}')
    if not isinstance(doc.get("data"), dict):
        raise BadRequest('"data" must be a JSON object')
    kept_headers, had_nul = storable_headers(headers, SERVICE_HEADERS)
    if had_nul:
        raise BadRequest("a header holds a NUL character")
    subject = service_subject(service, event_type)
    if not subject_allowed(subject, allowed):
        raise Forbidden(f"service {service!r} may not publish to {subject}")
    order_key = None
    if ordered is not None and ordered(subject):
        # Headers arrive latin-1 decoded; an empty one names no key.
        asked = headers.get(ORDERING_KEY_HEADER)
        data = doc["data"]
        payment = data.get("settlement_id") or data.get("payout_id")
        named = payment if isinstance(payment, str) and payment.strip() else None
        order_key = bounded_key(asked or named or subject)
    return Event(
        f"service:{service}",
        event_id,
        event_type,
        subject,
        kept_headers,
        body,
        received_at,
        order_key=order_key,
    )
