"""Requests that carry several events, or that their provider wants answered in its
own words: Adyen's notifications, each item signed on its own, answered `[accepted]`;
GoCardless's, signed together.

The body is split into one body per item (`Provider.batch`: over its bounds the whole
request is refused, 413, before anything is stored). Each item is shaped like any
single event, so each is its own row under its own id, deduplicated, ordered and
settled like any other. Items signed one by one (Adyen) are split first and each is
verified on its own: an item whose signature fails is stored nowhere and counted, and
never a reason to refuse its neighbours; only when no item verifies is the request
refused, with the first item's reason. A request signed whole (GoCardless,
`Batch.signed_whole`) is verified once before the split: a bad signature refuses
every item. The answer comes
once every verified item is durably recorded: should one commit fail, the provider
retries the whole request, and the items already recorded are its duplicates.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import orjson
from starlette.types import Send

from gateway.core.events.model import Event, Failure, Outcome, awaiting_fetch
from gateway.core.events.shaper import WebhookShaper
from gateway.core.providers import Provider
from gateway.core.providers.base import Confirmation
from gateway.core.signatures.base import Headers, Scheme, SchemeParams
from gateway.errors import SignatureError
from gateway.ingest.parts import IngestParts

log = logging.getLogger(__name__)

_JSON = b"application/json"


@dataclass(frozen=True)
class Batched:
    """A request's verified items as events, what was refused, and its answer."""

    events: tuple[Event, ...]
    refused: tuple[SignatureError, ...]
    #: The body the provider expects, with its content type; None: the gateway's JSON.
    answer: tuple[bytes, bytes] | None


def batch_shaper(
    provider: Provider,
    params: SchemeParams,
    shape_event: WebhookShaper,
    confirmation: Confirmation | None = None,
) -> Callable[[Headers, bytes], Batched]:
    """Split, verify each item, shape each verified one; or, for a request signed whole,
    verify it, split it, shape each item (built once per provider). With a
    `confirmation`, an item whose type it owes a fetch waits for it (GoCardless's
    payments, refunds and payouts: the amount is on the object)."""
    scheme: Scheme = provider.scheme
    if confirmation is not None:
        shape_event = _awaiting(shape_event, confirmation.owed)

    verify = scheme.verifier(params)
    split = provider.batch.split if provider.batch is not None else _whole
    whole = provider.batch is not None and provider.batch.signed_whole
    if whole and not scheme.authenticates_id(params):
        raise ValueError(f"{provider.name}: a request signed whole must sign its items' ids")
    replay_digest = None if scheme.authenticates_id(params) else scheme.replay_digest
    answer = provider.answer
    answered = None if answer.body is None else (answer.body, answer.content_type)

    def shape(headers: Headers, body: bytes) -> Batched:
        now_s, received_at = time.time(), datetime.now(UTC)
        if whole:
            verify(headers, body, now_s)  # the request's one signature, before any item
            # Each id is read from the signed body, so no replay digest is needed (one
            # digest of the request would be every item's and make them collide).
            items = split(body)
            return Batched(tuple(shape_event(headers, i, received_at, None) for i in items),
                           (), answered)  # fmt: skip
        items = split(body)  # BatchTooLarge before anything is verified
        events: list[Event] = []
        refused: list[SignatureError] = []
        for item in items:
            try:
                verify(headers, item, now_s)
            except SignatureError as exc:
                refused.append(exc)
                continue
            digest = None if replay_digest is None else replay_digest(params, headers, item)
            events.append(shape_event(headers, item, received_at, digest))
        if not events:
            raise refused[0]
        return Batched(tuple(events), tuple(refused), answered)

    return shape


def _awaiting(shape_event: WebhookShaper, owed: Callable[[str | None], bool]) -> WebhookShaper:
    def shape(headers: Headers, body: bytes, received_at: datetime, digest: bytes | None) -> Event:
        return awaiting_fetch(shape_event(headers, body, received_at, digest), owed)

    return shape


def _whole(body: bytes) -> tuple[bytes, ...]:
    return (body,)


async def accept_batch(parts: IngestParts, batched: Batched, label: str) -> list[Outcome]:
    """Record every verified item (each in the group commit, side by side); return
    their outcomes in order once all are durable. A refused item is logged and counted
    under its class, never stored."""
    metrics = parts.metrics
    for exc in batched.refused:
        metrics.webhooks_total.inc(provider=label, outcome=exc.error_class.lower())
        log.info(
            "batch item refused",
            extra={"provider": label, "error_class": exc.error_class, "reason": str(exc)},
        )
    accept = parts.inbox.accept
    return list(await asyncio.gather(*(accept(event) for event in batched.events)))


async def answer_batch(
    parts: IngestParts,
    send: Send,
    batched: Batched,
    outcomes: list[Outcome],
    label: str,
    parked: Callable[[IngestParts, Event, Failure], None],
) -> tuple[str, str | None]:
    """Count and park each item as a single event would be, then answer: the
    provider's own words, or the gateway's JSON with each item's outcome. Returns the
    request's result (`accepted` when any item was new) and the first parked class."""
    error_class = None
    for event, outcome in zip(batched.events, outcomes, strict=True):
        parts.metrics.webhooks_total.inc(provider=label, outcome=outcome.value)
        if outcome is Outcome.ACCEPTED and event.failure is not None:
            parked(parts, event, event.failure)
            error_class = error_class or event.failure.error_class
    new = Outcome.ACCEPTED in outcomes
    result = (Outcome.ACCEPTED if new else Outcome.DUPLICATE).value
    if batched.answer is not None:
        body, content_type = batched.answer
    else:
        items = [{"status": o.value, "event_id": e.event_id}
                 for e, o in zip(batched.events, outcomes, strict=True)]  # fmt: skip
        body, content_type = orjson.dumps({"status": result, "events": items}), _JSON
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})
    return result, error_class
