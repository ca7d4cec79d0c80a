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
from typing import Any
from urllib.parse import parse_qs, urlparse

from gateway.adapters.provider_api import Fetched, Listed, Page
from gateway.adapters.provider_api.http_json import ApiCalls
from gateway.adapters.provider_api.retrying import REAL_CLOCK, Clock
from gateway.core.backfill.decisions import Window, lower_headers
from gateway.core.backfill.items import encode, entry_id, entry_type, iso_time, not_object
from gateway.core.bodies.content import body_digest_id
from gateway.errors import ProviderApiAnswerInvalid
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


def _listed(delivery: Any) -> Listed | str:
    """One delivery of the listing; a line when it has no numeric id to fetch it by."""
    failure = not_object(delivery)
    if failure is not None:
        body, _ = encode(delivery, indent=False)
        if body is None:
            return "a delivery that is not an object and cannot be encoded"
        return Listed(body_digest_id(body), None, None, body=body, failure=failure)
    handle = delivery.get("id")
    if not isinstance(handle, int) or isinstance(handle, bool) or handle <= 0:
        return f"a delivery without a numeric id ({str(handle)[:64]!r}): it cannot be fetched"
    guid, id_failure = entry_id(delivery.get("guid"), "guid")
    when, time_failure = iso_time(delivery.get("delivered_at"), "delivered_at")
    return Listed(
        guid,  # "": the body's digest, once fetched
        entry_type(delivery.get("event")),
        when,
        handle=str(handle),
        failure=id_failure or time_failure,
    )


class GitHubDeliveries:
    """An `EventSource` over one repository's or organisation's hook deliveries."""

    def __init__(self, api: ProviderApi, clock: Clock = REAL_CLOCK) -> None:
        owner = f"repos/{api.repo}" if api.repo else f"orgs/{api.org}"
        self._base = f"{api.url}/{owner}/hooks/{api.hook_id}/deliveries"
        self._calls = ApiCalls(
            api,
            {
                "Authorization": f"Bearer {api.key}",
                "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": API_VERSION,
                "User-Agent": "payments-webhook-gateway-backfill",
            },
            clock,
        )

    async def page(self, cursor: str | None, window: Window) -> Page:
        params = [("per_page", str(PAGE_LIMIT))]
        if cursor:
            params.append(("cursor", cursor))
        what = "GET hook deliveries"
        doc, headers = await self._calls.get(self._base, params, what)
        if not isinstance(doc, list):
            raise ProviderApiAnswerInvalid(
                f"{what}: the answer is a JSON {type(doc).__name__}, not a list of deliveries"
            )
        items: list[Listed] = []
        unusable: list[str] = []
        seen: set[str] = set()
        for delivery in doc:
            listed = _listed(delivery)
            if isinstance(listed, str):
                unusable.append(listed)
                continue
            if listed.event_id and listed.failure is None:
                if listed.event_id in seen:  # a redelivery of one already on this page
                    continue
                seen.add(listed.event_id)
            items.append(listed)
        return Page(items, next_cursor_from_link(headers.get("link")), unusable)

    async def fetch(self, item: Listed) -> Fetched:
        if item.body is not None:  # an entry kept as listed (not a delivery object)
            return Fetched(item.headers, item.body)
        what = f"GET hook delivery {item.handle}"
        doc, _ = await self._calls.get(f"{self._base}/{item.handle}", [], what)
        request = doc.get("request") if isinstance(doc, dict) else None
        if not isinstance(request, dict):
            raise ProviderApiAnswerInvalid(f"{what}: the answer holds no request object")
        headers = request.get("headers")
        return Fetched(
            lower_headers(headers if isinstance(headers, dict) else {}),
            payload=request.get("payload"),
        )

    async def close(self) -> None:
        await self._calls.close()
