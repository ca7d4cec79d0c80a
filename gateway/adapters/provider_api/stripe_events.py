"""Stripe's `GET /v1/events` through the official `stripe` library.

Stripe keeps 30 days of events and lists them newest first; `created[gte]`/`created[lt]`
bound the window on the server and `types[]` the types, and `starting_after` (the last
event id of a page) is the cursor while `has_more` is true. Each listed event is the
object a webhook delivers, so it needs no second call. The library's own retries are
off (`max_network_retries=0`): `call_api` applies the backfill's rules to every call.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import orjson
import stripe

from gateway.adapters.provider_api import Fetched, Listed, Page
from gateway.adapters.provider_api.retrying import REAL_CLOCK, Answer, Clock, call_api
from gateway.core.backfill import Window
from gateway.errors import BackfillUsageError
from gateway.settings.provider_api import ProviderApi

#: Stripe's largest page; `types[]` takes at most 20 types.
PAGE_LIMIT = 100
MAX_TYPES = 20
#: The headers a Stripe webhook carries that the gateway keeps (the signature is not
#: kept, and an event fetched over the API has none).
HEADERS = {"content-type": "application/json; charset=utf-8"}


def stripe_body(event: Any) -> bytes:
    """The event as a webhook body: Stripe sends the event object pretty-printed with
    two-space indents, keys in the API's order."""
    return orjson.dumps(event, option=orjson.OPT_INDENT_2)


def _header(headers: Any, name: str) -> str | None:
    for key, value in dict(headers or {}).items():
        if str(key).lower() == name:
            return str(value)
    return None


class StripeEvents:
    """An `EventSource` over Stripe's events API."""

    def __init__(self, api: ProviderApi, clock: Clock = REAL_CLOCK) -> None:
        self._http = stripe.HTTPXClient(timeout=30)
        self._client = stripe.StripeClient(
            api.key,
            base_addresses={"api": api.url},
            max_network_retries=0,
            http_client=self._http,
        )
        self._clock = clock

    async def page(self, cursor: str | None, window: Window) -> Page:
        if len(window.types) > MAX_TYPES:
            raise BackfillUsageError(
                f"--type: Stripe filters at most {MAX_TYPES} types at once, "
                f"{len(window.types)} given; run one backfill per group of types"
            )
        params: dict[str, Any] = {
            "limit": PAGE_LIMIT,
            "created": {
                "gte": int(window.since.timestamp()),
                # Stripe's `created` is whole seconds: [since, until) in seconds.
                "lt": int(window.until.timestamp()),
            },
        }
        if window.types:
            params["types"] = list(window.types)
        if cursor:
            params["starting_after"] = cursor

        async def call() -> Answer[Any]:
            try:
                listed = await self._client.v1.events.list_async(params=params)  # type: ignore[arg-type]
            except stripe.APIConnectionError as exc:
                return Answer(None, detail=type(exc).__name__)
            except stripe.StripeError as exc:
                return Answer(
                    exc.http_status,
                    _header(exc.headers, "retry-after"),
                    detail=exc.user_message or "",
                )
            response = listed.last_response
            doc = response.data if response is not None else listed.to_dict()
            return Answer(200, value=doc)

        doc = await call_api(call, "GET /v1/events", clock=self._clock)
        items = [
            Listed(
                event_id=str(event["id"]),
                event_type=event.get("type"),
                occurred_at=datetime.fromtimestamp(int(event.get("created", 0)), UTC),
                body=stripe_body(event),
                headers=HEADERS,
            )
            for event in doc.get("data", [])
        ]
        more = bool(doc.get("has_more")) and bool(items)
        return Page(items, items[-1].event_id if more else None)

    async def fetch(self, item: Listed) -> Fetched:
        return Fetched(item.headers, item.body)

    async def close(self) -> None:
        await self._http.close_async()  # type: ignore[no-untyped-call]  # stripe: untyped
