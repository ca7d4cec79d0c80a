"""The loop-lag figures `make bench` reports from two readings of the histogram."""

from __future__ import annotations

import math

import pytest

from bench.loop_lag import over_pass, quantile

INF = math.inf


@pytest.mark.parametrize(
    ("cumulative", "q", "expected"),
    [
        # 100 samples, all in (0.001, 0.0025]: p99 sits 99% of the way through it.
        ([0, 100, 100, 100], 0.99, 0.001 + 0.0015 * 0.99),
        # 98 fast, 2 in (0.0025, 0.01]: the 99th is halfway through that bucket.
        ([98, 98, 100, 100], 0.99, 0.0025 + 0.0075 * 0.5),
        # Everything above the highest finite bound: that bound.
        ([0, 0, 0, 10], 0.99, 0.01),
        ([50, 100, 100, 100], 0.5, 0.001),
    ],
)
def test_quantile_interpolates_within_its_bucket(
    cumulative: list[float], q: float, expected: float
) -> None:
    assert quantile(q, [0.001, 0.0025, 0.01, INF], cumulative) == pytest.approx(expected)


def test_a_pass_is_the_difference_of_two_readings() -> None:
    before = {0.001: 500.0, 0.01: 500.0, 0.05: 500.0, INF: 500.0}
    # The pass: 90 under 1 ms, 10 between 10 and 50 ms.
    after = {0.001: 590.0, 0.01: 590.0, 0.05: 600.0, INF: 600.0}
    found = over_pass(before, after)
    assert found == {"samples": 100, "p99_ms": pytest.approx(46.0), "max_under_ms": 50.0}


def test_no_histogram_or_no_samples_is_no_figure() -> None:
    reading = {0.001: 5.0, INF: 5.0}
    assert over_pass(None, reading) is None
    assert over_pass(reading, None) is None
    assert over_pass(reading, reading) is None


def test_a_sample_beyond_every_bound_has_no_ceiling() -> None:
    found = over_pass({0.001: 0.0, INF: 0.0}, {0.001: 0.0, INF: 3.0})
    assert found == {"samples": 3, "p99_ms": 1.0, "max_under_ms": None}
