"""Retention's pure decisions, with time as an argument."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from gateway.core.retention import (
    CLOCK_SKEW_S,
    Removed,
    RetentionReport,
    ScannedRow,
    age_s,
    cutoffs,
    dated,
    key_horizon_warning,
    needs_later_stamp,
    next_watermark,
    plan_scan,
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
        "order_counters": {"key": 0},
        "order_applied": {"key": 0},
        "order_log": {"key": 0},
    }
    assert doc["dry_run"] is True and doc["skipped"] is False


# --- rows stamped by a wrong clock -------------------------------------------------------

TRUSTED_UNTIL = NOW + timedelta(minutes=5)
CUTOFF = NOW - timedelta(days=30)
OLD = NOW - timedelta(days=40)
YOUNG = NOW - timedelta(days=1)
FUTURE = NOW + timedelta(days=365)


def rows(
    *stamps: datetime, blocks: tuple[int, ...] = (), unwanted: tuple[int, ...] = ()
) -> list[ScannedRow]:
    """Rows with ids 1, 2, ... in order, stamped as given."""
    return [
        ScannedRow(i, stamp, blocks=i in blocks, wanted=i not in unwanted)
        for i, stamp in enumerate(stamps, start=1)
    ]


def test_the_cutoffs_believe_stamps_up_to_the_clock_skew_bound() -> None:
    """A stamp is believed up to `CLOCK_SKEW_S` past the database's clock."""
    assert cutoffs(NOW, DAY_S, 0).trusted_until == NOW + timedelta(seconds=CLOCK_SKEW_S)
    assert cutoffs(NOW, DAY_S, 0, skew_s=60).trusted_until == NOW + timedelta(seconds=60)


@pytest.mark.parametrize(
    ("stamps", "later", "expected"),
    [
        # Believable stamps are taken as they are.
        ((OLD, YOUNG), None, [OLD, YOUNG]),
        # Just inside the bound is believed, just past it is not.
        ((TRUSTED_UNTIL, OLD), None, [TRUSTED_UNTIL, OLD]),
        ((TRUSTED_UNTIL + timedelta(seconds=1), OLD), None, [OLD, OLD]),
        # A future row takes the next believable stamp after it, not the one before.
        ((YOUNG, FUTURE, OLD), None, [YOUNG, OLD, OLD]),
        ((OLD, FUTURE, YOUNG), None, [OLD, YOUNG, YOUNG]),
        # A run of them, all from the same next stamp.
        ((FUTURE, FUTURE, FUTURE, OLD), None, [OLD, OLD, OLD, OLD]),
        # Nothing believable after it: undated, unless a stamp past the batch is known.
        ((OLD, FUTURE), None, [OLD, None]),
        ((OLD, FUTURE, FUTURE), YOUNG, [OLD, YOUNG, YOUNG]),
        ((), None, []),
    ],
)
def test_rows_stamped_in_the_future_are_dated_by_the_rows_recorded_after_them(
    stamps: tuple[datetime, ...], later: datetime | None, expected: list[datetime | None]
) -> None:
    """Ids come from one sequence: a row was recorded before every row after it."""
    assert dated(rows(*stamps), TRUSTED_UNTIL, later) == expected


@pytest.mark.parametrize(
    ("scanned", "later", "eligible", "stop_id"),
    [
        # The finding: a year-ahead row before old ones no longer stops the walk.
        (rows(FUTURE, OLD, OLD), None, [1, 2, 3], None),
        # Before this fix a future row stopped it like a young one; young rows still do.
        (rows(OLD, YOUNG, OLD), None, [1], 2),
        # A future row followed by a young one is as young: the walk stops at it.
        (rows(OLD, FUTURE, YOUNG), None, [1], 2),
        # One at the end with nothing after it cannot be dated: it waits.
        (rows(OLD, OLD, FUTURE), None, [1, 2], 3),
        (rows(OLD, OLD, FUTURE), OLD, [1, 2, 3], None),  # dated past the batch
        # A row in the outbox stops the walk whatever its stamp.
        (rows(FUTURE, OLD, blocks=(1,)), None, [], 1),
        # A row not wanted (already emptied, held by a dead letter) is stepped over.
        (rows(FUTURE, OLD, OLD, unwanted=(2,)), None, [1, 3], None),
        (rows(), None, [], None),
    ],
)
def test_plan_scan(
    scanned: list[ScannedRow], later: datetime | None, eligible: list[int], stop_id: int | None
) -> None:
    """Eligible rows come before the first that blocks, is too young or is undated."""
    plan = plan_scan(scanned, CUTOFF, TRUSTED_UNTIL, later)
    assert (plan.eligible, plan.stop_id) == (eligible, stop_id)
    assert (plan.scanned, plan.last_id) == (len(scanned), scanned[-1].id if scanned else None)


@pytest.mark.parametrize(
    ("scanned", "limit", "needed"),
    [
        (rows(OLD, FUTURE), 2, True),  # a full batch ending in a future row: look further
        (rows(OLD, FUTURE), 3, False),  # the table's end: there is nothing further
        (rows(FUTURE, OLD), 2, False),  # the batch dates its own rows
        (rows(), 2, False),
    ],
)
def test_needs_later_stamp(scanned: list[ScannedRow], limit: int, needed: bool) -> None:
    assert needs_later_stamp(scanned, TRUSTED_UNTIL, limit) is needed
