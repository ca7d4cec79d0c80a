"""GoCardless's Events API, `GET /events`, plain HTTP.

The request is `gocardless-pro-python`'s `events.list` (3.22.0,
`services/events_service.py`): a bearer access token and `GoCardless-Version:
2015-07-06` (`gocardless_answer.auth`, the confirm stage's own headers), with
`created_at[gte]`/`created_at[lt]` bounding the window on the server, `limit` (at most
500) and `after`, the cursor. The answer is `{"events": [...], "meta": {"cursors":
{"before": ..., "after": ...}, "limit": ...}}` (the library's `tests/fixtures/
events.json`), newest first, and `meta.cursors.after` is null on the last page (the
library's `Paginator` stops there). `resource_type` and `action` each filter one value:
they are sent when every `--type` shares them, and the run filters the rest itself.
The library warns that the endpoint returns no event older than 18 months.

Each listed event is the object a webhook carries in its `events` list. A webhook's
events are recorded one per row as the body `{"events":[EVENT],"meta":META}`
(`core.signatures.gocardless.split`), where the scheme reads the id (`/events/0/id`)
and the type (`resource_type.action`); a listed event is recorded as
`{"events":[EVENT]}`, compact JSON of the event as the API gave it, so the same id and
type are read and the gate makes one a duplicate of the other. It is not the
webhook's bytes (no `meta`, not the request's layout); GoCardless signs the request,
never an event, so the API's answer over TLS is the whole proof (docs/operations.md,
"What a backfilled event proves"). Money events then wait for the confirm stage as a
webhook's do (`backfill.shape`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from gateway.adapters.provider_api import Fetched, Listed, Page
from gateway.adapters.provider_api.http_json import ApiCalls, Params
from gateway.adapters.provider_api.retrying import REAL_CLOCK, Clock
from gateway.core.backfill.decisions import Window
from gateway.core.backfill.items import encode, entry_id, iso_time, not_object
from gateway.core.bodies.content import body_digest_id
from gateway.core.providers.gocardless.answer import auth
from gateway.errors import ProviderApiAnswerInvalid
from gateway.settings.provider_api import ProviderApi

#: The largest page GoCardless lists ("limit: Number of records to return", up to 500).
PAGE_LIMIT = 500
#: The header a GoCardless webhook carries that the gateway keeps.
HEADERS = {"content-type": "application/json"}
_WHAT = "GET /events"


def api_time(when: datetime, *, up: bool = False) -> str:
    """`when` as GoCardless writes times (UTC, milliseconds, `Z`): rounded down, or up
    for an exclusive end, so the server's window holds every millisecond of the run's
    `[since, until)` (the run drops what lies outside it)."""
    utc = when.astimezone(UTC)
    spare = utc.microsecond % 1000
    utc -= timedelta(microseconds=spare)
    if up and spare:
        utc += timedelta(milliseconds=1)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def type_params(types: Sequence[str]) -> list[tuple[str, str]]:
    """`resource_type` (and `action`) when every type of the filter shares it; none
    when the filter is empty or spans resources (each parameter takes one value)."""
    pairs = [t.split(".", 1) for t in types]
    if not pairs or any(len(p) != 2 or not p[0] or not p[1] for p in pairs):
        return []
    resources = {p[0] for p in pairs}
    actions = {p[1] for p in pairs}
    if len(resources) != 1:
        return []
    params = [("resource_type", resources.pop())]
    if len(actions) == 1:
        params.append(("action", actions.pop()))
    return params


def list_params(window: Window, cursor: str | None) -> Params:
    """The query of the page after `cursor`: the window, the type filter, the page size."""
    params = [
        ("created_at[gte]", api_time(window.since)),
        ("created_at[lt]", api_time(window.until, up=True)),
        ("limit", str(PAGE_LIMIT)),
        *type_params(window.types),
    ]
    if cursor:
        params.append(("after", cursor))
    return params


def listed_events(doc: Any) -> tuple[list[Any], Any]:
    """The answer's `events` list and its `meta.cursors.after`; any other shape is
    `ProviderApiAnswerInvalid` (a listing without its cursors cannot say whether it
    ended)."""
    if not isinstance(doc, dict):
        raise ProviderApiAnswerInvalid(
            f"{_WHAT}: the answer is a JSON {type(doc).__name__}, not the listing's object"
        )
    events = doc.get("events")
    if not isinstance(events, list):
        raise ProviderApiAnswerInvalid(f"{_WHAT}: the answer's events is not a list")
    meta = doc.get("meta")
    cursors = meta.get("cursors") if isinstance(meta, dict) else None
    if not isinstance(cursors, dict):
        raise ProviderApiAnswerInvalid(f"{_WHAT}: the answer's meta.cursors is not an object")
    return events, cursors.get("after")


def event_type(entry: dict[str, Any]) -> str | None:
    """`resource_type.action`, as the scheme reads a recorded event's type; None
    unless both are text."""
    resource, action = entry.get("resource_type"), entry.get("action")
    if isinstance(resource, str) and resource and isinstance(action, str) and action:
        return f"{resource}.{action}"
    return None


def listed_event(entry: Any) -> Listed | str:
    """One listed event as a webhook's row would hold it, `{"events":[EVENT]}`; a line
    saying why when not even its bytes can be had. A malformed entry is listed with
    its failure (recorded and parked): not an object, no usable `id`, no readable
    `created_at`, or bytes no encoder writes as the webhook's."""
    body, encoding = encode({"events": [entry]}, indent=False)
    if body is None:
        return f"an entry that cannot be encoded: {encoding.message if encoding else ''}"
    failure = not_object(entry)
    if failure is not None:
        return Listed(body_digest_id(body), None, None, body=body, headers=HEADERS, failure=failure)
    event_id, id_failure = entry_id(entry.get("id"), "id")
    when, time_failure = iso_time(entry.get("created_at"), "created_at")
    return Listed(
        event_id or body_digest_id(body),
        event_type(entry),
        when,
        body=body,
        headers=HEADERS,
        failure=id_failure or time_failure or encoding,
    )


def listed_page(events: list[Any], after: Any) -> Page:
    """The page of `events`, its next cursor `after`. The cursor is saved in
    `backfill_progress` and sent back: one that breaks an id's rules (not text, too
    long, a control character) ends the listing with a line in `unusable`."""
    items: list[Listed] = []
    unusable: list[str] = []
    for entry in events:
        listed = listed_event(entry)
        if isinstance(listed, str):
            unusable.append(listed)
        else:
            items.append(listed)
    if after is None or not events:
        return Page(items, None, unusable)
    cursor, failure = entry_id(after, "meta.cursors.after")
    if failure is not None:
        unusable.append(f"more pages, but the answer's {failure.message}; the listing ends")
        return Page(items, None, unusable)
    return Page(items, cursor, unusable)


class GoCardlessEvents:
    """An `EventSource` over GoCardless's Events API."""

    def __init__(self, api: ProviderApi, clock: Clock = REAL_CLOCK) -> None:
        self._url = f"{api.url}/events"
        self._calls = ApiCalls(
            api,
            {
                **auth(api.key),
                "Accept": "application/json",
                "User-Agent": "payments-webhook-gateway-backfill",
            },
            clock,
        )

    async def page(self, cursor: str | None, window: Window) -> Page:
        doc, _ = await self._calls.get(self._url, list_params(window, cursor), _WHAT)
        return listed_page(*listed_events(doc))

    async def fetch(self, item: Listed) -> Fetched:
        return Fetched(item.headers, item.body)

    async def close(self) -> None:
        await self._calls.close()
