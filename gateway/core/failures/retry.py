"""Retry schedules from the error policy, and the jittered delay before the next try.

Pure: the caller passes the failure count and a source of randomness, so every delay is
reproducible in tests. `None` means the schedule is exhausted and the event goes to the
dead-letter table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class RetryPolicy:
    """Delays before each retry, and the jitter band applied to every delay."""

    delays_s: tuple[float, ...]
    #: Jitter is a fraction of the delay, between these bounds, added or subtracted.
    jitter_min: float = 0.10
    jitter_max: float = 0.20

    def __post_init__(self) -> None:
        if not self.delays_s:
            raise ValueError("a retry policy needs at least one delay")
        if any(d <= 0 for d in self.delays_s):
            raise ValueError(f"retry delays must be positive: {self.delays_s}")
        if not 0 <= self.jitter_min <= self.jitter_max < 1:
            raise ValueError(
                f"need 0 <= jitter_min <= jitter_max < 1, got {self.jitter_min}, {self.jitter_max}"
            )

    @property
    def max_attempts(self) -> int:
        """Tries in total: the first one plus one per delay."""
        return len(self.delays_s) + 1

    @property
    def longest_s(self) -> float:
        """The longest an event can spend between its first failure and its last try:
        every delay at its most jittered."""
        return sum(self.delays_s) * (1.0 + self.jitter_max)


#: Any consumer unless its dependency has its own row in the policy table.
CONSUMER_DEFAULT = RetryPolicy((5.0, 30.0, 120.0))
#: The currency-service (the Redis cache may serve in between; see core.currency).
CURRENCY = RetryPolicy((1.0, 5.0, 30.0))
#: The ledger; exhausting it is a critical event.
LEDGER = RetryPolicy((2.0, 10.0, 60.0))


def next_delay_s(policy: RetryPolicy, attempt: int, rand: Callable[[], float]) -> float | None:
    """The delay before the next try after `attempt` failures (1-based), or None for the DLQ.

    One draw from `rand` (uniform in [0, 1)) picks both the sign and the size of the
    jitter: the lower half subtracts, the upper half adds, and the position within the
    half scales the fraction from `jitter_min` to `jitter_max`. Jitter keeps a fleet of
    workers that failed together from retrying together.
    """
    if attempt < 1:
        raise ValueError(f"attempt counts failures and starts at 1, got {attempt}")
    if attempt > len(policy.delays_s):
        return None
    draw = rand()
    if not 0.0 <= draw < 1.0:
        raise ValueError(f"rand() must return a value in [0, 1), got {draw}")
    sign = -1.0 if draw < 0.5 else 1.0
    position = (draw % 0.5) * 2.0  # 0 at the start of either half, towards 1 at its end
    fraction = policy.jitter_min + (policy.jitter_max - policy.jitter_min) * position
    return policy.delays_s[attempt - 1] * (1.0 + sign * fraction)
