"""Where a value of a request is found (`FieldRef`): a header, a top-level JSON field, a
JSON pointer into the body, several fields joined, or a fallback. The event's id and
type are found this way, prepared once per provider (`FieldRef.read`).

Pure.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from gateway.core.bodies.pointers import parse_pointer, resolve_pointer


@dataclass(frozen=True)
class FieldRef:
    """Where a value (event id, event type) comes from: a header, a top-level JSON field,
    or a JSON pointer into the body (RFC 6901, `/data/object/id`).

    `also` names further pointers whose values follow this one's, joined with `sep`
    (":" unless told): an id made of several fields (Adyen's
    `pspReference:eventCode:success`), a type made of two (GoCardless's
    `{resource_type}.{action}`). The joined value is absent when any part is.
    `fallback` is read when this one finds nothing (a provider whose events name their
    object under different fields: Paystack's refunds carry no `data.id`, only
    `data.refund_reference`).
    """

    source: str  # "header" | "json"
    name: str
    also: tuple[str, ...] = ()
    fallback: FieldRef | None = None
    sep: str = ":"

    @classmethod
    def parse(cls, text: str) -> FieldRef:
        """Parse `header:X-Name`, `json:field` or `json:/pointer`; ValueError otherwise."""
        source, sep, name = text.partition(":")
        if not sep or source not in ("header", "json") or not name:
            raise ValueError(
                f"expected 'header:NAME', 'json:FIELD' or 'json:/POINTER', got {text!r}"
            )
        if source == "json" and name.startswith("/"):
            parse_pointer(name)  # ValueError saying what is wrong with it
        return cls(source, name.lower() if source == "header" else name)

    @property
    def where(self) -> str:
        """How a message names it: `header x-id`, `field 'id'`, `field /data/id`."""
        if self.source == "header":
            found = f"header {self.name}"
        elif self.also:
            found = "fields " + ":".join((self.name, *self.also))
            if self.sep != ":":
                found = "fields " + ", ".join((self.name, *self.also)) + f" joined by {self.sep!r}"
        else:
            found = f"field {self.name}" if self.name.startswith("/") else f"field {self.name!r}"
        return found if self.fallback is None else f"{found}, else {self.fallback.where}"

    @functools.cached_property
    def read(self) -> Callable[[Mapping[str, str], object], object]:
        """A function of (headers, parsed body) to the value as sent, None when absent
        (a body that is not an object has no fields); prepared once, on first use."""
        if self.fallback is not None:
            first = FieldRef(self.source, self.name, self.also, sep=self.sep).read
            second = self.fallback.read

            def either(headers: Mapping[str, str], doc: object) -> object:
                found = first(headers, doc)
                return second(headers, doc) if found is None else found

            return either
        if self.source == "header":
            name = self.name
            return lambda headers, doc: headers.get(name)
        paths = tuple(
            parse_pointer(p) if p.startswith("/") else (p,) for p in (self.name, *self.also)
        )
        if len(paths) == 1 and len(paths[0]) == 1:
            (key,) = paths[0]
            return lambda headers, doc: doc.get(key) if type(doc) is dict else None
        if len(paths) == 1:
            (tokens,) = paths
            return lambda headers, doc: resolve_pointer(doc, tokens)

        sep = self.sep

        def joined(headers: Mapping[str, str], doc: object) -> object:
            parts = []
            for tokens in paths:
                found = resolve_pointer(doc, tokens)
                if type(found) is int:
                    found = str(found)
                if type(found) is not str or not found:
                    return None
                parts.append(found)
            return sep.join(parts)

        return joined
