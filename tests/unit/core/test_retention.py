"""Retention's pure decisions, with time as an argument."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from gateway.core.retention import (
    Removed,
    RetentionReport,
    age_s,
    cutoffs,
    key_horizon_warning,
    next_watermark,
)
from gateway.settings import RETRY_HORIZON_S

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
DAY_S = 86_400.0


@pytest.mark.parametrize(
    ("payload_s", "key_s", "payloads_before", "keys_before"),
    [
        # The defaults: payloads 30 days, keys for ever.
        (30 * DAY_S, 0, NOW - timedelta(days=30), None),
        # Seconds work like any other age (tests use them).
        (1, 2, NOW - timedelta(seconds=1), NOW - timedelta(seconds=2)),
        # Fractions of a second are kept, not rounded.
        (0.5, 0, NOW - timedelta(milliseconds=500), None),
        # 0 keeps payloads for ever too; keys may still go.
        (0, 90 * DAY_S, None, NOW - timedelta(days=90)),
        (0, 0, None, None),
    ],
)
def test_cutoffs(
    payload_s: float, key_s: float, payloads_before: datetime | None, keys_before: datetime | None
) -> None:
    """Each cutoff is `now` less its age; an age of 0 means never."""
    cut = cutoffs(NOW, payload_s, key_s)
    assert (cut.payloads_before, cut.keys_before) == (payloads_before, keys_before)


@pytest.mark.parametrize(
    ("last_id", "stop_id", "left_behind", "expected"),
    [
        # A full batch, nothing in the way: continue after the last row looked at.
        (110, None, [], (111, False)),
        # A row too young (or in the outbox) ends the pass there, to be looked at again.
        (110, 105, [], (105, True)),
        # A row another transaction held is not passed either.
        (110, None, [103, 107], (103, True)),
        # Whichever comes first.
        (110, 105, [108], (105, True)),
        # Nothing looked at (an empty table): start from the beginning.
        (None, None, [], (0, False)),
    ],
)
def test_next_watermark(
    last_id: int | None, stop_id: int | None, left_behind: list[int], expected: tuple[int, bool]
) -> None:
    """The payload walk never steps past a row it may still have to empty."""
    assert next_watermark(last_id, stop_id, left_behind) == expected


@pytest.mark.parametrize(
    ("key_s", "warned"),
    [
        (0, False),  # kept for ever
        (RETRY_HORIZON_S, False),  # exactly Stripe's three days
        (90 * DAY_S, False),
        (RETRY_HORIZON_S - 1, True),  # a Stripe retry could come after the key is gone
        (2, True),
    ],
)
def test_key_horizon_warning(key_s: float, warned: bool) -> None:
    """Keys removed before a provider stops retrying are warned about (not refused)."""
    warning = key_horizon_warning(key_s, RETRY_HORIZON_S)
    assert (warning is not None) == warned
    if warning:
        assert "accepted as a new event and processed again" in warning


@pytest.mark.parametrize(
    ("then", "expected"),
    [(None, 0.0), (NOW - timedelta(seconds=90), 90.0), (NOW + timedelta(seconds=5), 0.0)],
)
def test_age_s(then: datetime | None, expected: float) -> None:
    """Nothing kept, or a clock that ran behind, is age 0 rather than negative."""
    assert age_s(NOW, then) == expected


def test_report_counts_and_json() -> None:
    """Counts add up per table and kind; the JSON always names both tables and kinds."""
    report = RetentionReport(dry_run=True)
    report.add("processed_webhooks", Removed.PAYLOAD, 10)
    report.add("processed_webhooks", Removed.PAYLOAD, 5)
    assert report.count("processed_webhooks", Removed.PAYLOAD) == 15
    assert report.count("dlq_webhooks", Removed.PAYLOAD) == 0
    doc = report.to_json()
    assert doc["removed"] == {
        "processed_webhooks": {"payload": 15, "key": 0},
        "dlq_webhooks": {"payload": 0, "key": 0},
    }
    assert doc["dry_run"] is True and doc["skipped"] is False
