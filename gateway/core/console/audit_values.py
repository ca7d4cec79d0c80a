"""What the console's audit trail keeps of a value, and how often it records a refusal
nobody authenticated. Pure; time is an argument.

The trail is insert-only (a trigger forbids deleting a row), so whatever a request can
put in it stays for ever: every text is cut to `TEXT_MAX_CHARS` with its length said,
a detail keeps at most `DETAIL_ITEMS_MAX` entries, and an unauthenticated refusal is
recorded once per address, action and minute, the next row saying how many were left
out (`AnonymousSampler`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

TEXT_MAX_CHARS = 200
DETAIL_ITEMS_MAX = 50
#: Keys remembered by the sampler; past this, unauthenticated refusals of new keys are
#: not recorded (counted by the caller) until older minutes make room.
SAMPLER_KEYS_MAX = 10_000
WINDOW_S = 60


def bounded_text(value: str | None) -> str | None:
    """`value`, or its first `TEXT_MAX_CHARS` characters and its length."""
    if value is None or len(value) <= TEXT_MAX_CHARS:
        return value
    return f"{value[:TEXT_MAX_CHARS]}... ({len(value)} chars)"


def bounded_detail(detail: Mapping[str, Any] | None, depth: int = 0) -> dict[str, Any]:
    """`detail` with every text bounded, at most `DETAIL_ITEMS_MAX` entries a level and
    three levels deep (a deeper value is said as its type)."""
    out: dict[str, Any] = {}
    for n, (key, value) in enumerate((detail or {}).items()):
        if n == DETAIL_ITEMS_MAX:
            out["..."] = f"{len(detail or {}) - DETAIL_ITEMS_MAX} more entries"
            break
        out[bounded_text(str(key)) or ""] = _bounded(value, depth + 1)
    return out


def _bounded(value: Any, depth: int) -> Any:
    if isinstance(value, str):
        return bounded_text(value)
    if isinstance(value, bool | int | float) or value is None:
        return value
    if depth >= 3:
        return f"({type(value).__name__})"
    if isinstance(value, Mapping):
        return bounded_detail(value, depth)
    if isinstance(value, list | tuple):
        kept = [_bounded(v, depth + 1) for v in value[:DETAIL_ITEMS_MAX]]
        if len(value) > DETAIL_ITEMS_MAX:
            kept.append(f"{len(value) - DETAIL_ITEMS_MAX} more")
        return kept
    return bounded_text(str(value))


class AnonymousSampler:
    """Which unauthenticated refusals to record: the first of each (address, action) in
    a minute, that row carrying how many of the key were left out since its last row."""

    def __init__(self, keys_max: int = SAMPLER_KEYS_MAX) -> None:
        self._keys_max = keys_max
        # (address, action) -> (minute of its last row, refusals left out since it)
        self._seen: dict[tuple[str, str], tuple[int, int]] = {}

    def admit(self, address: str, action: str, now_s: float) -> int | None:
        """None: leave this one out; else record it, with this many left out before."""
        minute = int(now_s // WINDOW_S)
        key = (address, action)
        found = self._seen.get(key)
        if found is not None and found[0] == minute:
            self._seen[key] = (minute, found[1] + 1)
            return None
        if found is None and len(self._seen) >= self._keys_max:
            self._forget_before(minute)
            if len(self._seen) >= self._keys_max:
                return None  # a flood of new addresses: the metric and log have it
        self._seen[key] = (minute, 0)
        return 0 if found is None else found[1]

    def _forget_before(self, minute: int) -> None:
        self._seen = {k: v for k, v in self._seen.items() if v[0] >= minute}
