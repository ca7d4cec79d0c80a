"""A listing's entries as `Listed` items, one bad entry never failing its page.

The answer must have the listing's shape (an object with a `data` list, or GitHub's
list): otherwise the page itself is `ProviderApiAnswerInvalid`. Each entry is then
checked (`core.backfill.items`); one that fails is listed with its failure and its
bytes, so it is recorded and parked rather than dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from gateway.adapters.provider_api import Listed
from gateway.core.backfill.items import encode, entry_id, entry_type, not_object
from gateway.core.bodies.content import body_digest_id
from gateway.core.events.model import Failure
from gateway.errors import ProviderApiAnswerInvalid

#: Reads an entry's time: (when, None) or (None, why not).
TimeReader = Callable[[Any, str], tuple[datetime | None, Failure | None]]


def listing_data(doc: Any, what: str) -> list[Any]:
    """The `data` list of a listing object; `ProviderApiAnswerInvalid` for any other shape."""
    if not isinstance(doc, dict):
        raise ProviderApiAnswerInvalid(
            f"{what}: the answer is a JSON {type(doc).__name__}, not the listing's object"
        )
    data = doc.get("data")
    if not isinstance(data, list):
        raise ProviderApiAnswerInvalid(f"{what}: the answer's data is not a list")
    return data


@dataclass(frozen=True, slots=True)
class EntryShape:
    """Where a provider's listing entries keep their id, type and time, how the time
    reads, how the provider serialises an event (`indent`) and the headers it sends."""

    id_field: str
    type_field: str
    time_field: str
    read_time: TimeReader
    indent: bool
    headers: Mapping[str, str]


def body_entries(data: list[Any], shape: EntryShape) -> tuple[list[Listed], list[str]]:
    """A listing's entries that are the events themselves (Stripe, Paddle): the items,
    and a line for each entry of which not even the bytes can be had."""
    items: list[Listed] = []
    unusable: list[str] = []
    for entry in data:
        listed = _body_entry(entry, shape)
        if isinstance(listed, str):
            unusable.append(listed)
        else:
            items.append(listed)
    return items, unusable


def _body_entry(entry: Any, shape: EntryShape) -> Listed | str:
    """One entry of `body_entries`; a line saying why when not even its bytes can be had."""
    body, encoding = encode(entry, indent=shape.indent)
    if body is None:
        return f"an entry that cannot be encoded: {encoding.message if encoding else ''}"
    failure = not_object(entry)
    if failure is not None:
        return Listed(
            body_digest_id(body), None, None, body=body, headers=shape.headers, failure=failure
        )
    event_id, id_failure = entry_id(entry.get(shape.id_field), shape.id_field)
    when, time_failure = shape.read_time(entry.get(shape.time_field), shape.time_field)
    failure = id_failure or time_failure or encoding
    return Listed(
        event_id or body_digest_id(body),
        entry_type(entry.get(shape.type_field)),
        when,
        body=body,
        headers=shape.headers,
        failure=failure,
    )


def last_id_cursor(data: list[Any], id_field: str, unusable: list[str]) -> str | None:
    """The next page's cursor when it is the page's last entry's own id (Stripe's
    `starting_after`, Paddle's `after`); None, with a line in `unusable`, when that
    entry has no usable id, so the listing cannot go on."""
    last = data[-1] if data else None
    cursor, failure = entry_id(last.get(id_field) if isinstance(last, dict) else None, id_field)
    if failure is not None:
        unusable.append(f"more pages, but the last entry's {failure.message}; the listing ends")
        return None
    return cursor
