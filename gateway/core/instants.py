"""Instants as the gateway's JSON documents write them: ISO 8601 in UTC with a `Z`
(`2026-12-06T17:23:42.120431Z`, the fraction only when there is one), as `orjson`'s
`OPT_UTC_Z` writes a stored time. Pure.

The public documents of `core.dlq.public`, `core.events.public` and
`core.ordering.public` hold their times as this text, so the CLI's `--json` and the
console's API print the same characters whatever serializer each uses; the searches'
links (`core.dlq.filters`, `core.events.search`) write their bounds the same way.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import overload


@overload
def instant(value: datetime) -> str: ...
@overload
def instant(value: None) -> None: ...
@overload
def instant(value: datetime | None) -> str | None: ...
def instant(value: datetime | None) -> str | None:
    """A stored time in a document; None for none."""
    return None if value is None else value.astimezone(UTC).isoformat().replace("+00:00", "Z")
