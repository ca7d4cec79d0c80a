"""Retry schedules: the delay after each failure, its jitter band, and exhaustion."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from gateway.core.failures.retry import (
    CONSUMER_DEFAULT,
    CURRENCY,
    LEDGER,
    RetryPolicy,
    next_delay_s,
)


def const(value: float) -> Callable[[], float]:
    """A random source that always draws `value`."""
    return lambda: value


@pytest.mark.parametrize(
    ("policy", "attempt", "draw", "expected_s"),
    [
        # The lower half of the draw subtracts, the upper half adds; the position inside
        # the half moves the fraction from 10 % to 20 %.
        (CONSUMER_DEFAULT, 1, 0.0, 5 * 0.90),
        (CONSUMER_DEFAULT, 1, 0.25, 5 * 0.85),
        (CONSUMER_DEFAULT, 1, 0.5, 5 * 1.10),
        (CONSUMER_DEFAULT, 2, 0.75, 30 * 1.15),
        (CONSUMER_DEFAULT, 3, 0.0, 120 * 0.90),
        (CURRENCY, 1, 0.5, 1 * 1.10),
        (CURRENCY, 2, 0.0, 5 * 0.90),
        (CURRENCY, 3, 0.75, 30 * 1.15),
        (LEDGER, 1, 0.5, 2 * 1.10),
        (LEDGER, 2, 0.25, 10 * 0.85),
        (LEDGER, 3, 0.5, 60 * 1.10),
    ],
)
def test_delay_follows_the_table_with_jitter(
    policy: RetryPolicy, attempt: int, draw: float, expected_s: float
) -> None:
    """Each failure count maps to its row of the policy table, shifted by the jitter draw."""
    assert next_delay_s(policy, attempt, const(draw)) == pytest.approx(expected_s)


@pytest.mark.parametrize("policy", [CONSUMER_DEFAULT, CURRENCY, LEDGER])
def test_jitter_stays_within_ten_to_twenty_percent(policy: RetryPolicy) -> None:
    """Whatever the draw, the delay is 10-20 % away from the table's value, never closer."""
    draws = [i / 1000 for i in range(1000)]
    for attempt, base_s in enumerate(policy.delays_s, start=1):
        for draw in draws:
            delay_s = next_delay_s(policy, attempt, const(draw))
            assert delay_s is not None
            offset = abs(delay_s - base_s) / base_s
            assert 0.10 - 1e-9 <= offset <= 0.20 + 1e-9


def test_jitter_takes_both_signs() -> None:
    """Draws spread delays on both sides of the table's value."""
    low_s = next_delay_s(LEDGER, 1, const(0.1))
    high_s = next_delay_s(LEDGER, 1, const(0.9))
    assert low_s is not None and high_s is not None
    assert low_s < 2.0 < high_s


@pytest.mark.parametrize(
    ("policy", "attempt"),
    [(CONSUMER_DEFAULT, 4), (CURRENCY, 4), (LEDGER, 4), (LEDGER, 10)],
)
def test_exhausted_schedule_means_dead_letter(policy: RetryPolicy, attempt: int) -> None:
    """After the last delay there is no next try: None sends the event to the DLQ."""
    assert next_delay_s(policy, attempt, const(0.3)) is None


def test_max_attempts_counts_the_first_try() -> None:
    """Three delays allow four tries."""
    assert LEDGER.max_attempts == 4


@pytest.mark.parametrize("attempt", [0, -1])
def test_attempt_counts_failures_from_one(attempt: int) -> None:
    """Attempt 0 would mean no failure yet, so there is nothing to delay."""
    with pytest.raises(ValueError, match="starts at 1"):
        next_delay_s(CURRENCY, attempt, const(0.3))


@pytest.mark.parametrize("draw", [1.0, -0.1, 2.0])
def test_rand_outside_unit_interval_is_refused(draw: float) -> None:
    """A broken random source is an error, not a silently huge or negative delay."""
    with pytest.raises(ValueError, match="rand"):
        next_delay_s(CURRENCY, 1, const(draw))


@pytest.mark.parametrize(
    ("delays_s", "jitter_min", "jitter_max"),
    [((), 0.1, 0.2), ((1.0, 0.0), 0.1, 0.2), ((1.0,), 0.3, 0.2), ((1.0,), 0.1, 1.0)],
)
def test_invalid_policies_are_refused(
    delays_s: tuple[float, ...], jitter_min: float, jitter_max: float
) -> None:
    """Empty schedules, non-positive delays and inverted or total jitter bands are errors."""
    with pytest.raises(ValueError):
        RetryPolicy(delays_s, jitter_min, jitter_max)
