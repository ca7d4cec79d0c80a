"""The request path's shortcuts give what the canonical rules give: the prepared shaper
(`webhook_shaper.webhook_shaper`) against `model.webhook_event`, `model.new_event` against
`Event(...)`, and a prepared `HmacKey` against the standard library's HMAC."""

from __future__ import annotations

import dataclasses
import hmac
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.core.content import header_policy
from gateway.core.model import Event, Failure, new_event, webhook_event
from gateway.core.signatures.base import FieldRef, HmacKey
from gateway.core.webhook_shaper import webhook_shaper
from gateway.errors import ErrorClass
from tests.unit.core.test_model_content import WEBHOOK_CASES

AT = datetime(2026, 1, 1, tzinfo=UTC)
JSON_ID, JSON_TYPE = FieldRef("json", "id"), FieldRef("json", "type")
HEADER_ID, HEADER_TYPE = FieldRef("header", "x-id"), FieldRef("header", "x-type")
POLICY = header_policy(("content-type", "x-id", "x-note"))


def both(
    id_ref: FieldRef,
    type_ref: FieldRef,
    headers: dict[str, str],
    body: bytes,
    event_types: tuple[str, ...] | None = None,
    digest: bytes | None = None,
) -> tuple[Event, Event]:
    canonical = webhook_event("p", id_ref, type_ref, headers, body, AT, header_policy=POLICY,
                              event_types=event_types, body_sha256=digest)  # fmt: skip
    shape = webhook_shaper("p", id_ref, type_ref, header_policy=POLICY, event_types=event_types)
    return canonical, shape(headers, body, AT, digest)


def fields_of(event: Event) -> dict[str, Any]:
    return {f.name: getattr(event, f.name) for f in dataclasses.fields(event)}


@pytest.mark.parametrize(("id_ref", "type_ref", "headers", "body", "event_id", "error"),
                         WEBHOOK_CASES)  # fmt: skip
def test_the_shaper_gives_the_canonical_event_for_every_content_case(
    id_ref: FieldRef, type_ref: FieldRef, headers: dict[str, str], body: bytes,
    event_id: str, error: str | None,
) -> None:  # fmt: skip
    canonical, fast = both(id_ref, type_ref, headers, body)
    assert fields_of(fast) == fields_of(canonical)
    assert fast.event_id == event_id


# Ids and types the shortcut must hand to the canonical rules (or get exactly right).
EDGE_VALUES = ["e", " e", "e ", "\te", "e\t", "", " ", "x" * 255, "x" * 256, "é", "e\x00",
               "e\u2028", 7, 0, -1, True, None, 1.5, [], {}]  # fmt: skip


@pytest.mark.parametrize("value", EDGE_VALUES, ids=repr)
@pytest.mark.parametrize("where", ["id", "type"])
def test_the_shaper_agrees_on_blank_long_and_non_string_ids_and_types(
    value: object, where: str
) -> None:
    doc = {"id": "evt_1", "type": "a.b", where: value}
    canonical, fast = both(JSON_ID, JSON_TYPE, {}, orjson.dumps(doc))
    assert fields_of(fast) == fields_of(canonical)


@pytest.mark.parametrize(("event_type", "allowed"), [
    ("charge.succeeded", True), ("charge.failed", True), ("invoice.paid", False)])  # fmt: skip
def test_the_shaper_applies_the_allow_list_as_the_canonical_rules_do(
    event_type: str, allowed: bool
) -> None:
    body = orjson.dumps({"id": "e", "type": event_type})
    canonical, fast = both(JSON_ID, JSON_TYPE, {}, body, event_types=("charge.*",))
    assert fields_of(fast) == fields_of(canonical)
    assert (fast.failure is None) is allowed


def test_the_shaper_keeps_the_digest_and_parks_a_header_nul_like_the_canonical_rules() -> None:
    headers = {"x-id": "d1", "x-type": "t", "x-note": "a\x00b", "content-type": "c"}
    canonical, fast = both(HEADER_ID, HEADER_TYPE, headers, b"{}", digest=b"\x01" * 32)
    assert fields_of(fast) == fields_of(canonical)
    assert fast.failure is not None and fast.failure.error_class == ErrorClass.HEADERS_INVALID


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)


@given(
    doc=st.dictionaries(st.sampled_from(["id", "type", "x"]), json_values, max_size=3)
    | json_values,
    headers=st.dictionaries(
        st.sampled_from(["x-id", "x-type", "x-note", "content-type"]),
        st.text(max_size=20),
        max_size=4,
    ),
    in_headers=st.booleans(),
)
def test_the_shaper_gives_the_canonical_event_for_any_body_and_headers(
    doc: Any, headers: dict[str, str], in_headers: bool
) -> None:
    try:
        body = orjson.dumps(doc)
    except (orjson.JSONEncodeError, TypeError):
        body = repr(doc).encode()
    refs = (HEADER_ID, HEADER_TYPE) if in_headers else (JSON_ID, JSON_TYPE)
    canonical, fast = both(*refs, headers, body)
    assert fields_of(fast) == fields_of(canonical)


def test_new_event_is_the_event_its_constructor_makes() -> None:
    values: dict[str, Any] = {
        "provider": "p", "event_id": "e", "event_type": "t", "subject": "webhooks.p.t",
        "headers": {"a": "b"}, "body": b"{}", "received_at": AT,
        "failure": Failure(ErrorClass.EVENT_TYPE_INVALID, "m"), "body_sha256": b"d",
        "source": "backfill", "traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01",
    }  # fmt: skip
    # Every field is named, so a field added to Event and not to new_event fails here.
    assert set(values) == {f.name for f in dataclasses.fields(Event)}
    made, built = new_event(**values), Event(**values)
    assert made == built and fields_of(made) == values
    assert dataclasses.replace(made, event_id="f").event_id == "f"
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.event_id = "g"  # type: ignore[misc]


@pytest.mark.parametrize("key_len", [0, 1, 32, 63, 64, 65, 200])
def test_a_prepared_hmac_key_gives_the_standard_librarys_hmac(key_len: int) -> None:
    key = bytes(range(256))[:key_len] if key_len <= 256 else b""
    message = b"1700000000." + b'{"id": "evt_1"}' * 30
    prepared = HmacKey(key)
    assert prepared.digest(message) == hmac.digest(key, message, "sha256")
    assert prepared.digest(message[:11], message[11:]) == hmac.digest(key, message, "sha256")
    assert prepared.digest(message) == prepared.digest(message)  # the prepared state is kept
    assert repr(prepared) == "HmacKey(...)"
