"""What one fetch's answer means, and when the next try is due. Pure: the caller brings
the attempt count and the random draw.

A fetch confirms a webhook that only names an object (Mollie's classic `id=tr_…`). Its
answer is one of:
- 2xx: read (`events.confirmed_events`), then recorded;
- 404 or 410: the API knows no such object: a forged or mistyped id (an unsigned
  webhook can be sent by anyone), or an API key of another account or mode, which would
  lose every genuine payment's events if it went unseen. Parked at once
  (`CONFIRMATION_NOT_FOUND`), so a person sees it and replays it once the key is right;
- a timeout, a transport error, 429, 5xx, 401 or 403: transient (an API that is down,
  busy, or a key being rotated), tried again after a doubling delay, parked after
  `max_attempts` tries;
- any other answer (another 4xx): the API refuses this fetch for good: parked.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime

from gateway.core.forward.retry import jittered_s, retry_after_s
from gateway.errors import ErrorClass

#: Answers tried again: the API is away, busy, or refuses a key being rotated.
TRANSIENT_STATUSES = frozenset({401, 403, 408, 425, 429})
#: Answers that say no such object exists.
NOT_FOUND_STATUSES = frozenset({404, 410})


class ConfirmState(enum.StrEnum):
    """A fetch's state, as stored in `confirmations.state`."""

    PENDING = "pending"
    CONFIRMED = "confirmed"
    PARKED = "parked"


class Verdict(enum.StrEnum):
    """What an answer's status leads to."""

    READ = "read"
    NOT_FOUND = "not_found"
    RETRY = "retry"
    PARK = "park"


@dataclass(frozen=True)
class ConfirmPolicy:
    """Tries of one fetch, and the delays between them."""

    max_attempts: int = 40
    first_delay_s: float = 1.0
    max_delay_s: float = 300.0


@dataclass(frozen=True)
class Decision:
    """A verdict, with its delay (`RETRY`) or its dead letter's class (`PARK`)."""

    verdict: Verdict
    delay_s: float = 0.0
    error_class: ErrorClass | None = None


def verdict_of(status: int | None) -> Verdict:
    """The verdict of an answer's status; None: no answer (timeout, transport)."""
    if status is None or status >= 500 or status in TRANSIENT_STATUSES:
        return Verdict.RETRY
    if 200 <= status < 300:
        return Verdict.READ
    if status in NOT_FOUND_STATUSES:
        return Verdict.NOT_FOUND
    return Verdict.PARK


def delay_s(policy: ConfirmPolicy, attempts: int, draw: float) -> float:
    """The delay after `attempts` tries (1-based): `first_delay_s` doubling up to
    `max_delay_s`, with ±20 % jitter picked by `draw` (uniform in [0, 1)), as every
    delay of `gateway forward` gets (`jittered_s`)."""
    if attempts < 1:
        raise ValueError(f"attempts counts tries and starts at 1, got {attempts}")
    # The exponent is capped before it is used, so a large count cannot overflow.
    doubled = policy.first_delay_s * 2.0 ** min(attempts - 1, 64)
    return jittered_s(min(doubled, policy.max_delay_s), draw)


def decide(policy: ConfirmPolicy, status: int | None, attempts: int, draw: float) -> Decision:
    """What to do with a fetch's answer after `attempts` tries, this one included."""
    verdict = verdict_of(status)
    if verdict is Verdict.RETRY:
        if attempts >= policy.max_attempts:
            return Decision(Verdict.PARK, error_class=ErrorClass.CONFIRMATION_ATTEMPTS_EXHAUSTED)
        return Decision(Verdict.RETRY, delay_s(policy, attempts, draw))
    if verdict is Verdict.PARK:
        return Decision(Verdict.PARK, error_class=ErrorClass.CONFIRMATION_REFUSED)
    if verdict is Verdict.NOT_FOUND:
        return Decision(Verdict.PARK, error_class=ErrorClass.CONFIRMATION_NOT_FOUND)
    return Decision(verdict)


def wait_s(policy: ConfirmPolicy, delay: float, retry_after: str | None, now_s: float) -> float:
    """How long a retried fetch waits: its `delay` (`decide`'s), or longer when the API
    asked for longer with a `Retry-After` (a 429's, a 503's), up to `max_delay_s`."""
    asked_s = retry_after_s(retry_after, now_s) or 0.0
    return max(delay, min(asked_s, policy.max_delay_s))


#: The least time left before a provider's deadline worth one more try (seconds; a
#: tenth of a shorter deadline): less, and the fetch is parked rather than tried after
#: the provider has given up on it.
DEADLINE_MARGIN_S = 5.0


def within_deadline(
    deadline_s: float | None, received_at: datetime, delay_s: float, now_s: float
) -> float | None:
    """The delay of a retried fetch whose provider has a deadline (`Confirmation.
    deadline_s` from the webhook's arrival): `delay_s`, shortened so the try still comes
    `DEADLINE_MARGIN_S` before the deadline; None when there is not even that much time
    left, and the fetch is parked (the provider will have returned the money)."""
    if deadline_s is None:
        return delay_s
    margin_s = min(DEADLINE_MARGIN_S, deadline_s / 10)
    left_s = received_at.timestamp() + deadline_s - now_s - margin_s
    if left_s <= 0:
        return None
    return min(delay_s, left_s)
