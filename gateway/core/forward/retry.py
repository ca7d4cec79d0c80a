"""What `gateway forward` does after each attempt: the verdict on the target's answer and
the delay before the next attempt.

Pure: the answer, the attempt number, the time and a source of randomness come in; a
`Verdict` goes out. The delay is carried out by the stream (a nak with that delay), so a
schedule survives a restart of the forwarder.

The rules, as the documentation states them:

- only a 2xx within the timeout counts as delivered; redirects are never followed, so a
  3xx is a failure like any other;
- `410 Gone` pauses the destination: nothing more is sent until an operator starts it
  again;
- `429` and `503` honour `Retry-After` (seconds or an HTTP date), capped at one hour;
- timeouts, network errors, `408`, `425` and `5xx` are transient; any other `4xx` is
  retried on the same schedule, or parked at once when the destination parks on 4xx;
- a schedule lists the delays before each retry (the first attempt is immediate); every
  delay gets ±20 % jitter, and after the last retry the event is parked.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

#: `Retry-After` is honoured up to this long; a target asking for more is asked again then.
RETRY_AFTER_CAP_S = 3600.0
#: Every scheduled delay is moved by up to this fraction either way.
JITTER = 0.20

#: Delays before each retry; the first attempt is always immediate.
NAMED_SCHEDULES: dict[str, tuple[float, ...]] = {
    # What `gateway listen` uses: a developer sees every retry within a minute.
    "dev": (1.0, 5.0, 30.0),
    # The Standard Webhooks reference schedule: ten attempts over about three days.
    "standard": (5.0, 300.0, 1800.0, 7200.0, 18000.0, 36000.0, 50400.0, 72000.0, 86400.0),
}
#: A list has at most this many retries (the stream redelivers at most `max_deliver`).
MAX_RETRIES = 50
_UNITS_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h)?$")
#: The longest single delay a list may hold: a day, as in the standard schedule.
MAX_DELAY_S = 86400.0


class Verdict(enum.StrEnum):
    """What becomes of an event after one attempt."""

    DELIVERED = "delivered"  # a 2xx: ack it
    RETRY = "retry"  # nak it with `delay_s`
    PARK = "park"  # dead-letter it (exhausted, or a 4xx on a destination that parks them)
    PAUSE = "pause"  # 410: stop the destination, leave the event for when it resumes


@dataclass(frozen=True)
class Decision:
    """A verdict, with the delay before the next attempt when it is `RETRY`."""

    verdict: Verdict
    delay_s: float = 0.0
    reason: str = ""


def parse_duration_s(text: str) -> float:
    """`250ms`, `5s`, `5m`, `2h` or a bare number of seconds; ValueError otherwise."""
    match = _DURATION.match(text.strip())
    if match is None:
        raise ValueError(f"{text!r} is not a duration such as 500ms, 5s, 5m or 2h")
    return float(match.group(1)) * _UNITS_S[match.group(2) or "s"]


def parse_schedule(text: str) -> tuple[float, ...]:
    """`dev`, `standard`, or a comma-separated list of delays before each retry
    (`1s,10s,1m`); ValueError saying what is wrong."""
    named = NAMED_SCHEDULES.get(text.strip())
    if named is not None:
        return named
    parts = [p for p in text.split(",")]
    if not text.strip() or any(not p.strip() for p in parts):
        raise ValueError(
            f"{text!r} is neither 'dev', 'standard' nor a list of delays such as 1s,10s,1m"
        )
    delays = tuple(parse_duration_s(p) for p in parts)
    if len(delays) > MAX_RETRIES:
        raise ValueError(f"at most {MAX_RETRIES} retries, got {len(delays)}")
    too_long = [d for d in delays if d > MAX_DELAY_S]
    if too_long:
        raise ValueError(f"a delay is at most 24h, got {too_long[0]:g} s")
    return delays


def jittered_s(delay_s: float, draw: float) -> float:
    """`delay_s` moved by up to ±JITTER of itself; `draw` is uniform in [0, 1)."""
    if not 0.0 <= draw < 1.0:
        raise ValueError(f"draw must be in [0, 1), got {draw}")
    return delay_s * (1.0 + JITTER * (2.0 * draw - 1.0))


def retry_after_s(value: str | None, now_s: float) -> float | None:
    """Seconds a `Retry-After` header asks for (delta seconds or an HTTP date), capped
    at `RETRY_AFTER_CAP_S`; None when absent or unreadable."""
    if value is None:
        return None
    text = value.strip()
    if text.isascii() and text.isdigit():
        return min(float(text), RETRY_AFTER_CAP_S)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # an HTTP date is GMT; a date without a zone is not one
        return None
    return min(max(when.timestamp() - now_s, 0.0), RETRY_AFTER_CAP_S)


@dataclass(frozen=True)
class Answer:
    """What one attempt came back with: a status, or None when no answer arrived
    (a timeout or a network error, named in `error`)."""

    status: int | None
    retry_after: str | None = None
    error: str = ""


def decide(
    answer: Answer,
    attempt: int,
    schedule: tuple[float, ...],
    *,
    park_on_4xx: bool,
    now_s: float,
    rand: Callable[[], float],
) -> Decision:
    """The verdict after `attempt` (1-based) came back with `answer`."""
    if attempt < 1:
        raise ValueError(f"attempts start at 1, got {attempt}")
    status = answer.status
    if status is not None and 200 <= status < 300:
        return Decision(Verdict.DELIVERED)
    if status == 410:
        return Decision(Verdict.PAUSE, reason="410 Gone: the target asked for no more deliveries")
    reason = answer.error if status is None else f"HTTP {status}"
    if status is not None and permanent_4xx(status) and park_on_4xx:
        return Decision(Verdict.PARK, reason=reason)
    if attempt > len(schedule):
        return Decision(Verdict.PARK, reason=f"{reason} after {attempt} attempts")
    asked_s = retry_after_s(answer.retry_after, now_s) if status in (429, 503) else None
    if asked_s is not None:
        return Decision(Verdict.RETRY, asked_s, reason)
    return Decision(Verdict.RETRY, jittered_s(schedule[attempt - 1], rand()), reason)


def permanent_4xx(status: int) -> bool:
    """A 4xx that says the request itself is wrong (408, 425 and 429 say: later)."""
    return 400 <= status < 500 and status not in (408, 425, 429)


def answer_message(reason: str, excerpt: bytes) -> str:
    """A failed attempt as its dead letter tells it: why, and how much answer came.

    Never the answer's text: every role reads a dead letter's message, and a target
    that echoes its request would show the event's body to roles that may not read
    payloads (the status and a length say enough to tell an empty answer from a page).
    """
    if not excerpt:
        return reason
    return f"{reason}; its answer had a body ({len(excerpt)} bytes read, not kept)"
