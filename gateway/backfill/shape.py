"""A fetched event shaped exactly as its webhook would have been: the scheme's own id
and type references, the provider's stored-header policy and type allow-list, and the
body digest where the scheme records one (GitHub). Only `source` differs."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from gateway.adapters.provider_api import Fetched, Listed
from gateway.core.backfill import exact_github_body, github_bodies
from gateway.core.model import Event, Source, webhook_event
from gateway.core.signatures import get_scheme
from gateway.settings import ProviderSettings


@dataclass(frozen=True)
class Shaped:
    event: Event
    #: False when a GitHub body had to be re-serialised without proof it is the
    #: webhook's own bytes (its digest may then differ from the webhook's).
    exact: bool = True


def shape(provider: ProviderSettings, item: Listed, fetched: Fetched, now: datetime) -> Shaped:
    """The `Event` the live path would have recorded for this request (`source` aside).

    Raises what `webhook_event` raises for a request without a usable event id.
    """
    scheme = get_scheme(provider.scheme)
    params = provider.params
    headers = dict(fetched.headers)
    body, exact = fetched.body, True
    if body is None:  # GitHub: the API gives the payload parsed; find its bytes
        candidates = github_bodies(fetched.payload)
        found = exact_github_body(candidates, headers.get("x-hub-signature-256"), params)
        body, exact = (found, True) if found is not None else (candidates[0], False)
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
    )
    return Shaped(event, exact)
