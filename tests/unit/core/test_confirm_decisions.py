"""The confirm stage's decisions: what a fetch's answer means, the delay before the next
try, and when a fetch is parked instead."""

from __future__ import annotations

import sys

import pytest

from gateway.core.confirm.decisions import (
    ConfirmPolicy,
    Decision,
    Verdict,
    decide,
    delay_s,
    verdict_of,
    wait_s,
)
from gateway.errors import ErrorClass

#: The largest draw `random.random()` can return.
LAST_DRAW = 1.0 - sys.float_info.epsilon / 2
POLICY = ConfirmPolicy(max_attempts=5, first_delay_s=2.0, max_delay_s=60.0)


@pytest.mark.parametrize(
    ("status", "verdict"),
    [
        (None, Verdict.RETRY),  # no answer: a timeout or a transport error
        (200, Verdict.READ),
        (204, Verdict.READ),
        (301, Verdict.PARK),  # the client refuses redirects first; alone it is no answer
        (400, Verdict.PARK),
        (401, Verdict.RETRY),  # a key being rotated
        (403, Verdict.RETRY),
        (404, Verdict.NOT_FOUND),  # a forged or mistyped id
        (408, Verdict.RETRY),
        (410, Verdict.NOT_FOUND),
        (422, Verdict.PARK),
        (425, Verdict.RETRY),
        (429, Verdict.RETRY),
        (500, Verdict.RETRY),
        (503, Verdict.RETRY),
    ],
)
def test_each_status_has_its_verdict(status: int | None, verdict: Verdict) -> None:
    """An answer's status alone says whether to read it, drop it, try again or park."""
    assert verdict_of(status) is verdict


@pytest.mark.parametrize(
    ("attempts", "expected_s"),
    [
        (1, 2.0),
        (2, 4.0),
        (3, 8.0),
        (5, 32.0),
        (6, 60.0),  # 64 capped at max_delay_s
        (7, 60.0),
        (1_000, 60.0),
    ],
)
def test_the_delay_doubles_up_to_its_cap(attempts: int, expected_s: float) -> None:
    """At the middle draw (no jitter) the delay is first_delay_s doubled per try, capped."""
    assert delay_s(POLICY, attempts, 0.5) == pytest.approx(expected_s)


@pytest.mark.parametrize(
    ("attempts", "draw", "expected_s"),
    [
        (1, 0.0, 2.0 * 0.8),  # the lowest draw takes 20 % off
        (1, 0.5, 2.0),
        (1, LAST_DRAW, 2.0 * 1.2),  # the highest draw adds (almost) 20 %
        (10, 0.0, 60.0 * 0.8),  # the jitter applies to the capped delay too
        (10, LAST_DRAW, 60.0 * 1.2),
    ],
)
def test_jitter_stays_within_twenty_percent(attempts: int, draw: float, expected_s: float) -> None:
    """The draw moves the delay linearly across ±20 % of its base."""
    assert delay_s(POLICY, attempts, draw) == pytest.approx(expected_s)


@pytest.mark.parametrize("attempts", [1, 3, 6, 50])
def test_jitter_never_passes_its_band(attempts: int) -> None:
    """Over a sweep of draws the delay stays within ±20 % of its base (the cap included)."""
    base_s = min(2.0 * 2 ** (attempts - 1), 60.0)
    for draw in [i / 1000 for i in range(1000)] + [LAST_DRAW]:
        assert base_s * 0.8 <= delay_s(POLICY, attempts, draw) <= base_s * 1.2


@pytest.mark.parametrize(
    ("attempts", "draw", "says"),
    [
        (0, 0.5, "attempts"),
        (-1, 0.5, "attempts"),
        (1, -0.1, "draw"),
        (1, 1.0, "draw"),
        (1, float("nan"), "draw"),
    ],
)
def test_invalid_arguments_raise(attempts: int, draw: float, says: str) -> None:
    """Tries count from 1 and a draw is in [0, 1): anything else is a caller's bug."""
    with pytest.raises(ValueError, match=says):
        delay_s(POLICY, attempts, draw)


def test_a_huge_attempt_count_does_not_overflow() -> None:
    """2 ** (10**9) would overflow a float: the exponent is capped before it is used."""
    assert delay_s(POLICY, 10**9, 0.5) == 60.0
    huge = ConfirmPolicy(10**9, 3_600.0, 86_400.0)
    assert delay_s(huge, 10**9, 0.0) == pytest.approx(86_400.0 * 0.8)


@pytest.mark.parametrize(
    ("status", "attempts", "decision"),
    [
        (200, 1, Decision(Verdict.READ)),
        (200, 5, Decision(Verdict.READ)),  # an answer read on the last try is read
        # Parked at once: a forged id, or a key of another account that must be seen.
        (404, 1, Decision(Verdict.PARK, error_class=ErrorClass.CONFIRMATION_NOT_FOUND)),
        (410, 5, Decision(Verdict.PARK, error_class=ErrorClass.CONFIRMATION_NOT_FOUND)),
        (503, 1, Decision(Verdict.RETRY, delay_s=2.0)),
        (None, 3, Decision(Verdict.RETRY, delay_s=8.0)),
        (429, 4, Decision(Verdict.RETRY, delay_s=16.0)),
        (
            503,
            5,
            Decision(Verdict.PARK, error_class=ErrorClass.CONFIRMATION_ATTEMPTS_EXHAUSTED),
        ),
        (
            None,
            6,  # past max_attempts (a claim counts as a try even if its process died)
            Decision(Verdict.PARK, error_class=ErrorClass.CONFIRMATION_ATTEMPTS_EXHAUSTED),
        ),
        (401, 5, Decision(Verdict.PARK, error_class=ErrorClass.CONFIRMATION_ATTEMPTS_EXHAUSTED)),
        (400, 1, Decision(Verdict.PARK, error_class=ErrorClass.CONFIRMATION_REFUSED)),
        (422, 1, Decision(Verdict.PARK, error_class=ErrorClass.CONFIRMATION_REFUSED)),
        (301, 2, Decision(Verdict.PARK, error_class=ErrorClass.CONFIRMATION_REFUSED)),
    ],
)
def test_decide(status: int | None, attempts: int, decision: Decision) -> None:
    """A transient answer is retried until max_attempts, then parked as exhausted; any
    other 4xx is parked as refused at once; reads and not-found carry no delay."""
    assert decide(POLICY, status, attempts, 0.5) == decision


def test_a_retry_carries_the_jittered_delay() -> None:
    """decide passes its draw on to delay_s."""
    decision = decide(POLICY, 500, 2, 0.0)
    assert decision.verdict is Verdict.RETRY and decision.error_class is None
    assert decision.delay_s == pytest.approx(4.0 * 0.8)


@pytest.mark.parametrize(
    ("delay", "retry_after", "expected"),
    [
        (2.0, None, 2.0),  # no header: the schedule's delay
        (2.0, "1", 2.0),  # asked for less: the schedule's delay
        (2.0, "30", 30.0),  # asked for more: waited out
        (2.0, "86400", 300.0),  # asked for a day: up to max_delay_s
        (2.0, "Thu, 01 Jan 2100 00:00:00 GMT", 300.0),  # a date far ahead: the same
        (2.0, "Thu, 01 Jan 1970 00:00:00 GMT", 2.0),  # a date past: the schedule's
        (2.0, "soon", 2.0),  # unreadable: the schedule's
        (2.0, "-5", 2.0),  # not delta seconds: the schedule's
    ],
)
def test_a_retry_after_is_waited_out_up_to_the_longest_delay(
    delay: float, retry_after: str | None, expected: float
) -> None:
    policy = ConfirmPolicy(max_delay_s=300.0)
    assert wait_s(policy, delay, retry_after, now_s=1_765_000_000.0) == expected
