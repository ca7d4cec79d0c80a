"""Rules for content a sender controls that must be stored and published safely.

PostgreSQL `text` refuses NUL (SQLSTATE 22P05) and `jsonb` refuses `\\u0000`; NATS
headers and subjects must never carry control characters. These checks run on every
request, so each is one C-level string operation (`in`, `isprintable`) on short strings,
never another parse of the body.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

#: What a NUL is stored as: visible in `dlq show`, and accepted by `text` and `jsonb`.
NUL_REPLACEMENT = "\ufffd"
DIGEST_ID_PREFIX = "sha256:"


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


#: Headers that carry credentials or signatures: never stored, whatever a configuration
#: says (`[providers.X] store_headers` naming one is a config error). A stored signature
#: is one an operator can paste, and for a body-only scheme, one an attacker can replay.
NEVER_STORED = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "cookie",
        "set-cookie",
        "x-api-key",
        "stripe-signature",
        "paddle-signature",
        "webhook-signature",
        "x-hub-signature",
        "x-hub-signature-256",
        "x-shopify-hmac-sha256",
        "x-razorpay-signature",
        "cko-signature",
        "x-square-hmacsha256-signature",
        "x-square-signature",
        "x-paystack-signature",
        "hmacsignature",
        "paypal-transmission-sig",
        "x-mollie-signature",
        "x-iyz-signature-v3",
        "x-nowpayments-sig",
    }
)
#: Stored for every sender: what describes the request, not the sender's credentials.
COMMON_STORED = ("content-type", "user-agent")
#: Stored for internal publishers (`POST /v1/events`) besides the common ones.
SERVICE_STORED = ("idempotency-key", "traceparent", "tracestate", "x-request-id")
#: A stored header value is cut to this many characters (bytes as received: header
#: values are decoded as Latin-1, one character a byte).
MAX_HEADER_VALUE_CHARS = 1024
#: Names plus values of all stored headers together; what does not fit is cut or left out.
MAX_HEADERS_CHARS = 8192


@dataclass(frozen=True)
class HeaderPolicy:
    """Which request headers are stored with an event, in priority order, and the caps.

    Built once per sender at start-up (`header_policy`); `names` never holds a header
    of `NEVER_STORED` or one of the sender's own signature headers.
    """

    names: tuple[str, ...]
    max_value_chars: int = MAX_HEADER_VALUE_CHARS
    max_total_chars: int = MAX_HEADERS_CHARS


def header_policy(*groups: Iterable[str], never: Iterable[str] = ()) -> HeaderPolicy:
    """The lower-cased names of `groups`, first occurrence first, without any header of
    `NEVER_STORED` or `never` (a sender's signature headers)."""
    refused = NEVER_STORED | {n.strip().lower() for n in never}
    names: dict[str, None] = {}
    for group in groups:
        for name in group:
            name = name.strip().lower()
            if name and name not in refused:
                names.setdefault(name)
    return HeaderPolicy(tuple(names))


#: The policy where no sender's is given (tests, tools): the common headers only.
DEFAULT_HEADERS = header_policy(COMMON_STORED)
#: The policy of internal publishers.
SERVICE_HEADERS = header_policy(COMMON_STORED, SERVICE_STORED)


def storable_headers(
    headers: Mapping[str, str], policy: HeaderPolicy = DEFAULT_HEADERS
) -> tuple[dict[str, str], bool]:
    """The request headers the policy keeps, capped, and whether any kept one had a NUL.

    Deterministic whatever the request holds: the policy's names in its order, each
    value cut to `max_value_chars`, and once `max_total_chars` (names plus values) is
    spent, the value that crosses it is cut and the rest left out. NULs are replaced
    (`jsonb` refuses them), and the caller decides what a NUL means (parked for
    webhooks, 400 for internal publishers). Cost: one lookup per allowed name, whatever
    the number or size of the headers sent.
    """
    kept: dict[str, str] = {}
    had_nul = False
    budget = policy.max_total_chars
    for name in policy.names:
        value = headers.get(name)
        if value is None:
            continue
        room = min(policy.max_value_chars, budget - len(name))
        if room < 0:
            break
        value = value[:room]
        if "\x00" in value:
            had_nul = True
            value = nul_free(value)
        kept[name] = value
        budget -= len(name) + len(value)
    return kept, had_nul
