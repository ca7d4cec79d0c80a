"""The rate decision: every row of the currency policy, with the clock passed in."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from gateway.core.currency import (
    Rate,
    RateAction,
    RateDecision,
    RateOrigin,
    ServiceAnswer,
    decide_rate,
)
from gateway.core.failures.retry import CURRENCY
from gateway.errors import RateStale, RateUnavailable, TransientError, UnsupportedPair

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
MAX_AGE_S = 900.0


def rate(age_s: float, value: str = "1.08") -> Rate:
    return Rate("EUR", "USD", Decimal(value), NOW - timedelta(seconds=age_s))


FRESH = rate(2, "1.09")
VALID_CACHE = rate(600, "1.07")
EXPIRED_CACHE = rate(3600, "1.01")


def decide(
    attempt: int, answer: ServiceAnswer, fresh: Rate | None, cached: Rate | None
) -> RateDecision:
    return decide_rate(
        base="EUR", quote="USD", attempt=attempt, answer=answer, fresh=fresh, cached=cached,
        now=NOW, rand=lambda: 0.5, max_age_s=MAX_AGE_S,
    )  # fmt: skip


@pytest.mark.parametrize("attempt", [1, 2, 3, 4])
@pytest.mark.parametrize("cached", [None, VALID_CACHE, EXPIRED_CACHE])
def test_fresh_rate_is_used_whatever_the_cache(attempt: int, cached: Rate | None) -> None:
    """When the service answers with a current rate, that rate wins."""
    got = decide(attempt, ServiceAnswer.ANSWERED, FRESH, cached)
    assert (got.action, got.rate, got.origin) == (RateAction.USE, FRESH, RateOrigin.SERVICE)


@pytest.mark.parametrize("attempt", [1, 2, 3, 4])
def test_service_down_valid_cache_serves(attempt: int) -> None:
    """Service down with a valid cached rate: use the cache (the caller warns)."""
    got = decide(attempt, ServiceAnswer.DOWN, None, VALID_CACHE)
    assert (got.action, got.rate, got.origin) == (RateAction.USE, VALID_CACHE, RateOrigin.CACHE)


@pytest.mark.parametrize(
    ("attempt", "cached", "action", "delay_s", "error"),
    [
        # No cache: retry after 1 s, 5 s, 30 s (times 1.10 with this draw), then give up.
        (1, None, RateAction.RETRY, 1.1, RateUnavailable),
        (2, None, RateAction.RETRY, 5.5, RateUnavailable),
        (3, None, RateAction.RETRY, 33.0, RateUnavailable),
        (4, None, RateAction.FAIL, None, RateUnavailable),
        # Expired cache: same schedule, but the failure is a stale rate.
        (1, EXPIRED_CACHE, RateAction.RETRY, 1.1, RateStale),
        (3, EXPIRED_CACHE, RateAction.RETRY, 33.0, RateStale),
        (4, EXPIRED_CACHE, RateAction.FAIL, None, RateStale),
    ],
)
def test_service_down_without_usable_cache_retries_then_fails(
    attempt: int,
    cached: Rate | None,
    action: RateAction,
    delay_s: float | None,
    error: type[Exception],
) -> None:
    """The currency schedule runs out after three retries, with the matching error class."""
    got = decide(attempt, ServiceAnswer.DOWN, None, cached)
    assert got.action is action
    assert got.delay_s == (pytest.approx(delay_s) if delay_s is not None else None)
    assert type(got.error) is error
    assert isinstance(got.error, TransientError)
    assert got.rate is None


def test_stale_answer_from_the_service_is_not_used() -> None:
    """A service answering with an old `as_of` counts as stale, never as fresh."""
    stale_answer = rate(MAX_AGE_S + 1, "1.20")
    retry = decide(1, ServiceAnswer.ANSWERED, stale_answer, None)
    assert (retry.action, type(retry.error)) == (RateAction.RETRY, RateStale)
    rescued = decide(1, ServiceAnswer.ANSWERED, stale_answer, VALID_CACHE)
    assert (rescued.action, rescued.rate) == (RateAction.USE, VALID_CACHE)
    last = decide(CURRENCY.max_attempts, ServiceAnswer.ANSWERED, stale_answer, None)
    assert (last.action, type(last.error)) == (RateAction.FAIL, RateStale)


def test_rate_exactly_max_age_old_is_still_valid() -> None:
    """The boundary belongs to the valid side: age == max_age_s is usable."""
    got = decide(1, ServiceAnswer.DOWN, None, rate(MAX_AGE_S))
    assert got.action is RateAction.USE


@pytest.mark.parametrize("cached", [None, VALID_CACHE, EXPIRED_CACHE])
@pytest.mark.parametrize("attempt", [1, 3])
def test_unsupported_pair_fails_at_once(cached: Rate | None, attempt: int) -> None:
    """404 from the service is UNSUPPORTED_PAIR on the first try, cache or not."""
    got = decide(attempt, ServiceAnswer.UNSUPPORTED, None, cached)
    assert got.action is RateAction.FAIL
    assert isinstance(got.error, UnsupportedPair)
    assert got.error.error_class == "UNSUPPORTED_PAIR"


def test_rate_given_exactly_when_answered() -> None:
    """An answer without a rate, or a rate without an answer, is a caller's bug."""
    with pytest.raises(ValueError):
        decide(1, ServiceAnswer.ANSWERED, None, None)
    with pytest.raises(ValueError):
        decide(1, ServiceAnswer.DOWN, FRESH, None)


@pytest.mark.parametrize(
    ("value", "as_of"),
    [("0", NOW), ("-1.2", NOW), ("NaN", NOW), ("1.08", NOW.replace(tzinfo=None))],
)
def test_rates_must_be_positive_and_timezone_aware(value: str, as_of: datetime) -> None:
    with pytest.raises(ValueError):
        Rate("EUR", "USD", Decimal(value), as_of)
