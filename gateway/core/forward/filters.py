"""Which events a forwarding destination receives: `--provider`, `--type` and `--where`.

Pure. An event passes when its provider is among the providers (if any are named), its
type matches one of the patterns (the grammar of `gateway events list --type`, see
`core.type_patterns`), and its body contains the `--where` document, as PostgreSQL's
`@>` reads containment: every key of an object must be present with a contained value,
every element of an array must be contained in some element of the body's array, and a
scalar must be equal. Events that do not pass are acknowledged and counted, never sent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from gateway.core.type_patterns import type_allowed, type_patterns

#: A `--where` document larger than this is refused: it is a filter, not a payload.
MAX_WHERE_BYTES = 4096


@dataclass(frozen=True)
class ForwardFilter:
    """The checked filters of one destination; an empty one passes every event."""

    providers: frozenset[str] = frozenset()
    types: tuple[str, ...] = ()
    where: Any = None  # a JSON value, or None for no containment test

    @classmethod
    def parse(
        cls, providers: tuple[str, ...], types: tuple[str, ...], where: str | None
    ) -> ForwardFilter:
        """Check the flags' values; ValueError naming the flag that is wrong."""
        checked_types: tuple[str, ...] = ()
        if types:
            try:
                checked_types = type_patterns(types)
            except ValueError as exc:
                raise ValueError(f"--type: {exc}") from None
        document = None
        if where is not None:
            if len(where.encode()) > MAX_WHERE_BYTES:
                raise ValueError(f"--where: at most {MAX_WHERE_BYTES} bytes")
            try:
                document = orjson.loads(where)
            except orjson.JSONDecodeError as exc:
                raise ValueError(f"--where: not JSON ({exc})") from None
            if not isinstance(document, dict):
                raise ValueError('--where: must be a JSON object such as {"livemode": false}')
        return cls(frozenset(providers), checked_types, document)

    @property
    def is_empty(self) -> bool:
        return not self.providers and not self.types and self.where is None

    def passes(self, provider: str, event_type: str, body: bytes) -> bool:
        """True if the event is for this destination."""
        if self.providers and provider not in self.providers:
            return False
        if self.types and not type_allowed(event_type, self.types):
            return False
        if self.where is None:
            return True
        try:
            document = orjson.loads(body)
        except orjson.JSONDecodeError:
            return False  # a body that is not JSON contains nothing
        return contains(document, self.where)


def contains(value: Any, pattern: Any) -> bool:
    """PostgreSQL's jsonb `value @> pattern`, for decoded JSON values."""
    if isinstance(pattern, dict):
        return isinstance(value, dict) and all(
            key in value and contains(value[key], wanted) for key, wanted in pattern.items()
        )
    if isinstance(pattern, list):
        if not isinstance(value, list):
            return False
        return all(any(contains(item, wanted) for item in value) for wanted in pattern)
    if isinstance(pattern, bool) or isinstance(value, bool):
        return type(pattern) is type(value) and pattern == value
    return bool(value == pattern)
