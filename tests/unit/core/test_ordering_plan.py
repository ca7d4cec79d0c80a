"""The ordering gate's plan for a fetched batch, and what a turn's result does to its key."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from gateway.core.ordering.gate import (
    GAP_MAX_DELIVERIES,
    Decision,
    Keyed,
    KeyEffect,
    Step,
    TurnResult,
    after_turn,
    outage_delay_s,
    plan,
    wait_delay_s,
)

NOW_S = 1_000_000.0
GAP_S = 300.0


@dataclass(frozen=True)
class At:
    applied_seq: int = 0
    progressed_s: float | None = None
    held_seq: int | None = None


def msgs(
    *seqs: int, key: str = "k", waiting_since_s: float = NOW_S, deliveries: int = 1
) -> list[Keyed]:
    return [Keyed(i, "stripe", key, s, deliveries, waiting_since_s) for i, s in enumerate(seqs)]


def steps(decided: dict[int, Decision]) -> list[tuple[Step, int]]:
    return [(d.step, d.round) for _, d in sorted(decided.items())]


T, DUP, DR, W, GAP, BLK = (
    Step.TURN, Step.DUPLICATE, Step.DEFERRED_RETRY, Step.WAIT, Step.PARK_GAP, Step.PARK_BLOCKED
)  # fmt: skip

CASES = [
    # (intent, seqs in batch order, position, open deferrals, expected (step, round) each)
    ("a new key's run from 1 is settled in rounds, whatever order it came in",
     (3, 1, 2), None, set(), [(T, 2), (T, 0), (T, 1)]),
    ("a run continues the stored position",
     (5, 6), At(4), set(), [(T, 0), (T, 1)]),
    ("at or below the position is a duplicate",
     (3, 4, 5), At(4), set(), [(DUP, 0), (DUP, 0), (T, 0)]),
    ("a second copy of a number in the batch is a duplicate of the first",
     (5, 5), At(4), set(), [(T, 0), (DUP, 0)]),
    ("an open deferral at or below the position settles on its own retries",
     (3, 5), At(4), {("stripe", "k", 3)}, [(DR, 0), (T, 0)]),
    ("after a gap, messages wait",
     (5, 7, 8), At(4), set(), [(T, 0), (W, 0), (W, 0)]),
    ("a held key parks what comes after the hold and still takes its turn below it",
     (5, 6, 7), At(4, held_seq=5), set(), [(T, 0), (BLK, 0), (BLK, 0)]),
]  # fmt: skip


@pytest.mark.parametrize(("intent", "seqs", "position", "deferrals", "expected"), CASES)
def test_plan(
    intent: str,
    seqs: tuple[int, ...],
    position: At | None,
    deferrals: set[tuple[str, str, int]],
    expected: list[tuple[Step, int]],
) -> None:
    positions = {} if position is None else {("stripe", "k"): position}
    result = plan(msgs(*seqs), positions, deferrals, now_s=NOW_S, gap_timeout_s=GAP_S,
                  rand=lambda: 0.5)  # fmt: skip
    assert steps(dict(result.decisions)) == expected, intent
    assert result.rounds == max((r + 1 for s, r in expected if s is T), default=0)


GAP_CASES = [
    # (intent, first seen waiting at, key progressed at, expected)
    ("a message seen waiting for less than the timeout waits", NOW_S - 10, None, W),
    ("a message seen waiting for the first time waits, however old", NOW_S, None, W),
    ("one waiting past the timeout, with a key that never moved since, parks", NOW_S - 301,
     None, GAP),
    ("the clock starts at the key's last progress when that is later", NOW_S - 400,
     NOW_S - 100, W),
    ("and parks when both are past the timeout", NOW_S - 400, NOW_S - 301, GAP),
]  # fmt: skip


@pytest.mark.parametrize(("intent", "waiting_since_s", "progressed", "expected"), GAP_CASES)
def test_gap_clock(
    intent: str, waiting_since_s: float, progressed: float | None, expected: Step
) -> None:
    positions = {("stripe", "k"): At(1, progressed)}
    result = plan(msgs(3, waiting_since_s=waiting_since_s), positions, set(), now_s=NOW_S,
                  gap_timeout_s=GAP_S, rand=lambda: 0.5)  # fmt: skip
    assert result.decisions[0].step is expected, intent


def test_a_gap_park_holds_the_key_for_the_rest_of_the_batch() -> None:
    """2 is missing: 3 parks after the gap and holds the key, 4 and 5 park behind it."""
    result = plan(msgs(4, 5, 3, waiting_since_s=NOW_S - 1000), {("stripe", "k"): At(1)}, set(),
                  now_s=NOW_S, gap_timeout_s=GAP_S, rand=lambda: 0.5)  # fmt: skip
    assert steps(dict(result.decisions)) == [(BLK, 0), (BLK, 0), (GAP, 0)]


def test_keys_are_planned_apart() -> None:
    """A gap in one key does not hold up another's run."""
    batch = [*msgs(2, key="a"), Keyed(5, "stripe", "b", 1, 1, NOW_S)]
    result = plan(batch, {}, set(), now_s=NOW_S, gap_timeout_s=GAP_S, rand=lambda: 0.5)
    assert result.decisions[0].step is W
    assert result.decisions[5] == Decision(T, 0)
    assert result.rounds == 1


@pytest.mark.parametrize(
    ("deliveries", "draw", "expected_s"),
    [
        (1, 0.5, 0.25),  # no jitter at the middle draw
        (2, 0.5, 0.5),
        (4, 0.5, 2.0),
        (7, 0.5, 15.0),  # capped
        (50, 0.5, 15.0),
        (1, 0.0, 0.2),  # -20 %
        (3, 0.999999, 1.2),  # +20 %
    ],
)
def test_wait_delay_grows_and_is_capped(deliveries: int, draw: float, expected_s: float) -> None:
    assert wait_delay_s(deliveries, lambda: draw) == pytest.approx(expected_s, rel=1e-5)


@pytest.mark.parametrize(
    ("deliveries", "stalled_s", "expected_s"),
    [
        (7, 0.1, 0.25),  # the key moved a moment ago: its predecessor is in flight
        (7, 4.0, 2.0),  # half the time the key has stood still
        (7, 100.0, 15.0),  # stalled for long: the doubling, capped
        (2, 100.0, 0.5),  # and never more than the doubling
    ],
)
def test_a_moving_key_waits_briefly(deliveries: int, stalled_s: float, expected_s: float) -> None:
    assert wait_delay_s(deliveries, lambda: 0.5, stalled_s) == pytest.approx(expected_s)


def test_the_plan_waits_by_how_long_the_key_stood_still() -> None:
    """Seventh delivery of seq 3, key moved to 1 two seconds ago: a 1 s wait, not 15 s."""
    waiting = [Keyed(0, "stripe", "k", 3, 7, NOW_S - 60)]
    result = plan(waiting, {("stripe", "k"): At(1, NOW_S - 2)}, set(), now_s=NOW_S,
                  gap_timeout_s=GAP_S, rand=lambda: 0.5)  # fmt: skip
    decision = result.decisions[0]
    assert decision.step is W
    assert decision.delay_s == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("result", "on_poison", "effect"),
    [
        (TurnResult.SUCCESS, "hold", KeyEffect.APPLIED),
        (TurnResult.DEPENDENCY, "hold", KeyEffect.DEFERRED),  # a refund before its capture
        (TurnResult.RETRY, "hold", KeyEffect.STOP),  # later events of the key wait
        (TurnResult.DEAD_LETTER, "hold", KeyEffect.HOLD),
        (TurnResult.DEAD_LETTER, "skip", KeyEffect.SKIPPED),
        (TurnResult.RETRY, "skip", KeyEffect.STOP),  # skip is for poison, not for retries
    ],
)
def test_after_turn(result: TurnResult, on_poison: str, effect: KeyEffect) -> None:
    assert after_turn(result, on_poison) is effect


def test_a_wait_delivered_too_often_parks_before_the_timeout() -> None:
    """Near the consumer's max_deliver a waiting event is parked (holding its key), so it
    is never left undelivered for good."""
    positions = {("stripe", "k"): At(1)}
    for deliveries, expected in ((GAP_MAX_DELIVERIES - 1, W), (GAP_MAX_DELIVERIES, GAP)):
        result = plan(msgs(3, deliveries=deliveries), positions, set(), now_s=NOW_S,
                      gap_timeout_s=GAP_S, rand=lambda: 0.5)  # fmt: skip
        assert result.decisions[0].step is expected, deliveries


@pytest.mark.parametrize(
    ("deliveries", "delay_s"), [(1, 1.0), (2, 2.0), (3, 4.0), (7, 60.0), (100, 60.0)]
)
def test_an_outage_puts_a_batch_back_backing_off(deliveries: int, delay_s: float) -> None:
    assert outage_delay_s(deliveries) == delay_s
