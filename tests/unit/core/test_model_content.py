"""The pure shaping rules for content a sender controls (`gateway.core.events.model`): a
verified webhook is never refused for its content, only recorded and parked with a
precise error class; an internal publish with the same content is refused (400)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import UTC, datetime

import pytest

from gateway.core.bodies.content import header_policy, storable_headers
from gateway.core.events.model import service_event, webhook_event
from gateway.core.signatures.base import FieldRef
from gateway.errors import BadRequest, EventIdMissing

AT = datetime(2026, 1, 1, tzinfo=UTC)
JSON_ID, JSON_TYPE = FieldRef("json", "id"), FieldRef("json", "type")
HEADER_ID, HEADER_TYPE = FieldRef("header", "x-id"), FieldRef("header", "x-type")
DEEP = b'{"id": "evt_deep", "type": "t", "a": ' + b"[" * 1100 + b"]" * 1100 + b"}"


def digest(body: bytes) -> str:
    return "sha256:" + hashlib.sha256(body).hexdigest()


# (id ref, type ref, headers, body, expected event id, expected error class or None)
WEBHOOK_CASES = [
    pytest.param(JSON_ID, JSON_TYPE, {}, b'{"id": "evt_1", "type": "a.b"}', "evt_1", None,
                 id="genuine"),
    pytest.param(JSON_ID, JSON_TYPE, {}, b"not json", digest(b"not json"), "PAYLOAD_NOT_JSON",
                 id="unparseable-body-id"),
    pytest.param(JSON_ID, JSON_TYPE, {}, b'\xef\xbb\xbf{"id": "e", "type": "t"}',
                 digest(b'\xef\xbb\xbf{"id": "e", "type": "t"}'), "PAYLOAD_NOT_JSON", id="bom"),
    pytest.param(JSON_ID, JSON_TYPE, {}, b'{"id": "e", "type": "t", "n": 1e400}',
                 digest(b'{"id": "e", "type": "t", "n": 1e400}'), "PAYLOAD_NOT_JSON",
                 id="number-infinite"),
    pytest.param(JSON_ID, JSON_TYPE, {}, b'{"id": "e", "type": "\\ud800"}',
                 digest(b'{"id": "e", "type": "\\ud800"}'), "PAYLOAD_NOT_JSON",
                 id="lone-surrogate"),
    pytest.param(JSON_ID, JSON_TYPE, {}, DEEP, digest(DEEP), "PAYLOAD_NOT_JSON",
                 id="nested-deeper-than-orjson-parses"),
    pytest.param(HEADER_ID, HEADER_TYPE, {"x-id": "d1", "x-type": "t"}, DEEP, "d1",
                 "PAYLOAD_NOT_JSON", id="deep-body-header-id"),
    pytest.param(JSON_ID, JSON_TYPE, {}, b'{"id": "e\\u0000", "type": "t"}',
                 digest(b'{"id": "e\\u0000", "type": "t"}'), "EVENT_ID_INVALID", id="id-nul"),
    pytest.param(JSON_ID, JSON_TYPE, {}, b'{"id": "e\\u001b[2J", "type": "t"}',
                 digest(b'{"id": "e\\u001b[2J", "type": "t"}'), "EVENT_ID_INVALID",
                 id="id-escape"),
    pytest.param(JSON_ID, JSON_TYPE, {}, b'{"id": "\\u001c", "type": "t"}',
                 digest(b'{"id": "\\u001c", "type": "t"}'), "EVENT_ID_INVALID",
                 id="id-only-a-separator-control"),
    pytest.param(JSON_ID, JSON_TYPE, {}, b'{"id": "\\u2028", "type": "t"}',
                 digest(b'{"id": "\\u2028", "type": "t"}'), "EVENT_ID_INVALID",
                 id="id-only-a-line-separator"),
    pytest.param(HEADER_ID, HEADER_TYPE, {"x-id": "d\r\n1", "x-type": "t"}, b"{}",
                 digest(b"{}"), "EVENT_ID_INVALID", id="header-id-crlf"),
    pytest.param(JSON_ID, JSON_TYPE, {}, b'{"id": "e", "type": "a\\u0000b"}', "e",
                 "EVENT_TYPE_INVALID", id="type-nul"),
    pytest.param(JSON_ID, JSON_TYPE, {}, b'{"id": "e", "type": "a\\r\\nX-Evil: 1"}', "e",
                 "EVENT_TYPE_INVALID", id="type-crlf"),
    pytest.param(JSON_ID, JSON_TYPE, {}, b'{"id": "e", "type": "a\\u2028b"}', "e",
                 "EVENT_TYPE_INVALID", id="type-line-separator"),
    pytest.param(HEADER_ID, HEADER_TYPE, {"x-id": "d1", "x-type": "push\x00"}, b"{}", "d1",
                 "EVENT_TYPE_INVALID", id="header-type-nul"),
    pytest.param(JSON_ID, JSON_TYPE, {"user-agent": "a\x00b"}, b'{"id": "e", "type": "t"}', "e",
                 "HEADERS_INVALID", id="header-value-nul"),
    # Only allowed headers are stored, and no allowed name holds a NUL: nothing to park.
    pytest.param(JSON_ID, JSON_TYPE, {"x-\x00": "v"}, b'{"id": "e", "type": "t"}', "e", None,
                 id="header-name-nul-not-stored"),
    pytest.param(JSON_ID, JSON_TYPE, {}, b'{"id": "e", "type": "t", "x": "\\u0000"}', "e", None,
                 id="nul-inside-payload-is-fine"),
]  # fmt: skip


@pytest.mark.parametrize(("id_ref", "type_ref", "headers", "body", "event_id", "error_class"),
                         WEBHOOK_CASES)  # fmt: skip
def test_verified_webhook_content_is_recorded_and_parked_never_refused(
    id_ref: FieldRef,
    type_ref: FieldRef,
    headers: Mapping[str, str],
    body: bytes,
    event_id: str,
    error_class: str | None,
) -> None:
    """Bad content becomes the event's failure (so no subject, never published), and
    nothing PostgreSQL's `text` or `jsonb` refuses is left in what is stored."""
    event = webhook_event("p", id_ref, type_ref, headers, body, AT)
    assert event.event_id == event_id
    assert (event.failure.error_class if event.failure else None) == error_class
    if error_class is not None:
        assert event.subject is None
    else:
        assert event.subject is not None and event.subject.isprintable()
    stored = [event.event_id, event.event_type or "", *event.headers, *event.headers.values()]
    assert not [text for text in stored if "\x00" in text]
    assert event.body == body  # kept byte for byte


LONG_ID = b'{"id": "' + b"e" * 256 + b'", "type": "t"}'
# (id ref, headers, body, the words the dead letter uses): a verified webhook whose id
# place holds nothing usable (finding: each of these was a 400, and the event was lost)
NO_USABLE_ID = [
    pytest.param(JSON_ID, {}, b'{"id": null, "type": "t"}', "absent or null", id="null"),
    pytest.param(JSON_ID, {}, b'{"type": "t"}', "absent or null", id="absent"),
    pytest.param(JSON_ID, {}, b'{"id": 1.5, "type": "t"}', "fractional number", id="float"),
    pytest.param(JSON_ID, {}, b'{"id": 1e3, "type": "t"}', "fractional number",
                 id="number-with-exponent"),
    pytest.param(JSON_ID, {}, b'{"id": -0.0, "type": "t"}', "fractional number",
                 id="negative-zero"),
    pytest.param(JSON_ID, {}, b'{"id": true, "type": "t"}', "a boolean", id="true"),
    pytest.param(JSON_ID, {}, b'{"id": false, "type": "t"}', "a boolean", id="false"),
    pytest.param(JSON_ID, {}, b'{"id": ["evt_1"], "type": "t"}', "an array", id="list"),
    pytest.param(JSON_ID, {}, b'{"id": {"v": "evt_1"}, "type": "t"}', "an object", id="object"),
    pytest.param(JSON_ID, {}, b'{"id": "", "type": "t"}', "blank", id="empty"),
    pytest.param(JSON_ID, {}, b'{"id": " \\t ", "type": "t"}', "blank", id="whitespace"),
    pytest.param(JSON_ID, {}, LONG_ID, "longer than 255", id="256-characters"),
    pytest.param(JSON_ID, {}, b'{"id": "' + b"e" * 300 + b'\\n", "type": "t"}',
                 "longer than 255", id="long-with-a-control-character"),
    pytest.param(JSON_ID, {}, b'[{"id": "evt_1", "type": "t"}]', "not an object",
                 id="array-body"),
    pytest.param(JSON_ID, {}, b'"evt_1"', "not an object", id="string-body"),
    pytest.param(JSON_ID, {}, b"42", "not an object", id="number-body"),
    pytest.param(HEADER_ID, {"x-type": "t"}, b"{}", "header x-id is absent",
                 id="header-absent"),
    pytest.param(HEADER_ID, {"x-id": "  ", "x-type": "t"}, b"{}", "header x-id is blank",
                 id="header-blank"),
    pytest.param(HEADER_ID, {"x-id": "d" * 256, "x-type": "t"}, b"{}", "longer than 255",
                 id="header-256-characters"),
]  # fmt: skip


@pytest.mark.parametrize(("id_ref", "headers", "body", "words"), NO_USABLE_ID)
def test_a_webhook_without_a_usable_id_is_kept_under_its_digest_and_parked(
    id_ref: FieldRef, headers: Mapping[str, str], body: bytes, words: str
) -> None:
    """Never refused: recorded under `sha256:<hex of the body>` (so the same bytes again
    are a duplicate), parked as `EVENT_ID_INVALID` with words saying what was wrong."""
    event = webhook_event("p", id_ref, HEADER_TYPE, headers, body, AT)
    assert event.event_id == digest(body)
    assert event.failure is not None and event.failure.error_class == "EVENT_ID_INVALID"
    assert words in event.failure.message
    assert event.subject is None and event.body == body


@pytest.mark.parametrize(
    ("body", "event_id"),
    [
        (b'{"id": 42, "type": "t"}', "42"),  # an integer id is its decimal text
        (b'{"id": -7, "type": "t"}', "-7"),
        (b'{"id": 18446744073709551615, "type": "t"}', "18446744073709551615"),
        (b'{"id": "  evt_1\\t", "type": "t"}', "evt_1"),  # blanks HTTP would trim
        (b'{"id": "' + b"e" * 255 + b'", "type": "t"}', "e" * 255),
    ],
)
def test_usable_ids_are_kept_as_they_are(body: bytes, event_id: str) -> None:
    """Strings and integers are usable ids, up to 255 characters."""
    event = webhook_event("p", JSON_ID, JSON_TYPE, {}, body, AT)
    assert (event.event_id, event.failure) == (event_id, None)


@pytest.mark.parametrize(
    ("key", "error"),
    [
        (None, EventIdMissing),
        ("e" * 256, BadRequest),
        ("k\x1b", BadRequest),
    ],
)
def test_an_internal_publish_without_a_usable_key_is_refused(
    key: str | None, error: type[Exception]
) -> None:
    """`/v1/events` keeps its 400: the same rule of what is usable, refused not parked."""
    with pytest.raises(error):
        service_event("svc", ("events.svc.>",), key, {}, b'{"type": "a", "data": {}}', AT)


def test_the_same_unparseable_bytes_get_the_same_id() -> None:
    """A retry of the same bytes is a duplicate at the idempotency gate, not a second row."""
    first = webhook_event("p", JSON_ID, JSON_TYPE, {}, b"{bad", AT)
    again = webhook_event("p", JSON_ID, JSON_TYPE, {"x": "y"}, b"{bad", AT)
    other = webhook_event("p", JSON_ID, JSON_TYPE, {}, b"{bad ", AT)
    assert first.event_id == again.event_id != other.event_id


# (idempotency key, headers, body): each is refused with 400
SERVICE_REFUSED = [
    pytest.param("k", {}, b'{"type": "a\\u0000b", "data": {}}', id="type-nul"),
    pytest.param("k", {}, b'{"type": "a\\r\\nX-Evil: 1", "data": {}}', id="type-crlf"),
    pytest.param("k\x00", {}, b'{"type": "a", "data": {}}', id="key-nul"),
    pytest.param("k\x1b", {}, b'{"type": "a", "data": {}}', id="key-escape"),
    pytest.param("k", {"traceparent": "\x00"}, b'{"type": "a", "data": {}}', id="header-nul"),
    pytest.param("k", {}, b'\xef\xbb\xbf{"type": "a", "data": {}}', id="bom"),
    pytest.param("k", {}, b'{"type": "a", "data": {"n": 1e400}}', id="number-infinite"),
    pytest.param("k", {}, b'{"type": "a", "data": {"s": "\\udfff"}}', id="lone-surrogate"),
    pytest.param("k", {}, b'{"type": "a", "data": ' + b"[" * 1100 + b"]" * 1100 + b"}",
                 id="nested-deeper-than-orjson-parses"),
]  # fmt: skip


@pytest.mark.parametrize(("key", "headers", "body"), SERVICE_REFUSED)
def test_internal_publish_with_bad_content_is_a_400(
    key: str, headers: Mapping[str, str], body: bytes
) -> None:
    """Internal publishers are our own code: bad content is refused for them to fix."""
    with pytest.raises(BadRequest):
        service_event("svc", ("events.svc.>",), key, headers, body, AT)


def test_stored_headers_drop_credentials_and_replace_nuls() -> None:
    """Only allowed headers are kept, never credentials; a NUL is replaced and reported."""
    policy = header_policy(["a", "authorization", "cookie"])
    kept, had_nul = storable_headers({"authorization": "x", "cookie": "c", "a": "1\x002"}, policy)
    assert (kept, had_nul) == ({"a": "1\ufffd2"}, True)
    assert storable_headers({"a": "1", "b": "2"}, policy) == ({"a": "1"}, False)
