"""Ordering keys: what a provider's event is about (a payment intent, a transaction, an
order), read from its verified body, so the gateway can keep each key's events in order.

The rules, per provider (`[providers.NAME] order_key`, else its scheme's
`Provider.order_keys`):

- An entry is `"/pointer"` (any event type) or `"GLOB /pointer"` (only types the glob
  takes, `core.type_patterns` semantics: `refunds/* /order_id`). The pointer is an
  RFC 6901 JSON pointer into the body, parsed to its tokens once.
- The first entry whose glob takes the type and whose pointer reaches a non-empty string
  or an integer wins (a bool, a float, an object, an array or null does not: those are
  not identifiers, and `payment_intent` expanded into an object falls through to the
  next entry). No entry wins: the event is unordered.
- The key is kept as it is when it is printable ASCII with no blank at either end and at
  most `MAX_KEY_BYTES` bytes (it then fits a NATS header as it is and reads well in the
  CLI); any other text becomes its SHA-256 in lowercase hex, so every key is bounded and
  header-safe and two different texts never share a key.

Problems with an entry are `ValueError`s saying why; the settings report them under the key.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from gateway.core.bodies.pointers import parse_pointer, resolve_pointer
from gateway.core.type_patterns import parse_pattern, type_allowed

#: The longest key kept as it is; a longer one becomes its SHA-256 (64 characters).
MAX_KEY_BYTES = 200
#: The longest entry accepted: a glob (at most 200) and a pointer of reasonable depth.
MAX_ENTRY_CHARS = 1000


@dataclass(frozen=True)
class KeyRule:
    """One entry: the types it applies to (None: every type) and where the key is."""

    pointer: str
    #: The pointer's reference tokens, unescaped (`~1` is `/`, `~0` is `~`).
    tokens: tuple[str, ...]
    #: A `core.type_patterns` pattern, or None for every type.
    type_glob: str | None = None
    #: A value every event reaches, read from no pointer (`[providers.NAME]
    #: merchant_id`: a provider account that is one merchant's, PayTR's); None: none.
    literal: str | None = None

    @property
    def text(self) -> str:
        """The entry as written in the configuration."""
        if self.literal is not None:
            return f"merchant_id = {self.literal!r}"
        return self.pointer if self.type_glob is None else f"{self.type_glob} {self.pointer}"


def literal_rule(value: str) -> KeyRule:
    """The rule that reaches `value` for every event."""
    return KeyRule("", (), literal=value)


def parse_rule(entry: str) -> KeyRule:
    """One config entry, `"/pointer"` or `"GLOB /pointer"`; ValueError saying why not."""
    if not entry.strip():
        raise ValueError("an entry must be a non-empty string")
    if len(entry) > MAX_ENTRY_CHARS:
        raise ValueError(f"an entry is at most {MAX_ENTRY_CHARS} characters")
    if entry != entry.strip():
        raise ValueError(f"{entry!r} has leading or trailing whitespace")
    if entry.startswith("/"):
        return KeyRule(entry, parse_pointer(entry))
    glob, sep, rest = entry.partition(" /")
    if not sep:
        raise ValueError(f"{entry!r} is neither '/pointer' nor 'TYPE_GLOB /pointer'")
    pointer = "/" + rest
    parse_pattern(glob)  # a blank before the pointer's ' /' is refused as whitespace
    return KeyRule(pointer, parse_pointer(pointer), glob)


def parse_rules(entries: Iterable[str]) -> tuple[KeyRule, ...]:
    """A provider's `order_key` list, in order; ValueError naming the first bad entry.

    An empty list is allowed: that provider's events are unordered.
    """
    rules = []
    for i, entry in enumerate(entries):
        try:
            rules.append(parse_rule(entry))
        except ValueError as exc:
            raise ValueError(f"entry {i + 1}: {exc}") from None
    return tuple(rules)


def bounded_key(text: str) -> str:
    """`text` as a key: as it is when printable ASCII (0x20-0x7e) with no blank at either
    end and at most `MAX_KEY_BYTES` long, else its SHA-256 in lowercase hex."""
    if (
        0 < len(text) <= MAX_KEY_BYTES
        and text.isascii()
        and text.isprintable()
        and text[0] != " "
        and text[-1] != " "
    ):
        return text
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def order_key_of(rules: tuple[KeyRule, ...], event_type: str | None, doc: Any) -> str | None:
    """The event's key by the first rule that gives one, or None (unordered).

    `doc` is the parsed body. A rule with a type glob never applies to an event without
    a type.
    """
    found = first_value(rules, event_type, doc)
    return None if found is None else bounded_key(found)


def first_value(rules: tuple[KeyRule, ...], event_type: str | None, doc: Any) -> str | None:
    """What the first rule that reaches a non-empty string or an integer reaches, as
    text (unbounded: the caller bounds it), or None. Also reads `[providers.NAME]
    merchant` (`core.providers.movements`)."""
    for rule in rules:
        if rule.literal is not None:
            return rule.literal
        if rule.type_glob is not None and (
            event_type is None or not type_allowed(event_type, (rule.type_glob,))
        ):
            continue
        found = resolve_pointer(doc, rule.tokens)
        if type(found) is str:
            if found:
                return found
        elif type(found) is int:  # not bool: `type(True) is bool`
            return str(found)
    return None
