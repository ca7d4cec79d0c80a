"""What the consumer does after a failure: table-driven, randomness fixed."""

from __future__ import annotations

import pytest

from gateway.core.failures.disposition import Action, Policies, dispose
from gateway.core.failures.retry import RetryPolicy
from gateway.errors import (
    DatabaseUnavailable,
    InsufficientFunds,
    InvalidAmount,
    LedgerIdCollision,
    LedgerUnavailable,
    RateUnavailable,
    RetriesExhausted,
    RetryScheduled,
    UnknownMerchant,
    UnsupportedPair,
)


def no_jitter() -> float:
    """rand() = 0.5 picks the lower jitter bound with a negative sign: delay x 0.9."""
    return 0.5


CASES = [
    # (error, deliveries, action, delay_s, critical, why)
    (InvalidAmount("0"), 1, Action.DEAD_LETTER, None, False, "permanent: no retry"),
    (UnsupportedPair("IRR/USDT"), 1, Action.DEAD_LETTER, None, False, "permanent pair"),
    (InsufficientFunds("x"), 1, Action.DEAD_LETTER, None, False, "manual review"),
    (UnknownMerchant("m"), 1, Action.DEAD_LETTER, None, False, "unknown entity"),
    (LedgerIdCollision("x"), 1, Action.DEAD_LETTER, None, True, "collision is critical"),
    (DatabaseUnavailable("x"), 1, Action.RETRY, 5.0, False, "default table, first retry"),
    (DatabaseUnavailable("x"), 2, Action.RETRY, 30.0, False, "default table, second"),
    (DatabaseUnavailable("x"), 3, Action.RETRY, 120.0, False, "default table, third"),
    (DatabaseUnavailable("x"), 4, Action.DEAD_LETTER, None, False, "default table exhausted"),
    (LedgerUnavailable("x"), 1, Action.RETRY, 2.0, False, "ledger table"),
    (LedgerUnavailable("x"), 3, Action.RETRY, 60.0, False, "ledger table, last"),
    (LedgerUnavailable("x"), 4, Action.DEAD_LETTER, None, True, "ledger exhausted is critical"),
    (KeyError("boom"), 1, Action.RETRY, 5.0, False, "unexpected: retried like transient"),
    (KeyError("boom"), 4, Action.DEAD_LETTER, None, False, "unexpected: same limit"),
    (
        RetryScheduled(RateUnavailable("x"), 5.0),
        2,
        Action.RETRY,
        5.0,
        False,
        "rate schedule's delay",
    ),
    (
        RetriesExhausted(RateUnavailable("x")),
        4,
        Action.DEAD_LETTER,
        None,
        False,
        "rate schedule spent",
    ),
]


@pytest.mark.parametrize(
    ("exc", "deliveries", "action", "delay_s", "critical", "why"), CASES, ids=[c[-1] for c in CASES]
)
def test_dispose(
    exc: BaseException,
    deliveries: int,
    action: Action,
    delay_s: float | None,
    critical: bool,
    why: str,
) -> None:
    decision = dispose(exc, deliveries, no_jitter)
    assert decision.action is action
    assert decision.critical is critical
    if delay_s is None:
        assert decision.delay_s is None
    elif isinstance(exc, RetryScheduled):
        assert decision.delay_s == delay_s
    else:
        assert decision.delay_s is not None
        assert delay_s * 0.8 <= decision.delay_s <= delay_s * 1.2


def test_error_class_is_the_causes_for_wrapped_errors() -> None:
    assert (
        dispose(RetriesExhausted(RateUnavailable("x")), 4, no_jitter).error_class
        == "RATE_UNAVAILABLE"
    )
    assert dispose(KeyError("k"), 1, no_jitter).error_class == "UNEXPECTED_ERROR"


def test_configured_tables_replace_the_defaults() -> None:
    fast = Policies(consumer=RetryPolicy((0.1,)), ledger=RetryPolicy((0.2, 0.3)))
    assert dispose(DatabaseUnavailable("x"), 2, no_jitter, fast).action is Action.DEAD_LETTER
    assert dispose(LedgerUnavailable("x"), 2, no_jitter, fast).action is Action.RETRY
