"""Paddle Billing's `GET /events`, plain HTTP.

Listed newest first (`order_by=id[DESC]`), up to 200 a page, the cursor being `after`
(the last event id of a page, also in `meta.pagination.next`) while
`meta.pagination.has_more` is true; `event_type` filters types. There is no time
filter, so the window is applied here. Each event (`event_id`, `event_type`,
`occurred_at`, `data`) is what a notification carries, bar its `notification_id`.
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

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
from gateway.core.backfill.items import entry_id, iso_time
from gateway.settings.provider_api import ProviderApi

PAGE_LIMIT = 200
HEADERS = {"content-type": "application/json"}

#: Paddle's events list: the notification's body, compact JSON as Paddle sends it.
SHAPE = EntryShape(
    id_field="event_id",
    type_field="event_type",
    time_field="occurred_at",
    read_time=iso_time,
    indent=False,
    headers=HEADERS,
)


class PaddleEvents:
    """An `EventSource` over Paddle's events API."""

    def __init__(self, api: ProviderApi, clock: Clock = REAL_CLOCK) -> None:
        self._url = f"{api.url}/events"
        self._calls = ApiCalls(
            api, {"Authorization": f"Bearer {api.key}", "Accept": "application/json"}, clock
        )

    async def page(self, cursor: str | None, window: Window) -> Page:
        params = [("order_by", "id[DESC]"), ("per_page", str(PAGE_LIMIT))]
        if window.types:
            params.append(("event_type", ",".join(window.types)))
        if cursor:
            params.append(("after", cursor))
        what = "GET /events"
        doc, _ = await self._calls.get(self._url, params, what)
        data = listing_data(doc, what)
        items, unusable = body_entries(data, SHAPE)
        meta = doc.get("meta")
        pagination = meta.get("pagination") if isinstance(meta, dict) else None
        if not isinstance(pagination, dict) or pagination.get("has_more") is not True or not data:
            return Page(items, None, unusable)
        # The cursor is saved in backfill_progress and sent back: held to an entry id's
        # rules (length, no control characters), else the page's last id is the cursor.
        after = parse_qs(urlparse(str(pagination.get("next") or "")).query).get("after")
        if after and entry_id(after[0], "after")[1] is None:
            return Page(items, after[0], unusable)
        return Page(items, last_id_cursor(data, "event_id", unusable), unusable)

    async def fetch(self, item: Listed) -> Fetched:
        return Fetched(item.headers, item.body)

    async def close(self) -> None:
        await self._calls.close()
