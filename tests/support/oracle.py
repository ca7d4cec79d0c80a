"""What the README's HTTP API promises for a request, and the check that the gateway kept
the promise (answer and stored rows), for the property-based tests of both layers.

Written from the README, not from `gateway.core`: the contract in short is
- a webhook without a valid signature, or a publish without a valid token, stores
  nothing and is refused (401; 404 for an unknown provider);
- a correctly signed webhook is recorded (raw body byte for byte) and answered 200,
  parked in `dlq_webhooks` with the first error class found (id, then body and type,
  then headers) when its content cannot be published, under `sha256:<hex of the body>`
  when it has no usable id (absent, not a string or an integer, blank, longer than 255
  characters, control characters): never refused for its content;
- a publish with a valid token is answered 400 for any content a webhook would be
  parked for, 403 outside its service's subjects, and otherwise recorded like a webhook.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson
from hypothesis import event

from tests.support.hostile import BODY_ONLY_SCHEMES, Request

MAX_ID_CHARS = 255
MAX_TYPE_CHARS = 200
REFUSED_UNSIGNED_WEBHOOK = 401
REFUSED_UNKNOWN_PROVIDER = 404
REFUSED_TOKEN = 401
#: Where the configured schemes read their event id and type: ("json"|"header", name).
ID_FROM = {
    "stripe": ("json", "id"),
    "standard": ("header", "webhook-id"),
    "github": ("header", "x-github-delivery"),
    "shopify": ("header", "x-shopify-webhook-id"),
    "paddle": ("json", "event_id"),
    "hmac": ("json", "event_id"),
}
TYPE_FROM = {
    "stripe": ("json", "type"),
    "standard": ("json", "type"),
    "github": ("header", "x-github-event"),
    "shopify": ("header", "x-shopify-topic"),
    "paddle": ("json", "event_type"),
    "hmac": ("header", "x-event-type"),
}
#: Subjects each configured service may publish to, as a test of its type's tokens.
SERVICE_ALLOWS: dict[str, Callable[[list[str]], bool]] = {
    "billing": lambda tokens: True,  # events.billing.>
    "audit": lambda tokens: len(tokens) == 2 and tokens[0] == "login",  # events.audit.login.*
}


@dataclass(frozen=True)
class Verdict:
    """One answer the contract allows: a status, and for 200 what is recorded."""

    status: int
    provider: str = ""
    event_id: str = ""
    error_class: str | None = None  # parked with this class; None: recorded clean
    why: str = ""


def digest_id(body: bytes) -> str:
    return "sha256:" + hashlib.sha256(body).hexdigest()


def control_free(text: str) -> bool:
    """No control or other non-printable character (the README's "control character";
    the gateway documents `str.isprintable` as its test, Unicode separators included)."""
    return text.isprintable()


_NO_JSON = object()


def parse(body: bytes) -> Any:
    """The body as orjson reads it (the README defines bad JSON as what orjson refuses)."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return _NO_JSON


def as_text(value: Any) -> str | None:
    """An id or type value as text: strings and integers, with surrounding spaces and
    tabs stripped (only those: a control character makes an id to park, not a blank
    one); None when absent, blank or of another JSON type."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        return None
    return str(value).strip(" \t") or None


def type_problem(event_type: str | None) -> str | None:
    if event_type is None:
        return "EVENT_TYPE_MISSING"
    if len(event_type) > MAX_TYPE_CHARS or not control_free(event_type):
        return "EVENT_TYPE_INVALID"
    return None


def header_has_nul(request: Request) -> bool:
    return any(b"\x00" in n or b"\x00" in v for n, v in request.headers)


def expect_signed_webhook(scheme: str, request: Request) -> list[Verdict]:
    """The answers allowed for a correctly signed webhook of provider `scheme`."""
    headers = request.seen_headers()
    doc = parse(request.body)

    def value(source: tuple[str, str]) -> Any:
        where, name = source
        if where == "header":
            return headers.get(name)
        return doc.get(name) if isinstance(doc, dict) else None

    failure: str | None = None
    if ID_FROM[scheme][0] == "json" and doc is _NO_JSON:
        event_id, failure = digest_id(request.body), "PAYLOAD_NOT_JSON"
    else:
        found = as_text(value(ID_FROM[scheme]))
        event_id = found or ""
        if found is None or len(found) > MAX_ID_CHARS or not control_free(found):
            event_id, failure = digest_id(request.body), "EVENT_ID_INVALID"
    if failure is None:
        if doc is _NO_JSON:
            failure = "PAYLOAD_NOT_JSON"
        elif not isinstance(doc, dict):
            failure = "PAYLOAD_NOT_OBJECT"
        else:
            failure = type_problem(as_text(value(TYPE_FROM[scheme])))
    recorded = Verdict(200, scheme, event_id, failure, why=failure or "clean")
    if failure is None and header_has_nul(request):
        # A NUL in a header the gateway stores parks the event; headers it does not store
        # (credentials today, an allow-list as that rule grows) may be dropped instead.
        return [Verdict(200, scheme, event_id, "HEADERS_INVALID", why="NUL in a header"), recorded]
    return [recorded]


def _subject_tokens(event_type: str) -> list[str]:
    return event_type.replace("/", ".").split(".")


def expect_internal_event(service: str, request: Request) -> list[Verdict]:
    """The answers allowed for a publish with `service`'s valid token."""
    headers = request.seen_headers()
    key = as_text(headers.get("idempotency-key")) or ""  # the same rule as a webhook's id
    if not key or len(key) > MAX_ID_CHARS or not control_free(key):
        return [Verdict(400, why="bad idempotency key")]
    doc = parse(request.body)
    if not isinstance(doc, dict):
        return [Verdict(400, why="body not a JSON object")]
    event_type = doc.get("type")
    if not isinstance(event_type, str) or not event_type.strip():
        return [Verdict(400, why="type missing")]
    if type_problem(event_type) is not None:
        return [Verdict(400, why="type invalid")]
    if not isinstance(doc.get("data"), dict):
        return [Verdict(400, why="data not an object")]
    if not SERVICE_ALLOWS[service](_subject_tokens(event_type)):
        refused = Verdict(403, why="subject outside the service's scope")
    else:
        refused = Verdict(200, f"service:{service}", key, None, why="clean")
    if header_has_nul(request):  # as for webhooks: only a NUL in a header that is stored
        return [Verdict(400, why="NUL in a header"), refused]
    return [refused]


def expect_not_genuine(request: Request, providers: Sequence[str]) -> set[int]:
    """The statuses allowed for a request that is not genuine (never 200 or 5xx)."""
    if request.path.startswith("/webhooks/"):
        name = request.path.removeprefix("/webhooks/")
        allowed = {REFUSED_UNSIGNED_WEBHOOK if name in providers else REFUSED_UNKNOWN_PROVIDER}
    else:
        allowed = {REFUSED_TOKEN}
    if any(n == b"content-length" for n, _ in request.headers):
        allowed.add(413)  # a declared size over the limit is refused before any check
    return allowed


# --- checking one exchange -------------------------------------------------------------


@dataclass(frozen=True)
class Stored:
    """A recorded event as the test reads it back."""

    body: bytes
    parked: tuple[str, ...]  # error classes of its ingest dead letters
    payloads_match: bool = True  # every dead letter holds the body byte for byte


class Store(Protocol):
    """The two tables, read back (from the in-memory inbox or from PostgreSQL)."""

    async def reset(self) -> None:
        """Forget every recorded event, so each example starts from empty tables and a
        failure found once is found again when Hypothesis replays it."""
        ...

    async def get(self, provider: str, event_id: str) -> Stored | None: ...

    async def counts(self) -> tuple[int, int]:
        """(processed_webhooks rows, dlq_webhooks rows)"""
        ...


#: Sends a request; returns its status (None: no answer) and body.
Send = Callable[[Request], Awaitable[tuple[int | None, bytes]]]


@dataclass
class History:
    """Bodies recorded earlier in this test, by provider: with a body-only signature a
    second delivery of the same body may be answered as a duplicate of the first (a
    replay guard may remember bodies beyond what `Store.reset` clears)."""

    bodies: set[tuple[str, bytes]] = field(default_factory=set)

    def __repr__(self) -> str:
        return f"History({len(self.bodies)} bodies)"


def _contract(allowed: Sequence[Verdict]) -> str:
    return " or ".join(f"{v.status} ({v.why})" for v in allowed)


async def check_genuine(
    send: Send, store: Store, request: Request, allowed: Sequence[Verdict], history: History
) -> None:
    """Send a genuine request to empty tables and check the answer and the rows against
    `allowed`; then send it again: the retry is a duplicate and changes nothing."""
    await store.reset()
    status, answer = await send(request)
    assert status is not None and status < 500, f"answered {status}: {answer[:300]!r}"
    matching = [v for v in allowed if v.status == status]
    assert matching, f"answered {status} {answer[:300]!r}; the contract says {_contract(allowed)}"
    if status != 200:
        event(f"{status} {matching[0].why}")  # the mix, in --hypothesis-show-statistics
        assert await store.counts() == (0, 0), f"a {status} answer stored rows"
        return
    doc = orjson.loads(answer)
    provider, scheme = matching[0].provider, matching[0].provider.removeprefix("service:")
    replayed = scheme in BODY_ONLY_SCHEMES and (provider, request.body) in history.bodies
    history.bodies.add((provider, request.body))
    if doc["status"] == "duplicate" and replayed:
        event("200 replayed body")
        return
    assert doc == {"status": "accepted", "event_id": matching[0].event_id}, (doc, matching)
    stored = await store.get(provider, matching[0].event_id)
    assert stored is not None, "accepted without a row"
    assert stored.body == request.body, "the row does not keep the body byte for byte"
    assert stored.payloads_match, "a dead letter does not keep the body byte for byte"
    found = [v for v in matching if stored.parked == ((v.error_class,) if v.error_class else ())]
    assert found, f"parked as {stored.parked}; the contract says {_contract(matching)}"
    event(f"200 {found[0].why}")
    counts = await store.counts()
    assert counts == (1, len(stored.parked)), f"stray rows: {counts}"

    again, answer = await send(request)
    assert again == 200, f"a retry answered {again} {answer[:300]!r}"
    assert orjson.loads(answer) == {"status": "duplicate", "event_id": matching[0].event_id}
    assert await store.counts() == counts, "a retry changed the tables"


async def check_not_genuine(
    send: Send, store: Store, request: Request, allowed_statuses: set[int]
) -> None:
    """Send a request that is not genuine: refused, never 5xx, nothing stored."""
    counts_before = await store.counts()
    status, answer = await send(request)
    event(f"{status}")
    assert status in allowed_statuses, (
        f"answered {status} {answer[:300]!r}; expected one of {sorted(allowed_statuses)}"
    )
    assert await store.counts() == counts_before, "a request that is not genuine stored rows"
