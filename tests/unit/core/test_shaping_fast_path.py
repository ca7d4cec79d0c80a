"""The request path's shortcuts give what the canonical rules give: the prepared shaper
(`webhook_shaper.webhook_shaper`) against `model.webhook_event`, `model.new_event` against
`Event(...)`, and a prepared `HmacKey` against the standard library's HMAC."""

from __future__ import annotations

import dataclasses
import hmac
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.core.bodies.content import header_policy
from gateway.core.events.model import Event, Failure, new_event, ordered_subjects, webhook_event
from gateway.core.events.shaper import webhook_shaper
from gateway.core.ordering.keys import KeyRule, parse_rules
from gateway.core.providers.braintree.webhooks import BRAINTREE
from gateway.core.signatures.base import FieldRef, HmacKey
from gateway.core.signatures.braintree import signed_form
from gateway.errors import ErrorClass
from tests.unit.core.test_model_content import WEBHOOK_CASES

AT = datetime(2026, 1, 1, tzinfo=UTC)
JSON_ID, JSON_TYPE = FieldRef("json", "id"), FieldRef("json", "type")
HEADER_ID, HEADER_TYPE = FieldRef("header", "x-id"), FieldRef("header", "x-type")
POLICY = header_policy(("content-type", "x-id", "x-note"))
#: Keys as a provider might configure them, on the subjects an ordered consumer takes.
RULES = parse_rules(["a.* /k", "/data/id", "/x"])
ORDERED = ordered_subjects(("webhooks.p.a.>", "webhooks.p.charge.*", "webhooks.p.t"))


def both(
    id_ref: FieldRef,
    type_ref: FieldRef,
    headers: dict[str, str],
    body: bytes,
    event_types: tuple[str, ...] | None = None,
    digest: bytes | None = None,
    order_rules: tuple[KeyRule, ...] = RULES,
) -> tuple[Event, Event]:
    ordering: dict[str, Any] = {"order_rules": order_rules, "ordered": ORDERED}
    canonical = webhook_event("p", id_ref, type_ref, headers, body, AT, header_policy=POLICY,
                              event_types=event_types, body_sha256=digest,
                              **ordering)  # fmt: skip
    shape = webhook_shaper("p", id_ref, type_ref, header_policy=POLICY, event_types=event_types,
                           **ordering)  # fmt: skip
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


@pytest.mark.parametrize(("doc", "key"), [
    ({"id": "e", "type": "a.b", "k": "K1", "data": {"id": "D"}}, "K1"),  # the glob's rule
    ({"id": "e", "type": "a.b", "k": 5}, "5"),
    ({"id": "e", "type": "a.b", "k": True, "data": {"id": "D"}}, "D"),  # a bool falls through
    ({"id": "e", "type": "charge.x", "k": "K1", "data": {"id": "D"}}, "D"),  # glob refuses
    ({"id": "e", "type": "t", "x": "k" * 201}, None),  # bounded below (sha256)
    ({"id": "e", "type": "t", "x": {"deep": 1}}, None),
    ({"id": "e", "type": "other", "x": "X"}, None),  # a subject no ordered consumer takes
    ({"id": "e", "type": "a.b"}, None),  # no rule reaches anything
    ({"id": "e", "type": "a.b", "x": "X"}, "X"),
    ({"id": "", "type": "a.b", "x": "X"}, None),  # parked: never ordered
    ({"id": "e", "type": "in valid\u0000", "x": "X"}, None),
])  # fmt: skip
def test_the_shaper_keys_events_as_the_canonical_rules_do(
    doc: dict[str, Any], key: str | None
) -> None:
    canonical, fast = both(JSON_ID, JSON_TYPE, {}, orjson.dumps(doc))
    assert fields_of(fast) == fields_of(canonical)
    if doc.get("x") == "k" * 201:
        key = canonical.order_key
        assert key is not None and len(key) == 64
    assert fast.order_key == key and fast.key_seq is None


def test_without_rules_or_without_ordered_subjects_no_event_is_keyed() -> None:
    body = orjson.dumps({"id": "e", "type": "t", "x": "X"})
    for shaper in (
        webhook_shaper("p", JSON_ID, JSON_TYPE, order_rules=(), ordered=ORDERED),
        webhook_shaper("p", JSON_ID, JSON_TYPE, order_rules=RULES, ordered=None),
    ):
        assert shaper({}, body, AT, None).order_key is None
    assert webhook_event("p", JSON_ID, JSON_TYPE, {}, body, AT, order_rules=RULES).order_key is None


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)


@given(
    doc=st.dictionaries(st.sampled_from(["id", "type", "x", "k", "data"]), json_values, max_size=5)
    | st.fixed_dictionaries(
        {"id": st.just("e"), "type": st.sampled_from(["t", "a.b", "u"])},
        optional={"x": json_values, "k": json_values, "data": json_values},
    )
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
        "order_key": "pi_1",
    }  # fmt: skip
    # Every field is named, so a field added to Event and not to new_event fails here. A
    # shaped event has no number yet: the gate gives it one when it records the row.
    # Nor does it await a confirmation: a provider that needs one marks it after.
    later = {"key_seq": None, "awaits_confirmation": False}
    assert set(values) | set(later) == {f.name for f in dataclasses.fields(Event)}
    made, built = new_event(**values), Event(**values)
    assert made == built and fields_of(made) == {**values, **later}
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


def braintree_form(xml: bytes) -> bytes:
    return signed_form(xml, "pub:priv") if xml else urlencode({"bt_payload": "%%"}).encode()


@pytest.mark.parametrize(
    "xml",
    [
        b"<notification><kind>dispute_won</kind><timestamp>t1</timestamp><subject><dispute>"
        b"<id>d1</id></dispute></subject></notification>",
        b"<notification><kind>check</kind><timestamp>t1</timestamp></notification>",
        b"<notification><kind>x</kind></notification>",  # no timestamp: no id
        b"not xml",
        b"",  # not even base64
    ],
)
def test_a_provider_whose_body_is_not_json_is_shaped_alike_both_ways(xml: bytes) -> None:
    """Braintree's form, read by its `document`: the fast path and the canonical rules
    give the same event, readable or not."""
    id_ref, type_ref = FieldRef("json", "event_id"), FieldRef("json", "kind")
    body = braintree_form(xml)
    canonical = webhook_event("p", id_ref, type_ref, {}, body, AT, decode=BRAINTREE.document)
    fast = webhook_shaper("p", id_ref, type_ref, decode=BRAINTREE.document)({}, body, AT, None)
    assert fields_of(fast) == fields_of(canonical)
    if xml.startswith(b"<notification><kind>dispute_won"):
        assert canonical.event_id == "dispute_won:d1:t1" and canonical.failure is None
    else:
        assert canonical.failure is not None or canonical.event_id == "check:t1"
