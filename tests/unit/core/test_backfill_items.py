"""The pure checks of one listing entry: what makes it unusable as listed (each with its
own class), and the bytes it is recorded with."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import orjson
import pytest

from gateway.core.backfill.items import (
    encode,
    entry_id,
    entry_type,
    iso_time,
    not_object,
    unix_time,
)


def nested(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ({"id": "evt_1"}, None),
        ("evt_1", "a string"),
        ([{"id": "evt_1"}], "a list"),
        (7, "a int"),
        (None, "a NoneType"),
    ],
)
def test_an_entry_must_be_an_object(entry: Any, says: str | None) -> None:
    failure = not_object(entry)
    assert (failure and failure.message) == (
        says and f"the listing's entry is {says}, not an object"
    )
    if failure is not None:
        assert failure.error_class == "BACKFILL_ITEM_NOT_OBJECT"


@pytest.mark.parametrize(
    ("value", "usable"),
    [
        ("evt_1", True),
        ("5847-b361", True),
        (None, False),  # missing
        ("", False),
        (" \t", False),  # blank
        (12, False),  # a number, not the id's type
        (True, False),
        ("evt_\x00nul", False),  # a NUL cannot be stored, nor published
        ("evt_\u2028", False),  # a separator is a control character here
        ("e" * 255, True),
        ("e" * 256, False),
    ],
)
def test_an_id_is_a_printable_string_of_at_most_255(value: Any, usable: bool) -> None:
    got, failure = entry_id(value, "id")
    assert (got, failure is None) == ((value, True) if usable else ("", False))
    if failure is not None:
        assert got == "" and failure.error_class == "BACKFILL_ITEM_ID_INVALID"
        assert failure.message.startswith("id ")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1_764_000_000, datetime.fromtimestamp(1_764_000_000, UTC)),
        ("1764000000", None),  # created as a string
        (None, None),
        (True, None),
        (1.5, None),
        (10**30, None),  # out of any calendar
    ],
)
def test_unix_times_are_whole_seconds(value: Any, expected: datetime | None) -> None:
    when, failure = unix_time(value, "created")
    assert when == expected
    assert (failure is None) == (expected is not None)
    if failure is not None:
        assert failure.error_class == "BACKFILL_ITEM_TIME_INVALID"


@pytest.mark.parametrize(
    ("value", "expected", "says"),
    [
        ("2026-11-30T10:00:00Z", datetime(2026, 11, 30, 10, tzinfo=UTC), None),
        (
            "2026-11-30T10:00:00+01:00",
            datetime(2026, 11, 30, 10, tzinfo=timezone(timedelta(hours=1))),
            None,
        ),
        ("2026-11-30T10:00:00", None, "no time zone"),
        ("yesterday", None, "not an ISO 8601 time"),
        (None, None, "missing"),
        (1_764_000_000, None, "not a string"),
    ],
)
def test_iso_times_need_their_zone(value: Any, expected: datetime | None, says: str | None) -> None:
    when, failure = iso_time(value, "occurred_at")
    assert when == expected
    assert (failure and says in failure.message) if says else failure is None


def test_a_type_is_text_or_nothing() -> None:
    assert [entry_type(v) for v in ("a.b", "", None, 3)] == ["a.b", None, None, None]


@pytest.mark.parametrize("indent", [False, True])
def test_an_ordinary_entry_is_written_as_its_webhook(indent: bool) -> None:
    doc = {"id": "evt_1", "n": 2**63, "t": "fällig ✓", "f": 1.5, "l": [], "o": {}}
    body, failure = encode(doc, indent=indent)
    assert failure is None
    assert body == orjson.dumps(doc, option=orjson.OPT_INDENT_2 if indent else 0)


@pytest.mark.parametrize(
    "doc",
    [
        {"n": 2**64},  # wider than 64 bits
        {"n": -(2**63) - 1},
        {"deep": nested(300)},  # past orjson's 254 levels
        {"x": float("nan")},  # orjson would write null
        {"x": float("inf")},
        {"s": "\ud800"},  # a lone surrogate is not UTF-8
    ],
)
@pytest.mark.parametrize("indent", [False, True])
def test_what_orjson_cannot_write_exactly_is_kept_and_marked(doc: Any, indent: bool) -> None:
    """The standard encoder writes it, value for value, and the failure says why."""
    body, failure = encode(doc, indent=indent)
    assert failure is not None and failure.error_class == "BACKFILL_ITEM_UNENCODABLE"
    assert body is not None
    back = json.loads(body)
    assert json.dumps(back) == json.dumps(doc)


def test_indented_fallback_looks_like_stripe() -> None:
    body, _ = encode({"a": {"n": 2**64}}, indent=True)
    assert body == b'{\n  "a": {\n    "n": 18446744073709551616\n  }\n}'


def test_no_bytes_past_the_interpreters_limit() -> None:
    body, failure = encode(nested(100_000), indent=False)
    assert body is None and failure is not None
