"""Rules for content a sender controls that must be stored and published safely.

PostgreSQL `text` refuses NUL (SQLSTATE 22P05) and `jsonb` refuses `\\u0000`; NATS
headers and subjects must never carry control characters. These checks run on every
request, so each is one C-level string operation (`in`, `isprintable`) on short strings,
never another parse of the body.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

#: What a NUL is stored as: visible in `dlq show`, and accepted by `text` and `jsonb`.
NUL_REPLACEMENT = "\ufffd"
DIGEST_ID_PREFIX = "sha256:"

# Headers that carry credentials of the sender's own, not of the event: never stored.
_UNSTORED_HEADERS = frozenset({"authorization", "cookie", "proxy-authorization", "x-api-key"})


def nul_free(text: str) -> str:
    """`text` with every NUL replaced, so PostgreSQL can store it."""
    return text.replace("\x00", NUL_REPLACEMENT) if "\x00" in text else text


def has_control_chars(text: str) -> bool:
    """True if `text` holds control or other non-printable characters (NUL, CR, LF, ...).

    `str.isprintable` also refuses Unicode separators other than the ASCII space (such as
    U+2028), which have no place in an event id or type either.
    """
    return not text.isprintable()


def printable(text: str) -> str:
    """`text` with every non-printable character replaced, for NATS header values.

    New events with such characters are parked and never published; this guards rows
    recorded before that rule, which the relay may still publish.
    """
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else NUL_REPLACEMENT for c in text)


def body_digest_id(body: bytes) -> str:
    """An event id derived from the body alone: `sha256:<hex>`.

    Used when a verified body has no usable id of its own, so the event is still recorded,
    and a retry of the same bytes is a duplicate rather than a second row.
    """
    return DIGEST_ID_PREFIX + hashlib.sha256(body).hexdigest()


def storable_headers(headers: Mapping[str, str]) -> tuple[dict[str, str], bool]:
    """The request headers worth keeping with the event, and whether any held a NUL.

    Credentials are removed; NULs in names and values are replaced (`jsonb` refuses
    them), and the caller decides what a NUL means (parked for webhooks, 400 for
    internal publishers).
    """
    kept: dict[str, str] = {}
    had_nul = False
    for name, value in headers.items():
        if name in _UNSTORED_HEADERS:
            continue
        if "\x00" in value or "\x00" in name:
            had_nul = True
            name, value = nul_free(name), nul_free(value)
        kept[name] = value
    return kept, had_nul
