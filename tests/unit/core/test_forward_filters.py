"""Which events a destination receives: providers, type patterns, and `--where`
containment read as PostgreSQL's jsonb `@>`."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.core.forward.filters import MAX_WHERE_BYTES, ForwardFilter, contains

BODY = (
    b'{"type":"charge.refunded","livemode":false,"data":{"object":{"currency":"eur",'
    b'"amount":500,"tags":["a","b"],"refunds":[{"id":"re_1","amount":100}]}}}'
)


@pytest.mark.parametrize(
    ("value", "pattern", "expected"),
    [
        ({"a": 1, "b": 2}, {"a": 1}, True),
        ({"a": 1}, {"a": 2}, False),
        ({"a": 1}, {"b": 1}, False),
        ({"a": {"b": {"c": 1, "d": 2}}}, {"a": {"b": {"c": 1}}}, True),
        ([1, 2, 3], [3, 1], True),
        ([1, 2], [4], False),
        ([{"id": 1, "x": 2}, {"id": 3}], [{"id": 3}], True),
        ({"a": [1, 2]}, {"a": []}, True),
        ({"a": 1}, {}, True),
        ({"a": True}, {"a": 1}, False),  # jsonb: true is not 1
        ({"a": 1}, {"a": 1.0}, True),  # jsonb numbers compare by value
        ({"a": "1"}, {"a": 1}, False),
        ({"a": None}, {"a": None}, True),
        ({"a": [1]}, {"a": 1}, False),
    ],
)
def test_containment_reads_as_jsonb(value: Any, pattern: Any, expected: bool) -> None:
    assert contains(value, pattern) is expected


@pytest.mark.parametrize(
    ("providers", "types", "where", "expected"),
    [
        ((), (), None, True),
        (("stripe",), (), None, True),
        (("paddle",), (), None, False),
        ((), ("charge.*",), None, True),
        ((), ("charge.succeeded",), None, False),
        ((), ("invoice.*", "charge.refunded"), None, True),
        ((), (), '{"livemode": false}', True),
        ((), (), '{"livemode": true}', False),
        ((), (), '{"data": {"object": {"currency": "eur", "tags": ["b"]}}}', True),
        ((), (), '{"data": {"object": {"refunds": [{"id": "re_1"}]}}}', True),
        (("stripe",), ("charge.*",), '{"data": {"object": {"currency": "usd"}}}', False),
    ],
)
def test_an_event_passes_only_every_filter(
    providers: tuple[str, ...], types: tuple[str, ...], where: str | None, expected: bool
) -> None:
    f = ForwardFilter.parse(providers, types, where)
    assert f.passes("stripe", "charge.refunded", BODY) is expected


def test_a_body_that_is_not_json_passes_no_where() -> None:
    f = ForwardFilter.parse((), (), '{"a": 1}')
    assert not f.passes("hmac", "t", b"a=1")
    assert ForwardFilter.parse((), (), None).passes("hmac", "t", b"a=1")


@pytest.mark.parametrize(
    ("types", "where", "says"),
    [
        (("in*voice",), None, "--type: .*may only end"),
        ((" charge.*",), None, "--type: .*whitespace"),
        ((), "{not json", "--where: not JSON"),
        ((), "[1, 2]", "--where: must be a JSON object"),
        ((), '{"a": "' + "x" * MAX_WHERE_BYTES + '"}', "--where: at most"),
    ],
)
def test_bad_filters_name_their_flag(types: tuple[str, ...], where: str | None, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        ForwardFilter.parse((), types, where)
