"""Square's Events API, `POST /v2/events` (SearchEvents), plain HTTP.

Square keeps events searchable for 28 days, only those that occurred while events were
enabled for the application (`PUT /v2/events/enable`: "All events are disabled by
default"), and answers a personal access token only, never an OAuth token
(developer.squareup.com/docs/events-api/overview).

The request is a JSON body (square/connect-api-specification `api.json`,
`SearchEventsRequest`): `limit` (at most 100), `query.filter.created_at`
(`start_at`/`end_at`, RFC 3339) and `query.filter.event_types` bound the window and the
types on the server, and `query.sort` `{"field": "DEFAULT", "order": "DESC"}` lists
newest first (`DEFAULT` sorts by `created_at`). The answer is `{"events": [...],
"metadata": [...], "cursor": ...}`; a `cursor` (at most 256 characters) while there is
more ("If empty, this is the final response"), sent back with "the original query". The
query is rebuilt from the window alone, so a continued run sends the query that gave
its saved cursor. A 200 that reports `errors` has no `events` (`SearchEventsResponse`):
it fails its page.

Each event (`Event`: `merchant_id`, `location_id`, `type`, `event_id`, `created_at`,
`data` {`type`, `id`, `deleted`, `object`}) is the envelope a webhook delivers, and is
recorded re-serialised as compact JSON. It is not the webhook's own bytes, and the two
may differ in fields: `Event` has a `location_id` for every type, where the webhook
schemas of payments and refunds (`PaymentCreatedEvent`, ...) have none, and the
search's `metadata` (each event's `api_version`) is not part of it. Square signs the
notification URL with the body, and a listed event carries no signature: the API's
answer over TLS is the whole proof (docs/operations.md, "What a backfilled event
proves").

Not confirmed from a source: whether `start_at` and `end_at` are inclusive (`TimeRange`
leaves it to each endpoint, and SearchEvents does not say), so the run keeps
`[since, until)` itself; whether the `Square-Version` sent changes how an event's `data`
is rendered (an event's version is "the default API version of the developer
application at the time when the event was created"), so the version is pinned; and
the zone of `created_at`: the schema says RFC 3339, but SearchEvents' own example
writes one without a zone (`2022-04-26T10:08:40.454726`), and such an entry is parked
(`BACKFILL_ITEM_TIME_INVALID`) rather than guessed to be UTC. The header kept,
`content-type: application/json`, is the one of Square's webhook samples as
hookdeck/webhook-samples copies them from Square's documentation [2nd].
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from gateway.adapters.provider_api import Fetched, Listed, Page
from gateway.adapters.provider_api.entries import EntryShape, body_entries
from gateway.adapters.provider_api.http_json import ApiCalls
from gateway.adapters.provider_api.retrying import REAL_CLOCK, Clock
from gateway.core.backfill.decisions import Window
from gateway.core.backfill.items import iso_time
from gateway.core.bodies.content import has_control_chars
from gateway.errors import ProviderApiAnswerInvalid, ProviderApiRefused
from gateway.settings.provider_api import ProviderApi

#: SearchEvents' largest page (`SearchEventsRequest.limit`: "Default: 100").
PAGE_LIMIT = 100
#: `SearchEventsRequest.cursor`'s `maxLength`.
MAX_CURSOR_CHARS = 256
#: The `Square-Version` of squareup 45.1.0.20260819 (square-python-sdk,
#: `src/square/core/client_wrapper.py`).
SQUARE_VERSION = "2026-08-19"
HEADERS = {"content-type": "application/json"}

#: Square's events: the webhook's envelope, compact JSON.
SHAPE = EntryShape(
    id_field="event_id",
    type_field="type",
    time_field="created_at",
    read_time=iso_time,
    indent=False,
    headers=HEADERS,
)


def rfc3339(when: datetime) -> str:
    """`when` as RFC 3339 in UTC (`Z`), as `TimeRange` takes it."""
    return when.astimezone(UTC).isoformat().replace("+00:00", "Z")


def search_query(window: Window, cursor: str | None) -> dict[str, Any]:
    """The SearchEvents body of the page after `cursor`; the same query for every page
    of the window, as a cursor requires."""
    event_filter: dict[str, Any] = {
        "created_at": {"start_at": rfc3339(window.since), "end_at": rfc3339(window.until)}
    }
    if window.types:
        event_filter["event_types"] = list(window.types)
    body: dict[str, Any] = {
        "limit": PAGE_LIMIT,
        "query": {"filter": event_filter, "sort": {"field": "DEFAULT", "order": "DESC"}},
    }
    if cursor:
        body["cursor"] = cursor
    return body


def search_events(doc: Any, what: str) -> list[Any]:
    """The `events` of a SearchEvents answer (none listed: an empty page).
    `ProviderApiRefused` when the answer reports errors; `ProviderApiAnswerInvalid` for
    any other shape."""
    if not isinstance(doc, dict):
        raise ProviderApiAnswerInvalid(
            f"{what}: the answer is a JSON {type(doc).__name__}, not the search's object"
        )
    errors = doc.get("errors")
    if errors:
        listed = errors if isinstance(errors, list) else [errors]
        codes = [str(e.get("code"))[:64] for e in listed[:3] if isinstance(e, dict)]
        raise ProviderApiRefused(f"{what}: the answer reports errors {codes!r}")
    events = doc.get("events", [])
    if not isinstance(events, list):
        raise ProviderApiAnswerInvalid(f"{what}: the answer's events is not a list")
    return events


def next_cursor(doc: dict[str, Any], unusable: list[str]) -> str | None:
    """The answer's `cursor`, None when it is the last page. The cursor is saved in
    `backfill_progress` and sent back: one Square could not take back (not text, longer
    than 256 characters, a control character) ends the listing with a line in
    `unusable`."""
    cursor = doc.get("cursor")
    if cursor is None or cursor == "":
        return None
    if not isinstance(cursor, str) or len(cursor) > MAX_CURSOR_CHARS or has_control_chars(cursor):
        unusable.append(
            f"more pages, but the answer's cursor is not one Square takes back "
            f"({str(cursor)[:64]!r}); the listing ends"
        )
        return None
    return cursor


class SquareEvents:
    """An `EventSource` over Square's Events API."""

    def __init__(self, api: ProviderApi, clock: Clock = REAL_CLOCK) -> None:
        self._url = f"{api.url}/v2/events"
        self._calls = ApiCalls(
            api,
            {
                "Authorization": f"Bearer {api.key}",
                "Square-Version": SQUARE_VERSION,
                "Accept": "application/json",
                "User-Agent": "payments-webhook-gateway-backfill",
            },
            clock,
        )

    async def page(self, cursor: str | None, window: Window) -> Page:
        what = "POST /v2/events"
        doc, _ = await self._calls.post(self._url, search_query(window, cursor), what)
        items, unusable = body_entries(search_events(doc, what), SHAPE)
        # Square decides the end: a page may hold fewer events than asked, even none.
        return Page(items, next_cursor(doc, unusable), unusable)

    async def fetch(self, item: Listed) -> Fetched:
        return Fetched(item.headers, item.body)

    async def close(self) -> None:
        await self._calls.close()
