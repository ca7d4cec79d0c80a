"""Settlement's gate for ordered events: what to do with each keyed message of a fetched
batch, and what the outcome of a key's turn does to the key. Pure: the keys' positions,
the clock and randomness come in.

A key's events are applied in the order ingest numbered them: number n once n - 1 is
applied. A batch is planned per key, its messages sorted by number: the run that
continues the key's position is settled in rounds (round r holds the r-th of each key's
run, so a batch stays a batch), what is at or below the position is a duplicate (or a
deferral settling on its own retries), and what lies after a gap waits for the missing
one, until `gap_timeout_s` parks it and holds the key.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

__all__ = [
    "Decision",
    "Keyed",
    "Plan",
    "Position",
    "Step",
    "TurnResult",
    "after_turn",
    "outage_delay_s",
    "plan",
    "wait_delay_s",
]

#: (provider, order_key)
Key = tuple[str, str]

#: Waiting for a predecessor: the first nak's delay, the cap, and the jitter band. A
#: missing event is usually only a few hundred milliseconds behind (a republished row);
#: doubling finds it quickly and the cap keeps a long gap from costing many deliveries.
WAIT_FIRST_S = 0.25
WAIT_MAX_S = 15.0
WAIT_JITTER = 0.20
#: A waiting message delivered this often is parked even before `gap_timeout_s`: the
#: consumer stops delivering a message at its `max_deliver` (100), and an event must be
#: parked (and hold its key) before that, never left undelivered.
GAP_MAX_DELIVERIES = 50
#: The database could not be read: the batch goes back to the stream after 1 s, 2 s,
#: 4 s, ... at most a minute, so an outage spends a message's deliveries slowly (100
#: deliveries last about an hour and a half).
OUTAGE_FIRST_S = 1.0
OUTAGE_MAX_S = 60.0


class Step(enum.StrEnum):
    """What the gate does with one keyed message."""

    TURN = "turn"  # its key's next: settle it in its round, then move the key
    DUPLICATE = "duplicate"  # at or below the key's position: ack, change nothing
    # at or below the position, but moved past unsettled (deferred, skipped): settle it
    DEFERRED_RETRY = "deferred_retry"
    WAIT = "wait"  # after a gap (or behind a turn that failed): nak with a delay
    PARK_GAP = "park_gap"  # waited past gap_timeout_s: park, hold the key
    PARK_BLOCKED = "park_blocked"  # its key is held by an earlier event: park behind it


class TurnResult(enum.StrEnum):
    """What a turn's settlement came to, as the gate sees it."""

    SUCCESS = "success"  # settled, duplicate or ignored
    DEPENDENCY = "dependency"  # PaymentNotSettled, to be retried: the event is deferred
    RETRY = "retry"  # any other failure to be retried
    DEAD_LETTER = "dead_letter"  # parked for good


class KeyEffect(enum.StrEnum):
    """What a turn's result does to its key."""

    APPLIED = "applied"  # move the key, log 'applied'; its next turn follows
    DEFERRED = "deferred"  # move the key, log 'deferred'; the event retries on its own
    SKIPPED = "skipped"  # park the event, move the key, log 'skipped'
    STOP = "stop"  # the key stays; its later messages wait
    HOLD = "hold"  # park the event and hold the key; its later messages park behind


class Position(Protocol):
    """A key's position as settlement stored it
    (`adapters.postgres.ordering.applied.KeyPosition`)."""

    @property
    def applied_seq(self) -> int: ...

    @property
    def progressed_s(self) -> float | None:
        """When `applied_seq` last moved, in seconds since the epoch."""

    @property
    def held_seq(self) -> int | None: ...


@dataclass(slots=True)
class Keyed:
    """One keyed message: its place in the batch, key, number, delivery count, and since
    when it waits (the time the gate first saw it wait; now for one not seen waiting).
    Not frozen: one is made per message on the settlement path, and a frozen one's
    field-by-field set-up costs about half a microsecond more."""

    index: int
    provider: str
    order_key: str
    key_seq: int
    deliveries: int
    waiting_since_s: float

    @property
    def key(self) -> Key:
        return (self.provider, self.order_key)


class Decision(NamedTuple):
    """The gate's step for one message; `round` for a turn, `delay_s` for a wait. (A
    named tuple: one per message on the settlement path, where a frozen dataclass's
    field-by-field set-up costs about a microsecond more.)"""

    step: Step
    round: int = 0
    delay_s: float | None = None


#: The decisions without a delay, made once: most messages of a batch take one of these.
_DUPLICATE = Decision(Step.DUPLICATE)
_DEFERRED_RETRY = Decision(Step.DEFERRED_RETRY)
_PARK_BLOCKED = Decision(Step.PARK_BLOCKED)
_PARK_GAP = Decision(Step.PARK_GAP)
_TURNS = tuple(Decision(Step.TURN, round=r) for r in range(64))


def _turn(round_: int) -> Decision:
    return _TURNS[round_] if round_ < len(_TURNS) else Decision(Step.TURN, round=round_)


@dataclass(frozen=True)
class Plan:
    """A decision for each keyed message, by its index; `rounds`: how many turn rounds."""

    decisions: Mapping[int, Decision]
    rounds: int


def wait_delay_s(
    deliveries: int, rand: Callable[[], float], stalled_s: float | None = None
) -> float:
    """The nak delay of a message waiting for its predecessor after `deliveries`
    deliveries: 0.25 s doubling per delivery up to 15 s, +-20 % jitter.

    `stalled_s`: how long its key has not moved. A key that moved a moment ago has its
    predecessor in flight (in another batch, or on another worker): the delay is then
    at most half of that time (at least 0.25 s), so a busy key is not slowed down by
    the doubling its messages' earlier waits built up; a key stalled for long waits by
    the doubling alone.
    """
    base_s = min(WAIT_MAX_S, WAIT_FIRST_S * 2.0 ** max(0, deliveries - 1))
    if stalled_s is not None:
        base_s = min(base_s, max(WAIT_FIRST_S, stalled_s / 2.0))
    return base_s * (1.0 + WAIT_JITTER * (2.0 * rand() - 1.0))


def outage_delay_s(deliveries: int) -> float:
    """How long a message waits after delivery number `deliveries` found the keys'
    positions unreadable: doubling from `OUTAGE_FIRST_S` to `OUTAGE_MAX_S`."""
    return min(OUTAGE_MAX_S, OUTAGE_FIRST_S * 2.0 ** min(max(0, deliveries - 1), 16))


def plan(
    messages: Sequence[Keyed],
    positions: Mapping[Key, Position],
    still_owed: Collection[tuple[str, str, int]],
    *,
    now_s: float,
    gap_timeout_s: float,
    rand: Callable[[], float],
) -> Plan:
    """Decide for each keyed message (see the module's docstring). A second copy of a
    number in the batch is a duplicate of the first; a key without a position is at 0."""
    by_key: dict[Key, list[Keyed]] = {}
    for m in messages:
        key = (m.provider, m.order_key)
        group = by_key.get(key)
        if group is None:
            by_key[key] = [m]
        else:
            group.append(m)
    decisions: dict[int, Decision] = {}
    rounds = 0
    for key, group in by_key.items():
        position = positions.get(key)
        applied = position.applied_seq if position is not None else 0
        held = position.held_seq if position is not None else None
        if len(group) == 1 and held is None:  # most keys have one message in a batch
            m = group[0]
            if m.key_seq == applied + 1:
                decisions[m.index] = _TURNS[0]
                rounds = rounds or 1
                continue
        expected = applied + 1
        turn = 0
        seen: set[int] = set()
        if len(group) > 1:
            group.sort(key=_by_number)
        for m in group:
            if m.key_seq in seen:  # a second copy: the first one stands for both
                decisions[m.index] = _DUPLICATE
                continue
            seen.add(m.key_seq)
            if held is not None and m.key_seq > held:
                decisions[m.index] = _PARK_BLOCKED
            elif m.key_seq <= applied:
                owed = (m.provider, m.order_key, m.key_seq) in still_owed
                decisions[m.index] = _DEFERRED_RETRY if owed else _DUPLICATE
            elif m.key_seq == expected:
                decisions[m.index] = _turn(turn)
                turn += 1
                expected += 1
            else:
                # Since the later of the key's last move and the gate's first sight of
                # this wait: not since the stream stored it, or a backlog older than
                # the timeout would park every event whose predecessor is in flight.
                progressed_s = position.progressed_s if position is not None else None
                since_s = max(m.waiting_since_s, progressed_s or m.waiting_since_s)
                stalled_s = now_s - since_s
                if stalled_s > gap_timeout_s or m.deliveries >= GAP_MAX_DELIVERIES:
                    decisions[m.index] = _PARK_GAP
                    held = m.key_seq  # its successors in this batch park behind it
                else:
                    delay_s = wait_delay_s(m.deliveries, rand, stalled_s)
                    decisions[m.index] = Decision(Step.WAIT, delay_s=delay_s)
        rounds = max(rounds, turn)
    return Plan(decisions, rounds)


def _by_number(m: Keyed) -> tuple[int, int]:
    return (m.key_seq, m.index)


def after_turn(result: TurnResult, on_poison: str) -> KeyEffect:
    """What a turn's result does to its key; `on_poison` is the provider's ('hold' or
    'skip'). A dependency (a refund before its payment) defers, with retries left or
    not: its payment may be the key's next number, which a hold would park behind it."""
    if result is TurnResult.SUCCESS:
        return KeyEffect.APPLIED
    if result is TurnResult.DEPENDENCY:
        return KeyEffect.DEFERRED
    if result is TurnResult.RETRY:
        return KeyEffect.STOP
    return KeyEffect.SKIPPED if on_poison == "skip" else KeyEffect.HOLD
