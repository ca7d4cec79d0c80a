"""Stripe's `GET /v1/events`, plain HTTP.

Stripe keeps 30 days of events and lists them newest first; `created[gte]`/`created[lt]`
bound the window on the server and `types[]` the types, and `starting_after` (the last
event id of a page) is the cursor while `has_more` is true. Each listed event is the
object a webhook delivers, so it needs no second call.

The official `stripe` library is not used for this one call: it reads a whole answer
into memory and parses it without a bound, and the backfill must cap both
(`http_json`). The request is the library's: a bearer secret key, form-style
parameters, and no `Stripe-Version`, so events render in the account's default version
(the one webhook endpoints default to).
"""

from __future__ import annotations

from gateway.adapters.provider_api import Fetched, Listed, Page
from gateway.adapters.provider_api.entries import (
    EntryShape,
    body_entries,
    last_id_cursor,
    listing_data,
)
from gateway.adapters.provider_api.http_json import ApiCalls
from gateway.adapters.provider_api.retrying import REAL_CLOCK, Clock
from gateway.core.backfill.decisions import Window
from gateway.core.backfill.items import unix_time
from gateway.errors import BackfillUsageError
from gateway.settings.provider_api import ProviderApi

#: Stripe's largest page; `types[]` takes at most 20 types.
PAGE_LIMIT = 100
MAX_TYPES = 20
#: The headers a Stripe webhook carries that the gateway keeps (the signature is not
#: kept, and an event fetched over the API has none).
HEADERS = {"content-type": "application/json; charset=utf-8"}

#: Stripe's events list: the event itself, pretty-printed as Stripe delivers it.
SHAPE = EntryShape(
    id_field="id",
    type_field="type",
    time_field="created",
    read_time=unix_time,
    indent=True,
    headers=HEADERS,
)


class StripeEvents:
    """An `EventSource` over Stripe's events API."""

    def __init__(self, api: ProviderApi, clock: Clock = REAL_CLOCK) -> None:
        self._url = f"{api.url}/v1/events"
        self._calls = ApiCalls(
            api,
            {
                "Authorization": f"Bearer {api.key}",
                "Accept": "application/json",
                "User-Agent": "payments-webhook-gateway-backfill",
            },
            clock,
        )

    async def page(self, cursor: str | None, window: Window) -> Page:
        if len(window.types) > MAX_TYPES:
            raise BackfillUsageError(
                f"--type: Stripe filters at most {MAX_TYPES} types at once, "
                f"{len(window.types)} given; run one backfill per group of types"
            )
        params = [
            ("limit", str(PAGE_LIMIT)),
            ("created[gte]", str(int(window.since.timestamp()))),
            # Stripe's `created` is whole seconds: [since, until) in seconds.
            ("created[lt]", str(int(window.until.timestamp()))),
        ]
        params += [("types[]", t) for t in window.types]
        if cursor:
            params.append(("starting_after", cursor))
        what = "GET /v1/events"
        doc, _ = await self._calls.get(self._url, params, what)
        data = listing_data(doc, what)
        items, unusable = body_entries(data, SHAPE)
        if doc.get("has_more") is not True or not data:
            return Page(items, None, unusable)
        # The cursor is the last entry's own id.
        return Page(items, last_id_cursor(data, "id", unusable), unusable)

    async def fetch(self, item: Listed) -> Fetched:
        return Fetched(item.headers, item.body)

    async def close(self) -> None:
        await self._calls.close()
