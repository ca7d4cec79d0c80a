"""Which exchange rate to use, from the error policy's currency row.

Pure: the caller reports what the currency-service said, what the cache holds and the
time; `decide_rate` says use a rate, retry after a delay, or give up with the error to
record. The policy, in order:

1. unsupported pair → `UnsupportedPair` at once (permanent, no retry);
2. the service answered with a rate younger than `max_age_s` → use it;
3. otherwise a cached rate younger than `max_age_s` → use it (the caller logs a warning);
4. otherwise retry after 1 s, 5 s, 30 s (± jitter; the cache may fill meanwhile);
5. then give up: `RateStale` if only an expired rate was seen, else `RateUnavailable`.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from gateway.core.failures.retry import CURRENCY, RetryPolicy, next_delay_s
from gateway.errors import GatewayError, RateStale, RateUnavailable, UnsupportedPair

DEFAULT_MAX_AGE_S = 900.0


@dataclass(frozen=True)
class Rate:
    """One `base` costs `rate` of `quote`, as published at `as_of` (timezone-aware)."""

    base: str
    quote: str
    rate: Decimal
    as_of: datetime

    def __post_init__(self) -> None:
        if not self.rate.is_finite() or self.rate <= 0:
            raise ValueError(f"{self.pair}: a rate must be positive, got {self.rate}")
        if self.as_of.tzinfo is None:
            raise ValueError(f"{self.pair}: as_of must carry a timezone")

    @property
    def pair(self) -> str:
        """`BASE/QUOTE`, as written in logs and errors."""
        return f"{self.base}/{self.quote}"

    def age_s(self, now: datetime) -> float:
        """Seconds since `as_of`; negative when the publisher's clock is ahead."""
        return (now - self.as_of).total_seconds()

    def is_valid(self, now: datetime, max_age_s: float) -> bool:
        """True while the rate may still be used."""
        return self.age_s(now) <= max_age_s


class ServiceAnswer(enum.StrEnum):
    """What the currency-service did on this try."""

    ANSWERED = "answered"
    DOWN = "down"  # refused, timed out, 5xx, or an unreadable body
    UNSUPPORTED = "unsupported"  # 404: it does not quote this pair


class RateAction(enum.StrEnum):
    """What to do next."""

    USE = "use"
    RETRY = "retry"
    FAIL = "fail"


class RateOrigin(enum.StrEnum):
    """Where a rate in use came from."""

    SERVICE = "service"
    CACHE = "cache"
    IDENTITY = "identity"  # same currency on both sides: rate 1, nothing asked


@dataclass(frozen=True)
class RateDecision:
    """Use `rate`; or retry after `delay_s`; or fail with `error`."""

    action: RateAction
    rate: Rate | None = None
    origin: RateOrigin | None = None
    delay_s: float | None = None
    #: FAIL: the error to raise. RETRY: the error to report if the caller stops here.
    error: GatewayError | None = None


def decide_rate(
    *,
    base: str,
    quote: str,
    attempt: int,
    answer: ServiceAnswer,
    fresh: Rate | None,
    cached: Rate | None,
    now: datetime,
    rand: Callable[[], float],
    max_age_s: float = DEFAULT_MAX_AGE_S,
    policy: RetryPolicy = CURRENCY,
) -> RateDecision:
    """The next step after try number `attempt` (1-based) to get a `base`/`quote` rate."""
    if (answer is ServiceAnswer.ANSWERED) != (fresh is not None):
        raise ValueError("a rate is given exactly when the service answered")
    pair = f"{base}/{quote}"
    if answer is ServiceAnswer.UNSUPPORTED:
        return RateDecision(
            RateAction.FAIL, error=UnsupportedPair(f"the currency-service does not quote {pair}")
        )
    if fresh is not None and fresh.is_valid(now, max_age_s):
        return RateDecision(RateAction.USE, rate=fresh, origin=RateOrigin.SERVICE)
    if cached is not None and cached.is_valid(now, max_age_s):
        return RateDecision(RateAction.USE, rate=cached, origin=RateOrigin.CACHE)

    # No usable rate. An expired one (cached, or stale from the service itself) makes
    # this a stale rate rather than a missing one, which operators fix differently.
    expired = [r for r in (fresh, cached) if r is not None]
    error: GatewayError
    if expired:
        newest = max(expired, key=lambda r: r.as_of)
        error = RateStale(
            f"{pair}: currency-service {answer.value}; newest rate is "
            f"{newest.age_s(now):.0f} s old (max {max_age_s:.0f} s)"
        )
    else:
        error = RateUnavailable(f"{pair}: currency-service {answer.value} and no cached rate")
    delay_s = next_delay_s(policy, attempt, rand)
    if delay_s is None:
        return RateDecision(RateAction.FAIL, error=error)
    return RateDecision(RateAction.RETRY, delay_s=delay_s, error=error)
