"""The two ingestion endpoints, `POST /webhooks/{provider}` and `POST /v1/events`, as
plain ASGI.

They carry all the traffic, and their cost per request is the gateway's main figure
(`make bench`). Starlette's request objects, middleware stack and route matching cost
more per request than verifying a signature and queueing the event for its group
commit, so these two paths speak ASGI directly; Starlette serves everything else
(health, metrics, the lifespan, 404 and 405).

Each request runs under a deadline (`gateway.ingest.deadlines`): `[http] request_timeout_s`
while its body is read, then `[ingest] commit_timeout_s` while it waits for its group's
commit.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import orjson
from starlette.types import Receive, Scope, Send

from gateway.core.events import shaper as fast_shape
from gateway.core.events.model import (
    Event,
    Failure,
    OrderedSubject,
    Outcome,
    awaiting_fetch,
    ordered_subjects,
    service_event,
)
from gateway.core.events.shaper import WebhookShaper
from gateway.core.failures.classify import sqlstate_is_bad_content
from gateway.core.providers import get_provider, get_scheme
from gateway.core.providers.base import Confirmation
from gateway.core.signatures import require_headers
from gateway.core.signatures.base import Verifier
from gateway.errors import (
    BadRequest,
    BodyTooLarge,
    ClientGone,
    DatabaseError,
    DatabaseUnavailable,
    RequestRejected,
    SignatureError,
    TransientError,
    Unauthorized,
    UnknownProvider,
    error_class_of,
)
from gateway.ingest import traced
from gateway.ingest.batches import Batched, accept_batch, answer_batch, batch_shaper
from gateway.ingest.certified import NeedsCertificate
from gateway.ingest.deadlines import Deadlines
from gateway.ingest.parts import IngestParts
from gateway.settings import (
    OrderingSettings,
    ProviderSettings,
    ServiceSettings,
    SettlementSettings,
)

log = logging.getLogger(__name__)

Headers = dict[str, str]
#: Verifies a request's headers and body and shapes them into an event (several, for
#: a provider that batches or answers in its own words: `ingest.batches`).
Shaper = Callable[[Headers, bytes], Event | Batched]
#: Checks what can be checked before the body is read; returns the request's shaper.
Gate = Callable[[Headers], Shaper]

WEBHOOKS_PREFIX = "/webhooks/"
EVENTS_PATH = "/v1/events"
#: The most characters of a name the sender chose that an answer or a log line repeats:
#: enough to spot a typo, too few to turn the gateway into an amplifier for a long path.
ECHO_MAX_CHARS = 64
_JSON = (b"content-type", b"application/json")


def request_headers(scope: Scope) -> Headers:
    """The request headers by lower-case name (ASGI servers lower-case them already).

    A repeated header keeps its last value, as Starlette's `dict(request.headers)` did.
    """
    return {name.decode("latin-1"): value.decode("latin-1") for name, value in scope["headers"]}


async def read_body(receive: Receive, declared: str | None, max_bytes: int) -> bytes:
    """The body, refused with `BodyTooLarge` as soon as it passes `max_bytes`.

    The limit is checked while reading, so an oversized body is never buffered whole.
    """
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise BodyTooLarge(f"body of {declared} bytes exceeds {max_bytes}")
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            raise ClientGone
        chunk: bytes = message.get("body", b"")
        size += len(chunk)
        if size > max_bytes:
            raise BodyTooLarge(f"body exceeds {max_bytes} bytes")
        if not message.get("more_body", False):
            if not chunks:
                return chunk  # the usual case: the whole body in one message
            chunks.append(chunk)
            return b"".join(chunks)
        chunks.append(chunk)


def authenticate(
    services: Mapping[str, ServiceSettings], authorization: str | None
) -> ServiceSettings:
    """The service whose bearer token this is; compared in constant time against all."""
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise Unauthorized("a bearer token is required")
    found = None
    for service in services.values():
        # An empty token is one this process did not read (`settings.secrets`): it
        # authenticates nothing, not even an empty bearer.
        if service.token and hmac.compare_digest(service.token.encode(), token.strip().encode()):
            found = service
    if found is None:
        raise Unauthorized("unknown token")
    return found


def ordered_subject(
    ordering: OrderingSettings, settlement: SettlementSettings
) -> OrderedSubject | None:
    """Which subjects' events get an ordering key: those `[settlement] subjects` takes,
    none at all with `[ordering] enabled = false`. Decided once, at start-up."""
    if not ordering.enabled:
        return None
    return ordered_subjects(settlement.subjects)


def webhook_shaper(provider: ProviderSettings, ordered: OrderedSubject | None = None) -> Shaper:
    """Verify `provider`'s signature, then shape the event (built once per provider: the
    scheme's keys and header names, and the shaping rules, are prepared here). Events on
    an `ordered` subject carry their key by the provider's `order_key` rules."""
    entry = get_provider(provider.scheme)
    scheme = entry.scheme
    params = provider.params
    confirmation = provider.confirmation
    shape_event = fast_shape.webhook_shaper(
        provider.name,
        scheme.id_ref(params),
        scheme.type_ref(params),
        header_policy=provider.headers,
        # A webhook that only names an object has the scheme's one type: `event_types`
        # is for the events its confirmation finds (`core.confirm.events`), unless
        # those keep their webhook's type.
        event_types=(
            None
            if confirmation is not None and not confirmation.keeps_types
            else provider.event_types
        ),
        order_rules=provider.order_key,
        ordered=ordered,
        decode=entry.document,
    )
    if entry.batch is not None or entry.answer.body is not None:
        return batch_shaper(entry, params, shape_event, confirmation)
    if entry.certificate is not None:  # PayPal: verified once its certificate is fetched
        return NeedsCertificate(
            provider.name, entry.certificate, params, shape_event, scheme.replay_digest
        )
    if confirmation is not None:  # Mollie classic: a fetch confirms it, later
        return _awaiting_confirmation(scheme.verifier(params), shape_event, confirmation)
    verify = scheme.verifier(params)
    # Hashed only for schemes whose signature leaves the id unsigned (`replay_digest` is
    # None for the others).
    replay_digest = None if scheme.authenticates_id(params) else scheme.replay_digest

    def shape(headers: Headers, body: bytes) -> Event:
        verify(headers, body, time.time())
        digest = None if replay_digest is None else replay_digest(params, headers, body)
        return shape_event(headers, body, datetime.now(UTC), digest)

    return shape


def _awaiting_confirmation(
    verify: Verifier, shape_event: WebhookShaper, confirmation: Confirmation
) -> Shaper:
    """The shaper of a provider whose webhook only names an object: the request is
    recorded but never published itself; the confirm stage fetches the object and
    records the events its answer holds (`gateway.confirm`). A request that cannot be
    read is parked as any other."""
    owed = confirmation.owed

    def shape(headers: Headers, body: bytes) -> Event:
        verify(headers, body, time.time())
        return awaiting_fetch(shape_event(headers, body, datetime.now(UTC), None), owed)

    return shape


def echoed(name: str) -> str:
    """`name` as an answer or a log may repeat it: quoted, escaped, and cut short."""
    text = repr(name)
    return text if len(text) <= ECHO_MAX_CHARS else text[:ECHO_MAX_CHARS] + "..."


def webhook_gate(
    providers: Mapping[str, ProviderSettings],
    ordering: OrderingSettings,
    settlement: SettlementSettings,
    name: str,
) -> Gate:
    """`POST /webhooks/{name}`: an unknown provider, or a request without its scheme's
    signature headers, is refused before the body is read (`ordering` and `settlement`
    decide which of its events get an ordering key: `ordered_subject`)."""
    provider = providers.get(name)
    if provider is None:
        problem = f"no provider named {echoed(name)} is configured"

        def refuse(headers: Headers) -> Shaper:
            raise UnknownProvider(problem)

        return refuse
    shaper = webhook_shaper(provider, ordered_subject(ordering, settlement))
    # Without these `verify` can only say `SignatureMissing`; checking them here spares
    # waiting up to `request_timeout_s` for a body that cannot be accepted.
    required = get_scheme(provider.scheme).required_headers(provider.params)
    refused_status = get_provider(provider.scheme).refused_status
    if refused_status != SignatureError.status_code:
        return _refused_as(refused_status, required, shaper)

    def gate(headers: Headers) -> Shaper:
        require_headers(headers, required)
        return shaper

    return gate


def _refused_as(status: int, required: tuple[str, ...], shaper: Shaper) -> Gate:
    """`webhook_gate`'s gate for a provider that wants its bad signatures answered with
    its own status (GoCardless: 498): the request's `SignatureError` carries it to the
    answer, under the same error class and metric outcome. Kept apart so the other
    providers' requests take no extra step."""

    def shape(headers: Headers, body: bytes) -> Event | Batched:
        try:
            return shaper(headers, body)
        except SignatureError as exc:
            exc.status_code = status
            raise

    def gate(headers: Headers) -> Shaper:
        try:
            require_headers(headers, required)
        except SignatureError as exc:
            exc.status_code = status
            raise
        return shape

    return gate


def service_gate(
    services: Mapping[str, ServiceSettings],
    ordering: OrderingSettings,
    settlement: SettlementSettings,
) -> Gate:
    """`POST /v1/events`: the bearer token is checked before the body is read."""
    ordered = ordered_subject(ordering, settlement)

    def gate(headers: Headers) -> Shaper:
        service = authenticate(services, headers.get("authorization"))

        def shape(headers: Headers, body: bytes) -> Event:
            return service_event(
                service.name,
                service.subjects,
                headers.get("idempotency-key"),
                headers,
                body,
                datetime.now(UTC),
                ordered,
            )

        return shape

    return gate


async def send_json(
    send: Send, status: int, doc: dict[str, Any], extra: tuple[tuple[bytes, bytes], ...] = ()
) -> None:
    body = orjson.dumps(doc)
    headers = [_JSON, (b"content-length", str(len(body)).encode()), *extra]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


# Past the complexity bar on purpose: the request path, kept in one frame for its latency.
async def ingest(  # noqa: C901
    parts: IngestParts,
    deadlines: Deadlines,
    scope: Scope,
    receive: Receive,
    send: Send,
    label: str,
    gate: Gate,
) -> None:
    """Shape the request into an event, pass it through the gate, answer after the
    commit, and map the exception tree onto HTTP answers and metrics."""
    started = time.perf_counter()
    task: asyncio.Task[Any] | None = asyncio.current_task()
    if task is None:
        raise RuntimeError("ingest must run inside an asyncio task")
    loop_time = asyncio.get_running_loop().time
    reading = True
    # Off, `UNTRACED` (one flag read per request); on and unsampled, no span objects.
    trace = traced.request_trace(scope["headers"], label, parts.tracing.trust_incoming)
    untraced = trace is traced.UNTRACED  # its steps do nothing: not even called
    status: int | None = 200
    error_class: str | None = None
    counted = False
    try:
        try:
            deadlines.set(task, loop_time() + parts.http.request_timeout_s)
            try:
                headers = request_headers(scope)
                shape = gate(headers)
                body = await read_body(
                    receive, headers.get("content-length"), parts.http.max_body_bytes
                )
                reading = False
                if isinstance(shape, NeedsCertificate):
                    shape = await shape.resolved(headers, parts.certificates)
                event = shape(headers, body)  # verified: a trusted sender's trace may join
                deadlines.set(task, loop_time() + parts.ingest.commit_timeout_s)
                try:
                    if isinstance(event, Batched):
                        outcomes = await accept_batch(parts, event, label)
                    elif untraced:
                        outcome = await parts.inbox.accept(event)
                    else:
                        event = trace.shaped(event)
                        with trace.commit_wait():  # the group commit, if sampled
                            outcome = await parts.inbox.accept(event)
                except DatabaseError as exc:
                    # A safety net: the shaping rules keep what PostgreSQL refuses out of
                    # every stored field, but content the database cannot store must be
                    # the sender's 400, never our 500.
                    if not sqlstate_is_bad_content(exc.sqlstate):
                        raise
                    raise BadRequest(
                        f"the database cannot store this content (SQLSTATE {exc.sqlstate})"
                    ) from exc
            finally:
                deadlines.clear(task)
        except asyncio.CancelledError:
            if not deadlines.expired(task):
                raise  # shutting down, not a deadline
            task.uncancel()
            if reading:
                raise BadRequest("request body not received in time") from None
            raise DatabaseUnavailable("commit did not finish in time") from None
        if isinstance(event, Batched):
            result, error_class = await answer_batch(parts, send, event, outcomes, label, _parked)
            counted = True  # per item
        else:
            if outcome is Outcome.ACCEPTED and event.failure is not None:
                _parked(parts, event, event.failure)
                error_class = event.failure.error_class
            result = outcome.value
            if log.isEnabledFor(logging.DEBUG):
                log.debug(
                    "event recorded",
                    extra={"provider": event.provider, "event_id": event.event_id,
                           "outcome": result},
                )  # fmt: skip
            await send_json(send, 200, {"status": result, "event_id": event.event_id})
    except RequestRejected as exc:
        result, status, error_class = exc.error_class.lower(), exc.status_code, exc.error_class
        log.info(
            "request rejected",
            extra={
                "provider": label,
                "status": exc.status_code,
                "error_class": exc.error_class,
                "reason": str(exc),
            },
        )
        await send_json(send, exc.status_code, {"error": result, "detail": str(exc)})
    except TransientError as exc:
        result, status, error_class = "unavailable", 503, exc.error_class
        log.warning("event not made durable", extra={"provider": label, "error": repr(exc)})
        retry_after = (b"retry-after", str(parts.http.retry_after_s).encode())
        await send_json(
            send, 503, {"error": "unavailable", "detail": "try again later"}, (retry_after,)
        )
    except ClientGone:
        result, status = "client_disconnect", None  # nobody is left to answer
    except Exception as exc:
        result, status, error_class = "error", 500, error_class_of(exc)
        log.exception("ingestion request failed unexpectedly", extra={"provider": label})
        await send_json(send, 500, {"error": "internal", "detail": "unexpected error"})
    metrics = parts.metrics
    if not counted:
        metrics.webhooks_total.inc(provider=label, outcome=result)
    metrics.request_seconds.observe(time.perf_counter() - started)
    if not untraced:
        trace.done(result, status, error_class)


def _parked(parts: IngestParts, event: Event, failure: Failure) -> None:
    """An accepted event that cannot go further was parked in the DLQ with its row."""
    parts.metrics.dlq_total.inc(stage="ingest", error_class=failure.error_class)
    log.warning(
        "event accepted and parked in the DLQ",
        extra={
            "provider": event.provider,
            "event_id": event.event_id,
            "error_class": failure.error_class,
        },
    )
