"""Which event types a provider may send (`[providers.X] event_types`).

A pattern is either an exact type (`charge.refunded`) or a prefix followed by one final
`*` (`payment_intent.*`, `orders/*`), which matches every type that starts with the
prefix. Matching is on the type as the provider wrote it, before it is made into subject
tokens, and is case-sensitive, as providers' types are.
"""

from __future__ import annotations

from collections.abc import Iterable

from gateway.core.content import has_control_chars

#: Longer than any event type that can be published (`model.MAX_EVENT_TYPE_CHARS`) is
#: a pattern that can never match.
MAX_PATTERN_CHARS = 200
WILDCARD = "*"


def check_type_pattern(pattern: str) -> None:
    """Raise ValueError saying why `pattern` is not an exact type or a prefix with `*`."""
    if not pattern or not pattern.strip():
        raise ValueError("a pattern must not be empty")
    if pattern != pattern.strip():
        raise ValueError(f"{pattern!r} has leading or trailing whitespace")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise ValueError(f"a pattern is at most {MAX_PATTERN_CHARS} characters")
    if has_control_chars(pattern):
        raise ValueError("a pattern must not hold control characters")
    if WILDCARD in pattern[:-1]:
        raise ValueError(f"{pattern!r}: '*' may only end a pattern (a prefix match)")


def type_patterns(patterns: Iterable[str]) -> tuple[str, ...]:
    """The patterns checked, in order; ValueError for the first bad one or an empty list."""
    checked = tuple(patterns)
    if not checked:
        raise ValueError("must list at least one pattern (leave it out to allow every type)")
    for pattern in checked:
        check_type_pattern(pattern)
    return checked


def type_allowed(event_type: str, patterns: tuple[str, ...]) -> bool:
    """True if `event_type` equals an exact pattern or starts with a `*` pattern's prefix."""
    for pattern in patterns:
        if pattern.endswith(WILDCARD):
            if event_type.startswith(pattern[:-1]):
                return True
        elif event_type == pattern:
            return True
    return False
