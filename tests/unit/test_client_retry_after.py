"""`Retry-After` as the client reads it: seconds or an HTTP-date, never negative, and
anything else leaves the decision to the client's own backoff."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from gateway.client import retry_after_s

NOW = datetime(2026, 11, 30, 10, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("1", 1.0),  # what the gateway itself sends while starting up
        (" 120 ", 120.0),
        ("0", 0.0),
        ("Mon, 30 Nov 2026 10:00:30 GMT", 30.0),  # an HTTP-date 30 s ahead
        ("Mon, 30 Nov 2026 09:59:00 GMT", 0.0),  # a date already past: no wait
        (None, None),  # absent: backoff decides
        ("", None),
        ("soon", None),
        ("-5", None),
        ("1.5", None),  # not delay-seconds, not a date
        ("Mon, 30 Nov 2026 10:00:30", None),  # no zone: not an HTTP-date
        ("\u00b2", None),  # a latin-1 byte that `isdigit` calls a digit: unreadable, not a crash
        ("\u0663", None),  # an Arabic-Indic digit: not delay-seconds either
        ("9" * 5000, float("inf")),  # absurdly long: waits for ever, so the deadline gives up
    ],
)
def test_retry_after_values(value: str | None, expected: float | None) -> None:
    assert retry_after_s(value, NOW) == expected
