"""Reading events back from the providers' APIs for `gateway backfill`: Stripe's
`GET /v1/events`, GitHub's hook deliveries, Paddle's `GET /events`, Square's
`POST /v2/events` (SearchEvents) and GoCardless's `GET /events`, plain HTTP with
httpx through one bounded call (`http_json`). Each source lists pages newest first and
fetches an event's body; every call goes through `retrying.call_api`, which honours
`Retry-After`, backs off on 5xx and stops at a deadline, and turns 401/403 into one
clear error. A malformed entry of a listing never fails its page: it is listed with
its `failure` (and recorded and parked), or, when not even its bytes can be had, as
one line in `Page.unusable`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from gateway.core.backfill.decisions import Window
from gateway.core.events.model import Failure


@dataclass(frozen=True)
class Listed:
    """One event as the provider's list shows it."""

    #: The id the webhook would carry (Stripe/Paddle event id, GitHub GUID); for an
    #: entry without a usable one, its body's digest (`sha256:<hex>`), or "" until a
    #: GitHub delivery's body is fetched.
    event_id: str
    event_type: str | None
    occurred_at: datetime | None  # None: the entry's time could not be read
    handle: str = ""  # what `fetch` needs (a GitHub delivery's numeric id)
    body: bytes | None = None  # set when the list carries the event itself
    headers: Mapping[str, str] = field(default_factory=dict)
    #: Why the entry cannot be used as listed: it is recorded and parked with this.
    failure: Failure | None = None


@dataclass(frozen=True)
class Page:
    """One page of a newest-first listing; `next_cursor` None means it was the last."""

    items: list[Listed]
    next_cursor: str | None
    #: One line per entry that could not even be recorded (counted failed).
    unusable: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Fetched:
    """An event's request as the webhook would have carried it: lower-case headers and
    either the exact body or (GitHub) the parsed payload to rebuild it from."""

    headers: Mapping[str, str]
    body: bytes | None = None
    payload: Any = None


class EventSource(Protocol):
    """A provider's API, read newest first."""

    async def page(self, cursor: str | None, window: Window) -> Page:
        """The page after `cursor` (None: the newest) of events in or around `window`."""
        ...

    async def fetch(self, item: Listed) -> Fetched:
        """The event's request; `ProviderApiRefused` if the API no longer has it."""
        ...

    async def close(self) -> None: ...
