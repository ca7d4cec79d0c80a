"""JSON pointers (RFC 6901) into a parsed body: where an order key, a merchant, an event
id or type is found. Parsed once to their tokens; resolved per event.

Pure.
"""

from __future__ import annotations


def parse_pointer(text: str) -> tuple[str, ...]:
    """An RFC 6901 pointer's tokens; ValueError unless it is `/`-led with valid escapes.

    The empty pointer (the whole document) is refused: a whole body is never a key.
    """
    if not text.startswith("/"):
        raise ValueError(f"{text!r} is not a JSON pointer (it starts with '/')")
    tokens = []
    for raw in text[1:].split("/"):
        # `~` may only start `~0` or `~1` (RFC 6901 section 3).
        if raw.replace("~0", "").replace("~1", "").count("~"):
            raise ValueError(f"{text!r}: '~' must be followed by 0 or 1")
        tokens.append(raw.replace("~1", "/").replace("~0", "~"))
    return tuple(tokens)


def resolve_pointer(doc: object, tokens: tuple[str, ...]) -> object:
    """What the pointer's tokens reach in `doc`, or None when they reach nothing."""
    for token in tokens:
        if type(doc) is dict:
            doc = doc.get(token)
        elif type(doc) is list:
            # An array index: digits without a leading zero (RFC 6901 section 4).
            if not (token.isascii() and token.isdigit()) or (token[0] == "0" and len(token) > 1):
                return None
            index = int(token)
            doc = doc[index] if index < len(doc) else None
        else:
            return None
        if doc is None:
            return None
    return doc
