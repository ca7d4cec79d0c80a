"""The event log's search: the CLI's filter parsing, a required window of at most 31
days, the publish state, bounded JSON containment and page cursors."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from gateway.core.events.search import (
    CONTAINS_MAX_BYTES,
    WINDOW_DEFAULT,
    PublishState,
    parse_event_search,
)
from gateway.core.keyset import BadCursor, Keyset, decode_cursor, encode_cursor
from gateway.errors import EventsUsageError

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def test_no_window_means_the_last_24_hours() -> None:
    """An empty form searches the last day, up to now."""
    s = parse_event_search({"provider": [""], "since": [""]}, NOW)
    assert (s.filter.since, s.filter.until) == (NOW - WINDOW_DEFAULT, NOW)
    assert s.filter.providers == ()


def test_one_end_given_moves_the_other() -> None:
    """`until` alone searches the day before it; `since` alone searches up to now."""
    s = parse_event_search({"until": ["2026-11-20T00:00Z"]}, NOW)
    assert s.filter.since == datetime(2026, 11, 19, tzinfo=UTC)
    s = parse_event_search({"since": ["3d"]}, NOW)
    assert (s.filter.since, s.filter.until) == (NOW - timedelta(days=3), NOW)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"since": ["40d"]}, "40.0 days wide; search at most 31 days"),
        ({"since": ["2026-10-01"], "until": ["2026-11-05"]}, "at most 31 days"),
        ({"since": ["yesterday"]}, "since: cannot read 'yesterday'"),
        ({"since": ["1h"], "until": ["2h"]}, "since must be earlier than until"),
        ({"source": ["kafka"]}, "source: 'kafka' is not one of live, backfill"),
        ({"state": ["settled"]}, "state: 'settled' is not one of published, waiting"),
        ({"type": ["in*voice"]}, "type: "),
        ({"id": ["12a"]}, "id: '12a' is not a row id"),
        ({"contains": ["{not json"]}, "contains: not valid JSON"),
        ({"contains": ['"a string"']}, "contains: give a JSON object or array"),
        ({"contains": ['{"a": "' + "x" * CONTAINS_MAX_BYTES + '"}']}, "at most 4096"),
        ({"contains": ['{"a": "x\\u0000"}']}, "contains: \\u0000 matches no stored payload"),
        ({"cursor": ["bm90IGEgY3Vyc29y"]}, "cursor: not a page cursor"),
        ({"limit": ["0"]}, "limit: give a whole number from 1 to 200"),
        ({"since": ["1h", "2h"]}, "since: give it once"),
    ],
)
def test_refusals_say_which_field_and_why(params: dict[str, list[str]], message: str) -> None:
    with pytest.raises(EventsUsageError) as caught:
        parse_event_search(params, NOW)
    assert message in str(caught.value)
    assert "--" not in str(caught.value)


def test_containment_keeps_numbers_exact() -> None:
    """The document goes to PostgreSQL as typed: a long integer stays an integer."""
    s = parse_event_search({"contains": ['{"amount": 123456789012345678901234567890}']}, NOW)
    assert s.contains == '{"amount": 123456789012345678901234567890}'


def test_a_31_day_window_is_allowed() -> None:
    s = parse_event_search({"since": ["31d"]}, NOW)
    assert (s.filter.since, s.filter.until) == (NOW - timedelta(days=31), NOW)


def test_state_contains_and_cursor_are_read() -> None:
    """Containment is kept as canonical JSON; the cursor brings back its keyset."""
    key = Keyset(NOW - timedelta(minutes=5), 42)
    s = parse_event_search(
        {
            "state": ["no subject"],
            "contains": ['{ "data" : {"object": {"id": "pi_1"}} }'],
            "cursor": [encode_cursor(key)],
            "provider": ["stripe", "stripe", "github"],
        },
        NOW,
    )
    assert s.state is PublishState.NO_SUBJECT
    assert s.contains == '{ "data" : {"object": {"id": "pi_1"}} }'
    assert s.after == key
    assert s.filter.providers == ("stripe", "github")


def test_query_carries_the_search_with_absolute_times() -> None:
    """A link made from a search means the same rows later: times are absolute."""
    s = parse_event_search({"since": ["2h"], "type": ["invoice.*"], "source": ["live"]}, NOW)
    assert s.query() == [
        ("type", "invoice.*"),
        ("since", "2026-12-01T10:00:00Z"),
        ("until", "2026-12-01T12:00:00Z"),
        ("source", "live"),
    ]
    again = parse_event_search({k: [v] for k, v in s.query()}, NOW + timedelta(hours=5))
    assert again.filter == s.filter


@pytest.mark.parametrize("text", ["", "x" * 300, "W10", "WyJ4IiwgMV0", "WyIyMDI2LTEyLTAxIiwgMV0"])
def test_cursors_not_given_out_are_refused(text: str) -> None:
    """Empty, too long, the wrong shape, or a time without a zone."""
    with pytest.raises(EventsUsageError):
        parse_event_search({"cursor": [text]} if text else {"cursor": ["=="]}, NOW)
    if text:
        with pytest.raises(BadCursor):
            decode_cursor(text)
