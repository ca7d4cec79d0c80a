"""Paddle Billing's `GET /events`, plain HTTP.

Listed newest first (`order_by=id[DESC]`), up to 200 a page, the cursor being `after`
(the last event id of a page, also in `meta.pagination.next`) while
`meta.pagination.has_more` is true; `event_type` filters types. There is no time
filter, so the window is applied here. Each event (`event_id`, `event_type`,
`occurred_at`, `data`) is what a notification carries, bar its `notification_id`.
"""

from __future__ import annotations

from datetime import datetime
from urllib.parse import parse_qs, urlparse

import httpx
import orjson

from gateway.adapters.provider_api import Fetched, Listed, Page
from gateway.adapters.provider_api.http_json import get_json
from gateway.adapters.provider_api.retrying import REAL_CLOCK, Clock, call_api
from gateway.core.backfill import Window
from gateway.settings.provider_api import ProviderApi

PAGE_LIMIT = 200
HEADERS = {"content-type": "application/json"}


class PaddleEvents:
    """An `EventSource` over Paddle's events API."""

    def __init__(self, api: ProviderApi, clock: Clock = REAL_CLOCK) -> None:
        self._url = f"{api.url}/events"
        self._client = httpx.AsyncClient(
            headers={"Authorization": f"Bearer {api.key}", "Accept": "application/json"},
            timeout=30.0,
        )
        self._clock = clock

    async def page(self, cursor: str | None, window: Window) -> Page:
        params = {"order_by": "id[DESC]", "per_page": str(PAGE_LIMIT)}
        if window.types:
            params["event_type"] = ",".join(window.types)
        if cursor:
            params["after"] = cursor
        doc, _ = await call_api(
            lambda: get_json(self._client, self._url, params), "GET /events", clock=self._clock
        )
        items = [
            Listed(
                event_id=str(event["event_id"]),
                event_type=event.get("event_type"),
                occurred_at=datetime.fromisoformat(
                    str(event["occurred_at"]).replace("Z", "+00:00")
                ),
                # Paddle sends notifications as compact JSON.
                body=orjson.dumps(event),
                headers=HEADERS,
            )
            for event in doc.get("data", [])
        ]
        pagination = (doc.get("meta") or {}).get("pagination") or {}
        if not pagination.get("has_more") or not items:
            return Page(items, None)
        after = parse_qs(urlparse(str(pagination.get("next") or "")).query).get("after")
        return Page(items, after[0] if after else items[-1].event_id)

    async def fetch(self, item: Listed) -> Fetched:
        return Fetched(item.headers, item.body)

    async def close(self) -> None:
        await self._client.aclose()
