"""A fetched event shaped exactly as its webhook would have been: the scheme's own id
and type references, the provider's stored-header policy and type allow-list, and the
body digest where the scheme records one (GitHub). Only `source` differs.

An entry the listing's rules found malformed (`Listed.failure`), or whose body is over
`http.max_body_bytes`, is shaped as a parked event instead: recorded under its id (or
its body's digest when the id is what is wrong), no subject, the failure saying why,
so the gate keeps it once and the dead-letter table shows it.

A provider whose webhooks are confirmed by a fetch (`ProviderSettings.confirmation`:
GoCardless with an API key) has the events that owe one recorded as the live path
records them: unpublished, waiting for the confirm stage.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import orjson

from gateway.adapters.provider_api import Fetched, Listed
from gateway.core.backfill.decisions import exact_github_body, github_bodies
from gateway.core.backfill.items import encode
from gateway.core.bodies.content import body_digest_id, nul_free, storable_headers
from gateway.core.events.model import (
    MAX_EVENT_TYPE_CHARS,
    Event,
    Failure,
    OrderedSubject,
    Source,
    awaiting_fetch,
    webhook_event,
)
from gateway.core.providers import get_provider, get_scheme
from gateway.errors import ErrorClass, ProviderApiAnswerInvalid
from gateway.settings import ProviderSettings


@dataclass(frozen=True)
class Shaped:
    event: Event
    #: False when a GitHub body had to be re-serialised without proof it is the
    #: webhook's own bytes (its digest may then differ from the webhook's).
    exact: bool = True


def shape(
    provider: ProviderSettings,
    item: Listed,
    fetched: Fetched,
    now: datetime,
    max_body_bytes: int,
    ordered: OrderedSubject | None = None,
) -> Shaped:
    """The `Event` the live path would have recorded for this request (`source` aside),
    its ordering key included (events on an `ordered` subject, by the provider's rules).

    Raises what `webhook_event` raises for a request without a usable event id, and
    `ProviderApiAnswerInvalid` for a payload no encoder can write.
    """
    scheme = get_scheme(provider.scheme)
    params = provider.params
    headers = dict(fetched.headers)
    body, exact, failure = fetched.body, True, item.failure
    if body is None:  # GitHub: the API gives the payload parsed; find its bytes
        try:
            candidates = github_bodies(fetched.payload)
        except orjson.JSONEncodeError:  # nesting past 254, an integer past 64 bits
            body, encoding = encode(fetched.payload, indent=False)
            if body is None:
                raise ProviderApiAnswerInvalid(
                    f"delivery {item.handle}: its payload cannot be encoded"
                ) from None
            exact, failure = False, failure or encoding
        else:
            found = exact_github_body(candidates, headers.get("x-hub-signature-256"), params)
            body, exact = (found, True) if found is not None else (candidates[0], False)
    if failure is None and len(body) > max_body_bytes:
        failure = Failure(
            ErrorClass.BACKFILL_ITEM_TOO_LARGE,
            f"the {len(body)}-byte body is over http.max_body_bytes ({max_body_bytes})",
        )
    if failure is not None:
        digest = scheme.replay_digest(params, headers, body)  # GitHub's replay guard holds
        return Shaped(_parked(provider, item, headers, body, now, failure, digest), exact)
    id_ref = scheme.id_ref(params)
    if id_ref.source == "header":  # the listing's id is the delivery's own header
        headers.setdefault(id_ref.name, item.event_id)
    type_ref = scheme.type_ref(params)
    if type_ref.source == "header" and item.event_type:
        headers.setdefault(type_ref.name, item.event_type)
    event = webhook_event(
        provider.name,
        id_ref,
        type_ref,
        headers,
        body,
        now,
        header_policy=provider.headers,
        event_types=provider.event_types,
        body_sha256=scheme.replay_digest(params, headers, body),
        source=Source.BACKFILL,
        order_rules=provider.order_key,
        ordered=ordered,
        decode=get_provider(provider.scheme).document,  # a body that is not JSON (Zarinpal's)
    )
    confirmation = provider.confirmation
    if confirmation is not None:
        # As the live path records it (`ingest.batches`): an event whose movement needs
        # the object's fetch (a GoCardless payment's) is recorded unpublished, with the
        # fetch owed (`record_events`), and only its confirmed copy is published.
        event = awaiting_fetch(event, confirmation.owed)
    return Shaped(event, exact)


def _parked(
    provider: ProviderSettings,
    item: Listed,
    headers: dict[str, str],
    body: bytes,
    now: datetime,
    failure: Failure,
    body_sha256: bytes | None,
) -> Event:
    """A malformed entry as the gate records it: kept, never published."""
    event_id = item.event_id
    if not event_id or failure.error_class == ErrorClass.BACKFILL_ITEM_ID_INVALID:
        event_id = body_digest_id(body)
    kept, _ = storable_headers(headers, provider.headers)
    event_type = nul_free(item.event_type) if item.event_type else None
    return Event(
        provider.name,
        event_id,
        event_type[:MAX_EVENT_TYPE_CHARS] if event_type else None,
        None,
        kept,
        body,
        now,
        failure,
        body_sha256,
        Source.BACKFILL,
    )
