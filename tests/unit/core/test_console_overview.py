"""The overview's pure decisions: which hours the chart has, which provider is silent,
how the burst threshold reads as an hourly rate, how merchants below zero are counted,
how the confirm stage's backlog is listed and when it is late."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest

from gateway.core.console.overview import (
    HOURS,
    ConfirmBacklog,
    Overview,
    Thresholds,
    age_s,
    confirm_backlog,
    fill_hours,
    hour_starts,
    provider_last,
    provider_names,
    to_json,
)
from gateway.core.health.alerting import AlertSettings

NOW = datetime(2026, 12, 1, 14, 25, 30, tzinfo=UTC)


def test_the_chart_has_the_current_hour_and_the_23_before_it() -> None:
    starts = hour_starts(NOW)
    assert len(starts) == HOURS == 24
    assert starts[-1] == datetime(2026, 12, 1, 14, tzinfo=UTC)
    assert starts[0] == datetime(2026, 11, 30, 15, tzinfo=UTC)
    assert all(b - a == timedelta(hours=1) for a, b in itertools.pairwise(starts))


def test_hours_without_rows_are_zero_and_rows_outside_the_chart_are_left_out() -> None:
    this_hour = datetime(2026, 12, 1, 14, tzinfo=UTC)
    too_old = datetime(2026, 11, 30, 14, tzinfo=UTC)
    buckets = fill_hours(NOW, {this_hour: 5, too_old: 9}, {this_hour: 7})
    assert len(buckets) == 24
    assert (buckets[-1].opened, buckets[-1].resolved, buckets[-1].net) == (5, 7, -2)
    assert sum(b.opened for b in buckets) == 5
    assert all(b.net == 0 for b in buckets[:-1])


@pytest.mark.parametrize(
    ("last_at", "silent", "age"),
    [
        (None, True, None),  # never an event: silent
        (NOW - timedelta(hours=23), False, 23 * 3600.0),
        (NOW - timedelta(hours=24), False, 24 * 3600.0),  # at the limit: not yet
        (NOW - timedelta(hours=24, seconds=1), True, 24 * 3600.0 + 1),
        (NOW + timedelta(seconds=5), False, 0.0),  # another host's clock ahead: age 0
    ],
)
def test_a_provider_is_silent_past_the_limit(
    last_at: datetime | None, silent: bool, age: float | None
) -> None:
    judged = provider_last("stripe", 1, last_at, NOW)
    assert (judged.silent, judged.age_s) == (silent, age)


def test_services_are_named_as_their_rows_name_them() -> None:
    assert provider_names(["stripe", "adyen"], ["billing"]) == [
        "adyen",
        "stripe",
        "service:billing",
    ]


@pytest.mark.parametrize(
    ("rows_max", "window_s", "per_hour"), [(10, 300.0, 120.0), (10, 3600.0, 10.0), (5, 60.0, 300.0)]
)
def test_the_burst_threshold_as_an_hourly_rate(
    rows_max: int, window_s: float, per_hour: float
) -> None:
    t = Thresholds.from_alerts(AlertSettings(dlq_rows_max=rows_max, dlq_window_s=window_s))
    assert t.growth_per_hour == per_hour


def test_age_is_never_negative() -> None:
    assert age_s(NOW, NOW + timedelta(minutes=1)) == 0.0
    assert age_s(NOW, None) is None


@pytest.mark.parametrize(
    ("negative", "note", "total", "answered"),
    [
        ((("EUR", 1), ("USD", 2)), None, 3, {"EUR": 1, "USD": 2}),
        ((), None, 0, {}),
        (None, "the ledger did not answer within 2 s", None, None),  # unknown, never 0
    ],
)
def test_merchants_below_zero_are_counted_or_said_unknown(
    negative: tuple[tuple[str, int], ...] | None,
    note: str | None,
    total: int | None,
    answered: dict[str, int] | None,
) -> None:
    """The overview's ledger figure: the count by currency and in all, or why there is
    none (a ledger that cannot be asked is not a ledger with no negative merchant)."""
    view = Overview(
        at=NOW, thresholds=Thresholds(10, 300, 3600), open_by_stage=(), added_5m=0,
        added_1h=0, added_24h=0, hours=(), oldest_open=None, outbox_pending=0,
        outbox_lag_s=0.0, held_keys=0, oldest_hold_s=None, providers=(), jobs=(),
        settlement_pending=None, negative_merchants=negative, ledger_note=note,
    )  # fmt: skip
    assert view.negative_total == total
    assert to_json(view)["ledger"] == {
        "negative_merchants": answered, "negative_total": total, "note": note,
    }  # fmt: skip


def _bare(confirm_pending: tuple[ConfirmBacklog, ...] = ()) -> Overview:
    return Overview(
        at=NOW, thresholds=Thresholds(10, 300, 3600), open_by_stage=(), added_5m=0,
        added_1h=0, added_24h=0, hours=(), oldest_open=None, outbox_pending=0,
        outbox_lag_s=0.0, held_keys=0, oldest_hold_s=None, providers=(), jobs=(),
        settlement_pending=None, confirm_pending=confirm_pending,
    )  # fmt: skip


def test_the_confirm_backlog_is_listed_by_provider_with_nothing_owed_left_out() -> None:
    """`pending_stats` answers in no order; the overview lists by name, never an age
    below zero, and a provider with no pending fetch not at all."""
    stats = {"paypal": (1, 30.0), "mollie": (1000, 720.5), "adyen": (0, 0.0), "x": (2, -1.0)}
    assert confirm_backlog(stats) == (
        ConfirmBacklog("mollie", 1000, 720.5),
        ConfirmBacklog("paypal", 1, 30.0),
        ConfirmBacklog("x", 2, 0.0),
    )
    assert confirm_backlog({}) == ()


@pytest.mark.parametrize(
    ("oldest_s", "late"),
    [(0.0, False), (599.0, False), (600.0, False), (600.5, True), (7200.0, True)],
)
def test_a_confirm_backlog_is_late_past_the_alerts_ten_minutes(oldest_s: float, late: bool) -> None:
    """GatewayConfirmBacklog's limit: 600 s, as the outbox lag's, strictly above."""
    backlog = ConfirmBacklog("mollie", 3, oldest_s)
    assert _bare((backlog,)).confirm_late(backlog) is late


def test_the_confirm_backlog_is_always_in_the_json() -> None:
    assert to_json(_bare())["confirm_pending"] == []
    view = _bare((ConfirmBacklog("mollie", 1000, 720.0),))
    assert to_json(view)["confirm_pending"] == [
        {"provider": "mollie", "pending": 1000, "oldest_s": 720.0}
    ]
    assert to_json(view)["thresholds"]["confirm_backlog_max_s"] == 600.0
