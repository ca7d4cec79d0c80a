"""GitHub's webhook deliveries API, plain HTTP.

`GET /repos/{owner}/{repo}/hooks/{hook_id}/deliveries` (or `/orgs/{org}/hooks/...`)
lists a hook's deliveries of the last 3 days, newest first, 100 a page, the next page's
`cursor` in the `Link` header. One event (one `guid`, the `X-GitHub-Delivery` a webhook
carries) may have several deliveries (redeliveries); the page keeps the first of each.
`GET .../deliveries/{id}` gives the request's headers and its payload, parsed. GitHub
has no server-side time filter, so the window is applied here and the listing stops at
the first page that reaches past `since`.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any
from urllib.parse import parse_qs, urlparse

import httpx

from gateway.adapters.provider_api import Fetched, Listed, Page
from gateway.adapters.provider_api.http_json import get_json
from gateway.adapters.provider_api.retrying import REAL_CLOCK, Clock, call_api
from gateway.core.backfill import Window, lower_headers
from gateway.settings.provider_api import ProviderApi

PAGE_LIMIT = 100
API_VERSION = "2022-11-28"


_LINK_NEXT = re.compile(r'<([^>]*)>\s*;\s*rel="?next"?')


def next_cursor_from_link(link: str | None) -> str | None:
    """The `cursor` of the `rel="next"` URL in a GitHub `Link` header, if any."""
    found = _LINK_NEXT.search(link or "")
    if found is None:
        return None
    cursor = parse_qs(urlparse(found.group(1)).query).get("cursor")
    return cursor[0] if cursor and cursor[0] else None


def _when(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


class GitHubDeliveries:
    """An `EventSource` over one repository's or organisation's hook deliveries."""

    def __init__(self, api: ProviderApi, clock: Clock = REAL_CLOCK) -> None:
        owner = f"repos/{api.repo}" if api.repo else f"orgs/{api.org}"
        self._base = f"{api.url}/{owner}/hooks/{api.hook_id}/deliveries"
        self._client = httpx.AsyncClient(
            headers={
                "Authorization": f"Bearer {api.key}",
                "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": API_VERSION,
                "User-Agent": "payments-webhook-gateway-backfill",
            },
            timeout=30.0,
        )
        self._clock = clock

    async def page(self, cursor: str | None, window: Window) -> Page:
        params = {"per_page": str(PAGE_LIMIT)}
        if cursor:
            params["cursor"] = cursor
        doc, headers = await call_api(
            lambda: get_json(self._client, self._base, params),
            "GET hook deliveries",
            clock=self._clock,
        )
        items: list[Listed] = []
        seen: set[str] = set()
        for delivery in doc if isinstance(doc, list) else []:
            guid = str(delivery.get("guid") or "")
            if not guid or guid in seen:
                continue
            seen.add(guid)
            items.append(
                Listed(
                    event_id=guid,
                    event_type=delivery.get("event"),
                    occurred_at=_when(str(delivery["delivered_at"])),
                    handle=str(delivery["id"]),
                )
            )
        return Page(items, next_cursor_from_link(headers.get("link")))

    async def fetch(self, item: Listed) -> Fetched:
        doc, _ = await call_api(
            lambda: get_json(self._client, f"{self._base}/{item.handle}"),
            f"GET hook delivery {item.handle}",
            clock=self._clock,
        )
        request: dict[str, Any] = doc.get("request") or {}
        return Fetched(lower_headers(request.get("headers") or {}), payload=request.get("payload"))

    async def close(self) -> None:
        await self._client.aclose()
