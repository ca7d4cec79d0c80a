"""Event type patterns: one language for `[providers.X] event_types` and for `--type`.

The rules, the same in both places:

- A pattern is an exact type (`charge.refunded`) or a prefix followed by one final `*`
  (`payment_intent.*`, `orders/*`), which matches every type that starts with the
  prefix: `*` stands for any run of characters, none included, so `invoice.*` matches
  `invoice.paid` and `invoice.`, and `*` alone matches every type.
- `*` may only end a pattern. `in*voice` or `a.*.b` is refused rather than read as a
  glob it is not, so nobody trusts a pattern that would never match.
- Matching is on the type as the provider wrote it, before it is made into subject
  tokens, and is case-sensitive, as providers' types are. An event without a type
  matches no pattern.
- A pattern is not empty, has no leading or trailing whitespace, holds no control
  characters and is at most `MAX_PATTERN_CHARS` long (a longer one could never match a
  published type, `model.MAX_EVENT_TYPE_CHARS`).

Problems are `ValueError`s saying why; the settings report them under the key, the
CLI under its flag.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gateway.core.bodies.content import has_control_chars

MAX_PATTERN_CHARS = 200
WILDCARD = "*"


@dataclass(frozen=True)
class TypePattern:
    """One checked pattern: an exact type, or everything starting with `prefix`."""

    text: str

    @property
    def is_prefix(self) -> bool:
        return self.text.endswith(WILDCARD)

    @property
    def prefix(self) -> str:
        """The text before the final `*` (the whole text of an exact pattern)."""
        return self.text[:-1] if self.is_prefix else self.text


def parse_pattern(text: str) -> TypePattern:
    """`text` as a pattern; ValueError saying why it is not one."""
    if not text or not text.strip():
        raise ValueError("a pattern must not be empty")
    if text != text.strip():
        raise ValueError(f"{text!r} has leading or trailing whitespace")
    if len(text) > MAX_PATTERN_CHARS:
        raise ValueError(f"a pattern is at most {MAX_PATTERN_CHARS} characters")
    if has_control_chars(text):
        raise ValueError("a pattern must not hold control characters")
    if WILDCARD in text[:-1]:
        raise ValueError(f"{text!r}: '*' may only end a pattern (a prefix match)")
    return TypePattern(text)


def type_patterns(texts: Iterable[str]) -> tuple[str, ...]:
    """A config list of patterns, checked, in order; ValueError for the first bad one or
    an empty list (which would refuse every event)."""
    checked = tuple(texts)
    if not checked:
        raise ValueError("must list at least one pattern (leave it out to allow every type)")
    for text in checked:
        parse_pattern(text)
    return checked


def type_allowed(event_type: str, patterns: tuple[str, ...]) -> bool:
    """True if `event_type` matches one of the checked `patterns`.

    On every request with an allow-list, so plain string tests on the checked texts
    rather than a `TypePattern` built per pattern.
    """
    for pattern in patterns:
        if pattern.endswith(WILDCARD):
            if event_type.startswith(pattern[:-1]):
                return True
        elif event_type == pattern:
            return True
    return False
