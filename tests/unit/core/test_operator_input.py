"""What an operator types, read as every command reads it: durations, instants, row ids,
and the pacing of `--rate`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from gateway.core.operator_input import pace_delay_s, parse_duration_s, parse_ids, parse_instant
from gateway.errors import UsageError

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90s", 90),
        ("30m", 1800),
        ("2h", 7200),
        ("1d", 86_400),
        ("1w", 604_800),
        ("1h30m", 5400),
        (" 2H ", 7200),  # operators type capitals and spaces
        ("0m", 0),
    ],
)
def test_durations_in_seconds(text: str, seconds: int) -> None:
    """Each unit and a sum of units read as the seconds they mean."""
    assert parse_duration_s(text) == seconds


@pytest.mark.parametrize("text", ["", "2", "h", "2x", "2h-1m", "-2h", "1.5h", "2026-11-30"])
def test_not_a_duration(text: str) -> None:
    """Anything that is not digits+unit pairs is not a duration (it may be a time)."""
    assert parse_duration_s(text) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-30T10:00Z", datetime(2026, 11, 30, 10, 0, tzinfo=UTC)),
        ("2026-11-30T10:00z", datetime(2026, 11, 30, 10, 0, tzinfo=UTC)),
        ("2026-11-30T10:00:30+01:00", datetime(2026, 11, 30, 9, 0, 30, tzinfo=UTC)),
        ("2026-11-30", datetime(2026, 11, 30, 0, 0, tzinfo=UTC)),  # a date alone is UTC
        ("30m", NOW - timedelta(minutes=30)),
        ("1d", NOW - timedelta(days=1)),
    ],
)
def test_instants_absolute_or_ago(text: str, expected: datetime) -> None:
    """Absolute times keep their zone (returned in UTC); durations count back from now."""
    assert parse_instant(text, NOW, "--since") == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("yesterday", "--since: cannot read 'yesterday'"),
        ("2026-13-45T10:00Z", "--since: cannot read"),
        ("2026-11-30T10:00", "has no time zone"),  # local or UTC? refuse to guess
        ("99999999w", "reaches before year 1"),  # too far back: one line, no traceback
    ],
)
def test_bad_instants_say_which_flag_and_why(text: str, message: str) -> None:
    """A time that cannot be read names the flag and shows the accepted forms."""
    with pytest.raises(UsageError, match=message):
        parse_instant(text, NOW, "--since")


def test_ids_positive_integers_in_order_without_repeats() -> None:
    """Ids may be written with a leading #; repeats count once."""
    assert parse_ids(["3", "#1", "3"]) == (3, 1)
    for bad in ("x", "0", "-1", "1.5"):
        with pytest.raises(UsageError, match="is not a row id"):
            parse_ids([bad])


@pytest.mark.parametrize(
    ("done", "now_s", "delay_s"),
    [(0, 0.0, 0.0), (1, 0.0, 0.5), (4, 1.0, 1.0), (4, 3.0, 0.0)],
)
def test_pacing_keeps_the_average_rate(done: int, now_s: float, delay_s: float) -> None:
    """At 2 rows/s, row n starts at n/2 s after the start; a late run does not wait."""
    assert pace_delay_s(0.0, done, 2.0, now_s) == delay_s
    assert pace_delay_s(0.0, done, None, now_s) == 0.0
