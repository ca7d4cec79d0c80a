"""Hypothesis strategies for requests to the two ingestion endpoints: correctly signed
webhooks for every scheme, internal publishes with a valid token, and requests that are
not genuine (no, garbage, stale or wrong signatures; bad tokens; unknown providers).

Content is hostile on purpose: NUL and control characters, lone surrogate escapes, a
byte order mark, `1e400`, nesting around orjson's depth limit, bytes that are not UTF-8,
huge numbers, empty bodies, duplicated JSON keys and headers, wrong content types.

`http_safe=True` keeps every request sendable over a real HTTP/1.1 connection (no CR, LF,
NUL or DEL in header values, no leading or trailing whitespace, which HTTP strips); the
in-process tests hand the same kinds of requests to the ASGI app with any bytes at all.

Signatures come from the independent signers in `tests.support.vectors`, never from
`gateway`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from hypothesis import strategies as st

from tests.support import vectors
from tests.support.gateway import BILLING_TOKEN, ROTATED, SECRETS

RawHeaders = tuple[tuple[bytes, bytes], ...]
Draw = Callable[[st.SearchStrategy[Any]], Any]

AUDIT_TOKEN = "audit-test-token"
#: Services configured for the properties: billing may publish anything under its name,
#: audit only `events.audit.login.*` (so some publishes are 403).
SERVICES: dict[str, dict[str, Any]] = {
    "audit": {"token": AUDIT_TOKEN, "subjects": ["events.audit.login.*"]},
}
TOKENS = {"billing": BILLING_TOKEN, "audit": AUDIT_TOKEN}
SCHEMES = ("stripe", "standard", "github", "shopify", "paddle", "hmac")
#: Schemes whose signature covers the body alone (the delivery id is not signed).
BODY_ONLY_SCHEMES = frozenset({"github", "shopify", "hmac"})
#: Headers an HTTP client sets itself; the real-connection tests never send them twice.
FRAMING = frozenset({b"content-length", b"transfer-encoding", b"host", b"connection"})


@dataclass(frozen=True)
class Request:
    """One POST as the gateway receives it: the decoded path, the headers in order
    (names lower-case, values as raw bytes, repeats allowed) and the body."""

    path: str
    headers: RawHeaders
    body: bytes
    #: Why this request is what it is (for failure reports).
    note: str = field(default="", compare=False)

    @property
    def target(self) -> bytes:
        """The request target as sent on the wire (percent-encoded)."""
        return quote(self.path, safe="/").encode("ascii")

    def seen_headers(self) -> dict[str, str]:
        """The headers as the gateway reads them: latin-1 text, the last repeat wins."""
        return {n.decode("latin-1"): v.decode("latin-1") for n, v in self.headers}

    def __repr__(self) -> str:
        body = self.body if len(self.body) <= 300 else self.body[:300] + b"..."
        return f"Request({self.path!r}, {self.headers!r}, {body!r}, note={self.note!r})"


# --- text and bytes --------------------------------------------------------------------

SPECIAL_TEXT = [
    "", " ", "evt_1", "0", "-1", "\x00", "a\x00b", "\t", "x\ty", "a\r\nX-Evil: 1",
    "\x1b[31mred", "\x1c", "\x7f", "\u0085", "\xa0", "\u2028", "\ufeff", "\ud800",
    "x\udfff", "*", ">", "a.b.>", "..", "/", "é", "\U0001f600", "1e400", "payment.succeeded",
    "login.ok", " padded ", "ünïcödé.type",
]  # fmt: skip


def _long(char: str, n: int, tail: str) -> str:
    return char * n + tail


hostile_text: st.SearchStrategy[str] = st.one_of(
    st.sampled_from(SPECIAL_TEXT),
    st.sampled_from(SPECIAL_TEXT).map(lambda t: f"evt{t}1"),  # inside an id, not at its ends
    st.text(max_size=16),
    st.text(st.characters(max_codepoint=0x7F), max_size=8),
    st.builds(
        _long,
        st.sampled_from(["a", "\x00", "é", " "]),
        st.integers(195, 260),
        st.sampled_from(["", "\x00", "z", "\t"]),
    ),
)

#: Text at the documented limits: 200 characters for a type, 255 for an id.
at_limits: st.SearchStrategy[str] = st.builds(
    _long,
    st.just("x"),
    st.sampled_from([256, 201, 255, 200, 254, 199]),
    st.sampled_from(["", "\x00"]),
)
#: Hostile text for an id, a type or a key: anything, or right at a limit.
hostile_names: st.SearchStrategy[str] = st.one_of(at_limits, hostile_text, at_limits)

#: What providers usually send: ids and dotted types from a safe alphabet.
plain_text: st.SearchStrategy[str] = st.text(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.", min_size=1, max_size=24
)

_SCALARS: st.SearchStrategy[Any] = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    hostile_text,
)
json_values: st.SearchStrategy[Any] = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(hostile_text, inner, max_size=3),
    max_leaves=8,
)
_HTTP_VALUE_BYTES = frozenset([0x09, *range(0x20, 0x7F), *range(0x80, 0x100)])


def header_value(text: str, http_safe: bool, ascii_only: bool = False) -> bytes:
    """`text` as header bytes (UTF-8, surrogates kept as their bytes); made sendable over
    HTTP when asked (what HTTP cannot carry is dropped, surrounding whitespace stripped)."""
    raw = text.encode("utf-8", "surrogatepass")
    if ascii_only:
        raw = bytes(b for b in raw if b < 0x80)
    if http_safe:
        raw = bytes(b for b in raw if b in _HTTP_VALUE_BYTES).strip(b" \t")
    return raw


_HEADER_NAMES = [
    b"content-type", b"x-request-id", b"user-agent", b"accept", b"x-forwarded-for",
    b"idempotency-key", b"authorization", b"cookie", b"x-github-event", b"x-shopify-topic",
    b"x-event-type", b"webhook-id", b"x-github-delivery", b"content-length",
]  # fmt: skip
_CONTENT_TYPES = [
    b"application/json", b"text/plain", b"application/x-www-form-urlencoded",
    b"multipart/form-data; boundary=x", b"application/json; charset=latin-1", b"",
]  # fmt: skip


@st.composite
def extra_headers(
    draw: Draw, http_safe: bool, hostile: bool, avoid: frozenset[bytes] = frozenset()
) -> RawHeaders:
    """Headers a sender or a proxy adds (`hostile`: any name and value an attacker might
    send, repeats and a lying `content-length` included)."""
    names = st.sampled_from(_HEADER_NAMES)
    values = st.one_of(st.sampled_from(_CONTENT_TYPES), plain_text.map(str.encode))
    if hostile:
        if not http_safe:  # the ASGI layer: any header name, NUL included (lower-cased)
            names = names | st.binary(min_size=1, max_size=8).map(bytes.lower)
        values = values | hostile_text.map(lambda t: header_value(t, http_safe))
    found: list[tuple[bytes, bytes]] = []
    for name, value in draw(st.lists(st.tuples(names, values), max_size=4)):
        if name in avoid or (http_safe and name in FRAMING):
            continue
        if name == b"content-length" and draw(st.booleans()):
            value = str(draw(st.integers(0, 10**7))).encode()
        found.append((name, value))
    return tuple(found)


# --- bodies ------------------------------------------------------------------------------

#: A field left out of the body altogether.
ABSENT = object()
#: What a provider might put where an id or a type belongs.
hostile_values: st.SearchStrategy[Any] = st.one_of(
    hostile_text, hostile_text, _SCALARS, json_values
)
#: The same, or the field left out.
hostile_fields: st.SearchStrategy[Any] = hostile_values | st.just(ABSENT)
#: JSON content that every parser takes (no lone surrogates, 64-bit integers).
tame_values: st.SearchStrategy[Any] = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**63), 2**63 - 1),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=16),
    ),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


def _serialize(doc: Any, ascii_only: bool) -> bytes:
    text = json.dumps(doc, ensure_ascii=ascii_only)  # escapes lone surrogates as \ud800
    return text.encode("utf-8", "surrogatepass")  # or writes them as bytes orjson refuses


def _into_object(body: bytes, member: bytes) -> bytes:
    """`member` (`"k": v`) inserted first in the object `body` (or wrapped in a new one)."""
    if body.startswith(b"{") and body.rstrip().endswith(b"}"):
        rest = body[1:].lstrip()
        return b"{" + member + (b"" if rest.startswith(b"}") else b", ") + rest
    return b"{" + member + b"}"


_MUTATIONS = ["bom", "inf", "dup", "deep", "cut", "bad_utf8", "huge", "utf8_surrogates"]


@st.composite
def json_body(draw: Draw, fields: dict[str, st.SearchStrategy[Any]], hostile: bool) -> bytes:
    """A JSON object holding `fields` (a value drawn as `ABSENT` is left out) and other
    content; `hostile`: one mutation of the bytes (BOM, `1e400`, a duplicated key,
    nesting around orjson's limit of 1024 levels, a cut, bytes that are not UTF-8, a
    400-digit number, surrogates written as UTF-8 bytes)."""
    doc: dict[str, Any] = {}
    for name, values in fields.items():
        value = draw(values)
        if value is not ABSENT:
            doc[name] = value
    if "data" not in fields and draw(st.booleans()):
        doc["data"] = draw(tame_values)
    if not hostile:
        return _serialize(doc, ascii_only=draw(st.booleans()))
    mutation = draw(st.sampled_from(_MUTATIONS))
    body = _serialize(doc, ascii_only=mutation != "utf8_surrogates")
    if mutation == "bom":
        body = b"\xef\xbb\xbf" + body
    elif mutation == "inf":
        body = _into_object(body, draw(st.sampled_from([b'"n": 1e400', b'"n": -1e400'])))
    elif mutation == "dup":  # a duplicated key: the later value wins where it is parsed
        key = json.dumps(draw(st.sampled_from([*fields, "data"]))).encode()
        body = _into_object(body, key + b": " + _serialize(draw(hostile_values), True))
    elif mutation == "deep":
        depth = draw(st.integers(1015, 1030))
        body = _into_object(body, b'"deep": ' + b"[" * depth + b"]" * depth)
    elif mutation == "cut":
        body = body[: draw(st.integers(0, max(0, len(body) - 1)))]
    elif mutation == "bad_utf8":
        at = draw(st.integers(0, len(body)))
        bad = draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x80"]))
        body = body[:at] + bad + body[at:]
    elif mutation == "huge":
        body = _into_object(body, b'"n": ' + b"9" * draw(st.integers(19, 400)))
    elif mutation == "utf8_surrogates":
        body = _into_object(body, '"s": "\ud800x"'.encode("utf-8", "surrogatepass"))
    return body


raw_bodies: st.SearchStrategy[bytes] = st.one_of(
    st.sampled_from(
        [b"", b" ", b"null", b"[]", b"[1, 2]", b'"x"', b"1e400", b"{", b"\xef\xbb\xbf{}", b"{}",
         b'{"id": 1, "id": "\\ud800"}', b"\x00", b"\xff\xfe{\x00}\x00"]
    ),
    st.binary(max_size=64),
)  # fmt: skip


def bodies(fields: dict[str, st.SearchStrategy[Any]], hostile: bool) -> st.SearchStrategy[bytes]:
    """A JSON object holding `fields`; `hostile`: mutated, or any bytes at all."""
    if not hostile:
        return json_body(fields, hostile=False)
    return st.one_of(json_body(fields, hostile=True), json_body(fields, hostile=True), raw_bodies)


@st.composite
def faults(draw: Draw, parts: tuple[str, ...]) -> frozenset[str]:
    """Which parts of a request are hostile: none (as a sender means it) in a quarter of
    the examples, one or two otherwise, so each rule is met alone as well as together."""
    n = draw(st.sampled_from([0, 1, 1, 2]))
    return frozenset(draw(st.lists(st.sampled_from(parts), min_size=n, max_size=n, unique=True)))


#: Where each scheme (as configured in `tests.support.gateway.config`) reads id and type
#: from the body: (id field, type field), None where it reads a header instead.
BODY_FIELDS: dict[str, tuple[str | None, str | None]] = {
    "stripe": ("id", "type"),
    "standard": (None, "type"),
    "github": (None, None),
    "shopify": (None, None),
    "paddle": ("event_id", "event_type"),
    "hmac": ("event_id", None),
}
HEADER_FIELDS: dict[str, tuple[bytes, ...]] = {
    "stripe": (),
    "standard": (b"webhook-id",),
    "github": (b"x-github-delivery", b"x-github-event"),
    "shopify": (b"x-shopify-webhook-id", b"x-shopify-topic"),
    "paddle": (),
    "hmac": (b"x-event-type",),
}
SIGNATURE_HEADERS: dict[str, frozenset[bytes]] = {
    "stripe": frozenset({b"stripe-signature"}),
    "standard": frozenset({b"webhook-id", b"webhook-timestamp", b"webhook-signature"}),
    "github": frozenset({b"x-hub-signature-256"}),
    "shopify": frozenset({b"x-shopify-hmac-sha256"}),
    "paddle": frozenset({b"paddle-signature"}),
    "hmac": frozenset({b"x-signature", b"x-timestamp"}),
}


def signature_headers(
    scheme: str, secret: str, body: bytes, ts: int, webhook_id: str = ""
) -> RawHeaders:
    """The signature headers `scheme` sends for `body` at `ts` (the Standard Webhooks
    id is signed too, so it is passed in and sent here)."""
    if scheme == "stripe":
        value = f"t={ts},v1={vectors.stripe_v1(secret, ts, body)}"
        return ((b"stripe-signature", value.encode()),)
    if scheme == "standard":
        sig = vectors.standard_v1(secret, webhook_id, ts, body)
        return (
            (b"webhook-id", webhook_id.encode("latin-1")),
            (b"webhook-timestamp", str(ts).encode()),
            (b"webhook-signature", f"v1,{sig}".encode()),
        )
    if scheme == "github":
        return ((b"x-hub-signature-256", f"sha256={vectors.github_sha256(secret, body)}".encode()),)
    if scheme == "shopify":
        return ((b"x-shopify-hmac-sha256", vectors.shopify_b64(secret, body).encode()),)
    if scheme == "paddle":
        return (
            (b"paddle-signature", f"ts={ts};h1={vectors.paddle_h1(secret, ts, body)}".encode()),
        )
    if scheme == "hmac":
        signed = str(ts).encode() + b"." + body
        return (
            (b"x-signature", f"sha256={vectors.generic_hex(secret, signed)}".encode()),
            (b"x-timestamp", str(ts).encode()),
        )
    raise ValueError(scheme)


# --- whole requests ----------------------------------------------------------------------


@st.composite
def signed_webhooks(draw: Draw, http_safe: bool) -> Request:
    """A correctly signed webhook for one of the six schemes; its id, type, body or
    headers (one or two of them, or none) are hostile."""
    scheme = draw(st.sampled_from(SCHEMES))
    secret = draw(st.sampled_from([SECRETS[scheme], ROTATED[scheme]]))
    bad = draw(faults(("id", "type", "body", "headers")))
    id_field, type_field = BODY_FIELDS[scheme]
    fields: dict[str, st.SearchStrategy[Any]] = {}
    if id_field:
        fields[id_field] = hostile_fields if "id" in bad else plain_text
    if type_field:
        fields[type_field] = at_limits | hostile_fields if "type" in bad else plain_text
    body = draw(bodies(fields, "body" in bad))
    ts = int(time.time())
    signature_names = SIGNATURE_HEADERS[scheme]
    avoid = signature_names | {b"content-length"}  # a declared size would be the sender's lie
    headers = list(draw(extra_headers(http_safe, "headers" in bad, avoid=avoid)))
    webhook_id = ""
    for name, part in zip(HEADER_FIELDS[scheme], ("id", "type"), strict=False):
        if scheme == "hmac":
            part = "type"  # its only header field
        texts = hostile_names if part in bad else plain_text
        if name == b"webhook-id":  # signed with the body: sent with the signature below
            # Standard Webhooks ids are ASCII (the signature covers the id's text), present
            # and without surrounding whitespace, or the request is not correctly signed.
            text = header_value(draw(texts), http_safe, ascii_only=True).decode()
            webhook_id = text if text and text == text.strip() else f"msg_{text.strip()}_x"
            continue
        for _ in range(draw(st.sampled_from([1, 0, 2])) if part in bad else 1):
            headers.append((name, header_value(draw(texts), http_safe)))
    headers.extend(signature_headers(scheme, secret, body, ts, webhook_id))
    note = f"signed {scheme}, hostile: {', '.join(sorted(bad)) or 'nothing'}"
    return Request(f"/webhooks/{scheme}", tuple(headers), body, note=note)


_FORGERIES = ["none", "garbage", "wrong_secret", "tampered", "stale", "other_scheme"]


@st.composite
def forged_webhooks(draw: Draw, http_safe: bool) -> Request:
    """A webhook that is not genuine, to a configured provider or any name at all."""
    configured = draw(st.booleans())
    scheme = draw(st.sampled_from(SCHEMES))
    name = scheme if configured else draw(st.text(min_size=0, max_size=20))
    fields = {f: plain_text | hostile_fields for f in BODY_FIELDS[scheme] if f is not None}
    body = draw(bodies(fields, draw(st.booleans())))
    headers = list(draw(extra_headers(http_safe, hostile=True)))
    forgery = draw(st.sampled_from(_FORGERIES))
    ts = int(time.time())
    webhook_id = "msg_" + str(draw(st.integers(0, 10**6)))
    if forgery == "garbage":
        for header in sorted(SIGNATURE_HEADERS[scheme]):
            headers.append((header, header_value(draw(hostile_text), http_safe) or b"x"))
    elif forgery == "wrong_secret":
        wrong = "whsec_" + "d3JvbmctdGVzdC1zZWNyZXQtMDEyMzQ1Njc4OWFiY2Q="
        headers.extend(signature_headers(scheme, wrong, body, ts, webhook_id))
    elif forgery == "tampered":  # a genuine signature of another body
        headers.extend(signature_headers(scheme, SECRETS[scheme], body + b" ", ts, webhook_id))
    elif forgery == "stale":  # genuine but outside the window (no window for body-only ones)
        then = ts + draw(st.sampled_from([-1, 1])) * draw(st.integers(301, 10**9))
        signed_body = body if scheme not in ("github", "shopify") else body + b"\n"
        headers.extend(signature_headers(scheme, SECRETS[scheme], signed_body, then, webhook_id))
    elif forgery == "other_scheme":
        other = draw(st.sampled_from([s for s in SCHEMES if s != scheme]))
        headers.extend(signature_headers(other, SECRETS[other], body, ts, webhook_id))
    path = f"/webhooks/{name}"
    return Request(path, tuple(headers), body, note=f"forged {forgery} for {name!r}")


_EVENT_TYPES = ["login.ok", "login", "login.a.b", "payment.captured"]


@st.composite
def internal_events(draw: Draw, http_safe: bool) -> Request:
    """A publish with a valid service token; its key, type, data, body or headers (one or
    two of them, or none) are hostile."""
    service = draw(st.sampled_from(sorted(TOKENS)))
    bad = draw(faults(("key", "type", "data", "body", "headers")))
    named = st.sampled_from(_EVENT_TYPES)
    fields = {
        "type": st.one_of(at_limits, hostile_fields, named)
        if "type" in bad
        else named | plain_text,
        "data": hostile_fields if "data" in bad else st.dictionaries(plain_text, tame_values),
    }
    body = draw(bodies(fields, "body" in bad))
    avoid = frozenset({b"authorization", b"content-length", b"idempotency-key"})
    headers = list(draw(extra_headers(http_safe, "headers" in bad, avoid=avoid)))
    for _ in range(draw(st.sampled_from([1, 0, 2])) if "key" in bad else 1):
        key = draw(hostile_names if "key" in bad else plain_text)
        headers.append((b"idempotency-key", header_value(key, http_safe)))
    scheme = draw(st.sampled_from(["Bearer", "bearer", "BEARER"]))
    headers.append((b"authorization", f"{scheme} {TOKENS[service]}".encode()))
    note = f"event from {service}, hostile: {', '.join(sorted(bad)) or 'nothing'}"
    return Request("/v1/events", tuple(headers), body, note=note)


@st.composite
def forged_events(draw: Draw, http_safe: bool) -> Request:
    """A publish without a valid token (none, another scheme, unknown, near misses)."""
    fields = {"type": plain_text | hostile_fields, "data": tame_values | hostile_fields}
    body = draw(bodies(fields, draw(st.booleans())))
    avoid = frozenset({b"authorization"})
    headers = list(draw(extra_headers(http_safe, hostile=True, avoid=avoid)))
    auth = draw(
        st.one_of(
            st.none(),
            st.sampled_from(
                [f"Basic {BILLING_TOKEN}", BILLING_TOKEN, f"Bearer {BILLING_TOKEN}x",
                 f"Bearer {BILLING_TOKEN[:-1]}", "Bearer", "Bearer ", f"Bearer{BILLING_TOKEN}",
                 f"Bearer {BILLING_TOKEN.upper()}", f"Token {AUDIT_TOKEN}"]
            ),
            hostile_text.map(lambda t: "Bearer " + t),
        )
    )  # fmt: skip
    if auth is not None:
        headers.append((b"authorization", header_value(auth, http_safe)))
    headers.append((b"idempotency-key", b"forged-" + str(draw(st.integers(0, 99))).encode()))
    return Request("/v1/events", tuple(headers), body, note="event without a valid token")


def not_genuine(http_safe: bool) -> st.SearchStrategy[Request]:
    """Any request that must store nothing."""
    return st.one_of(forged_webhooks(http_safe), forged_events(http_safe))
