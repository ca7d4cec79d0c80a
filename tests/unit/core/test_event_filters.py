"""`gateway events` flags: each filter read and checked, one line per mistake, and the
replayed message's id."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from gateway.core.events.filters import (
    REPLAY_MARK,
    build_event_filter,
    check_replay_choice,
    parse_type,
    replay_msg_id,
    skip_reason,
)
from gateway.core.type_patterns import TypePattern
from gateway.errors import EventsUsageError

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def test_type_reads_the_pattern_language_with_the_spaces_trimmed() -> None:
    """`--type` is a pattern of `core.type_patterns` (tested there); what an operator
    typed around it is trimmed."""
    assert parse_type(" invoice.* ") == TypePattern("invoice.*")
    assert parse_type("invoice.paid").is_prefix is False


@pytest.mark.parametrize("bad", ["", "in*voice", "a**", "  ", "a\x1bb"])
def test_a_pattern_that_means_nothing_is_refused_naming_the_flag(bad: str) -> None:
    with pytest.raises(EventsUsageError, match="--type"):
        parse_type(bad)


def test_filters_are_read_and_repeats_dropped() -> None:
    f = build_event_filter(
        NOW,
        providers=["stripe", "stripe", "paddle"],
        types=["invoice.*", "invoice.*"],
        since="2h",
        until="2026-11-30T11:30Z",
        ids=["7", "#8", "7"],
        event_ids=["evt_1"],
        source="backfill",
    )
    assert f.providers == ("stripe", "paddle")
    assert f.types == (TypePattern("invoice.*"),)
    assert f.since == NOW - timedelta(hours=2)
    assert f.until == datetime(2026, 11, 30, 11, 30, tzinfo=UTC)
    assert f.ids == (7, 8) and f.event_ids == ("evt_1",) and f.source == "backfill"
    assert f.narrowed and not build_event_filter(NOW).narrowed


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"since": "yesterday"}, "--since: cannot read 'yesterday'"),
        ({"until": "2026-11-30T10:00"}, "has no time zone"),
        ({"since": "1h", "until": "2h"}, "--since must be earlier than --until"),
        ({"ids": ["x"]}, "--id: 'x' is not a row id"),
        ({"source": "replay"}, "--source: 'replay' is not one of live, backfill"),
    ],
)
def test_bad_filters_are_one_line(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(EventsUsageError, match=message):
        build_event_filter(NOW, **kwargs)  # type: ignore[arg-type]  # the table's mixed values


def test_a_replay_names_its_events() -> None:
    with pytest.raises(EventsUsageError, match="say which events"):
        check_replay_choice(build_event_filter(NOW, since="1h"), replay_all=False)
    with pytest.raises(EventsUsageError, match="exclude each other"):
        check_replay_choice(build_event_filter(NOW, ids=["1"]), replay_all=True)
    check_replay_choice(build_event_filter(NOW, ids=["1"]), replay_all=False)
    check_replay_choice(build_event_filter(NOW), replay_all=True)


def test_the_replayed_message_id_differs_from_the_original() -> None:
    """The live id is `{provider}:{event_id}`; a replay's extends it, so it is new to
    JetStream's duplicate window and still says which event it carries."""
    msg_id = replay_msg_id("stripe", "evt_1", "abc")
    assert msg_id == f"stripe:evt_1{REPLAY_MARK}abc" == "stripe:evt_1:replay:abc"
    assert msg_id != "stripe:evt_1"


def test_skip_reasons() -> None:
    assert skip_reason("webhooks.stripe.x", None) is None
    assert "no subject" in (skip_reason(None, None) or "")
    removed = skip_reason("webhooks.stripe.x", NOW)
    assert removed == "payload removed at 2026-11-30T12:00:00Z by retention: nothing to re-publish"
