"""How the overview words its figures: ages at a glance, and the growth chart's line
labelled with the burst alert it stands for."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from gateway.console.overview import format_age, growth_chart
from gateway.core.console.overview import Overview, Thresholds, fill_hours

NOW = datetime(2026, 12, 1, 14, 25, tzinfo=UTC)


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (None, "never"),
        (0, "0 s"),
        (59.9, "59 s"),
        (60, "1 min"),
        (3599, "59 min"),
        (3600, "1 h"),
        (3 * 3600 + 5 * 60, "3 h 5 min"),
        (86_400, "1 d"),
        (2 * 86_400 + 4 * 3600 + 59, "2 d 4 h"),
    ],
)
def test_format_age(seconds: float | None, shown: str) -> None:
    assert format_age(seconds) == shown


def test_the_growth_chart_draws_the_burst_threshold_as_an_hourly_rate() -> None:
    hour = NOW.replace(minute=0)
    view = Overview(
        at=NOW,
        thresholds=Thresholds(dlq_rows_max=10, dlq_window_s=300, oldest_unresolved_max_s=3600),
        open_by_stage=(),
        added_5m=0,
        added_1h=0,
        added_24h=0,
        hours=fill_hours(NOW, {hour: 130}, {hour: 2}),
        oldest_open=None,
        outbox_pending=0,
        outbox_lag_s=0.0,
        held_keys=0,
        oldest_hold_s=None,
        providers=(),
        jobs=(),
        settlement_pending=None,
    )
    chart = growth_chart(view)
    assert "more than 10 in 5 min (120 an hour)" in chart.svg
    assert '<th scope="row">14:00</th><td>128</td><td>130 opened, 2 resolved</td>' in chart.table
    assert 'class="over-threshold"' in chart.table  # 128 is above 120
