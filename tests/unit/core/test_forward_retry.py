"""What `gateway forward` does after an attempt: the schedules, their jitter, the verdict
on each kind of answer, and `Retry-After`, under a fixed clock and fixed draws."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from gateway.core.forward.retry import (
    JITTER,
    NAMED_SCHEDULES,
    RETRY_AFTER_CAP_S,
    Answer,
    Verdict,
    answer_message,
    decide,
    jittered_s,
    parse_duration_s,
    parse_schedule,
    retry_after_s,
)

NOW_S = 1_800_000_000.0
DEV = NAMED_SCHEDULES["dev"]


def middle() -> float:
    return 0.5  # no jitter: the scheduled delay exactly


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("dev", (1.0, 5.0, 30.0)),
        (
            "standard",
            (5.0, 300.0, 1800.0, 7200.0, 18000.0, 36000.0, 50400.0, 72000.0, 86400.0),
        ),
        ("1s,10s,1m", (1.0, 10.0, 60.0)),
        ("250ms, 2h", (0.25, 7200.0)),
        ("3", (3.0,)),
    ],
)
def test_schedules_are_named_or_listed(text: str, expected: tuple[float, ...]) -> None:
    assert parse_schedule(text) == expected


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "neither"),
        ("1s,,5s", "neither"),
        ("fast", "not a duration"),
        ("-1s", "not a duration"),
        ("25h", "at most 24h"),
        (",".join(["1s"] * 51), "at most 50 retries"),
    ],
)
def test_a_bad_schedule_says_why(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_schedule(text)


def test_durations_take_their_units() -> None:
    assert [parse_duration_s(t) for t in ("15s", "500ms", "2m", "1h", "7")] == [
        15.0,
        0.5,
        120.0,
        3600.0,
        7.0,
    ]


@pytest.mark.parametrize("draw", [0.0, 0.1, 0.25, 0.5, 0.75, 0.999999])
def test_jitter_stays_within_twenty_percent(draw: float) -> None:
    delay = jittered_s(100.0, draw)
    assert 100.0 * (1 - JITTER) <= delay <= 100.0 * (1 + JITTER)


def test_jitter_reaches_both_ends() -> None:
    assert jittered_s(100.0, 0.0) == pytest.approx(80.0)
    assert jittered_s(100.0, 0.999999) == pytest.approx(120.0, abs=1e-3)
    with pytest.raises(ValueError):
        jittered_s(100.0, 1.0)


@pytest.mark.parametrize(
    ("status", "verdict"),
    [
        (200, Verdict.DELIVERED),
        (204, Verdict.DELIVERED),
        (299, Verdict.DELIVERED),
        (302, Verdict.RETRY),  # redirects are not followed: a failure
        (301, Verdict.RETRY),
        (400, Verdict.RETRY),
        (404, Verdict.RETRY),
        (408, Verdict.RETRY),
        (410, Verdict.PAUSE),
        (425, Verdict.RETRY),
        (429, Verdict.RETRY),
        (500, Verdict.RETRY),
        (503, Verdict.RETRY),
        (None, Verdict.RETRY),  # a timeout or a network error
    ],
)
def test_the_verdict_on_each_answer(status: int | None, verdict: Verdict) -> None:
    decision = decide(
        Answer(status, error="timeout"), 1, DEV, park_on_4xx=False, now_s=NOW_S, rand=middle
    )
    assert decision.verdict is verdict


@pytest.mark.parametrize(
    ("status", "verdict"),
    [
        (400, Verdict.PARK),
        (404, Verdict.PARK),
        (422, Verdict.PARK),
        (408, Verdict.RETRY),
        (425, Verdict.RETRY),
        (429, Verdict.RETRY),
        (500, Verdict.RETRY),
        (410, Verdict.PAUSE),
    ],
)
def test_park_on_4xx_parks_only_the_4xx_that_say_the_request_is_wrong(
    status: int, verdict: Verdict
) -> None:
    decision = decide(Answer(status), 1, DEV, park_on_4xx=True, now_s=NOW_S, rand=middle)
    assert decision.verdict is verdict


def test_the_schedule_is_followed_exactly_then_the_event_is_parked() -> None:
    delays = []
    for attempt in range(1, len(DEV) + 2):
        decision = decide(Answer(503), attempt, DEV, park_on_4xx=False, now_s=NOW_S, rand=middle)
        delays.append((decision.verdict, decision.delay_s))
    assert delays == [
        (Verdict.RETRY, 1.0),
        (Verdict.RETRY, 5.0),
        (Verdict.RETRY, 30.0),
        (Verdict.PARK, 0.0),
    ]


def test_each_delay_is_jittered_by_the_draw() -> None:
    low = decide(Answer(500), 3, DEV, park_on_4xx=False, now_s=NOW_S, rand=lambda: 0.0)
    high = decide(Answer(500), 3, DEV, park_on_4xx=False, now_s=NOW_S, rand=lambda: 0.9999)
    assert low.delay_s == pytest.approx(24.0)
    assert high.delay_s == pytest.approx(36.0, abs=0.01)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("7", 7.0),
        ("0", 0.0),
        ("86400", RETRY_AFTER_CAP_S),  # capped at an hour
        (
            format_datetime(
                datetime.fromtimestamp(NOW_S, UTC) + timedelta(seconds=90), usegmt=True
            ),
            90.0,
        ),
        (
            format_datetime(
                datetime.fromtimestamp(NOW_S, UTC) - timedelta(seconds=90), usegmt=True
            ),
            0.0,
        ),
        ("soon", None),
        ("-5", None),
        (None, None),
    ],
)
def test_retry_after_is_seconds_or_a_date_capped_at_an_hour(
    value: str | None, expected: float | None
) -> None:
    assert retry_after_s(value, NOW_S) == expected


@pytest.mark.parametrize("status", [429, 503])
def test_429_and_503_wait_as_retry_after_asks(status: int) -> None:
    decision = decide(
        Answer(status, retry_after="120"), 1, DEV, park_on_4xx=False, now_s=NOW_S, rand=middle
    )
    assert (decision.verdict, decision.delay_s) == (Verdict.RETRY, 120.0)


def test_retry_after_on_other_answers_is_not_honoured() -> None:
    decision = decide(
        Answer(500, retry_after="120"), 1, DEV, park_on_4xx=False, now_s=NOW_S, rand=middle
    )
    assert decision.delay_s == 1.0


def test_retry_after_does_not_extend_the_schedule() -> None:
    decision = decide(
        Answer(429, retry_after="5"), len(DEV) + 1, DEV, park_on_4xx=False, now_s=NOW_S, rand=middle
    )
    assert decision.verdict is Verdict.PARK


@pytest.mark.parametrize(
    "answer",
    [b'{"card": "4242424242424242", "amount": 1000}', "caf\u00e9 \u20ac".encode(), b"<html>"],
)
def test_a_dead_letter_message_never_holds_the_targets_answer(answer: bytes) -> None:
    """Every role reads a dead letter's message; a target that echoes its request would
    otherwise show the event's body to viewers."""
    message = answer_message("HTTP 500 after 4 attempts", answer)
    assert answer.decode("utf-8", "replace") not in message
    assert (
        message
        == f"HTTP 500 after 4 attempts; its answer had a body ({len(answer)} bytes read, not kept)"
    )
    assert answer_message("HTTP 502", b"") == "HTTP 502"
