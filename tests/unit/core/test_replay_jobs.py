"""Replay jobs' states, actions, progress and the stale-runner rule, as tables."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from gateway.core.replay.jobs import (
    CONFIRM_ABOVE_ROWS,
    ItemState,
    JobAction,
    JobState,
    Progress,
    allowed_actions,
    confirmed,
    finished_state,
    is_stale,
    item_state,
    may_take,
    next_state,
)

P, R, U, D, F, C = (
    JobState.PLANNED,
    JobState.RUNNING,
    JobState.PAUSED,
    JobState.DONE,
    JobState.FAILED,
    JobState.CANCELLED,
)

# (action, from, to or None when refused): every pair of the table.
TRANSITIONS = [
    (JobAction.PAUSE, P, U),
    (JobAction.PAUSE, R, U),
    (JobAction.PAUSE, U, None),
    (JobAction.PAUSE, D, None),
    (JobAction.PAUSE, F, None),
    (JobAction.PAUSE, C, None),
    # A resumed job waits for a runner: only a runner makes a job running.
    (JobAction.RESUME, U, P),
    (JobAction.RESUME, P, None),
    (JobAction.RESUME, R, None),
    (JobAction.RESUME, D, None),
    (JobAction.RESUME, F, None),
    (JobAction.RESUME, C, None),
    (JobAction.CANCEL, P, C),
    (JobAction.CANCEL, R, C),
    (JobAction.CANCEL, U, C),
    (JobAction.CANCEL, D, None),
    (JobAction.CANCEL, F, None),
    (JobAction.CANCEL, C, None),
    (JobAction.RETRY, D, P),
    (JobAction.RETRY, F, P),
    (JobAction.RETRY, C, P),
    (JobAction.RETRY, P, None),
    (JobAction.RETRY, R, None),
    (JobAction.RETRY, U, None),
]


def test_the_table_covers_every_action_and_state() -> None:
    """No pair is left to chance: each action is decided for each state."""
    assert {(a, s) for a, s, _ in TRANSITIONS} == {(a, s) for a in JobAction for s in JobState}


@pytest.mark.parametrize(("action", "state", "expected"), TRANSITIONS)
def test_next_state(action: JobAction, state: JobState, expected: JobState | None) -> None:
    assert next_state(action, state) is expected


# (state, counts, actions a page offers)
OFFERED = [
    (P, Progress(pending=3), [JobAction.PAUSE, JobAction.CANCEL]),
    (R, Progress(pending=2, replayed=1), [JobAction.PAUSE, JobAction.CANCEL]),
    (U, Progress(pending=2), [JobAction.RESUME, JobAction.CANCEL]),
    # Retry is offered only when there is something to run again.
    (D, Progress(replayed=3), []),
    (F, Progress(replayed=2, failed=1), [JobAction.RETRY]),
    (C, Progress(pending=2, replayed=1), [JobAction.RETRY]),
    (C, Progress(replayed=1, skipped=1), []),
    # A run stopped by NATS going away: failed, nothing failed, the rest still pending.
    (F, Progress(pending=3, replayed=1), [JobAction.RETRY]),
]


@pytest.mark.parametrize(("state", "counts", "expected"), OFFERED)
def test_allowed_actions(state: JobState, counts: Progress, expected: list[JobAction]) -> None:
    assert allowed_actions(state, counts) == expected


# (counts, total, done, percent)
PROGRESS = [
    (Progress(), 0, 0, 100),
    (Progress(pending=4), 4, 0, 0),
    (Progress(pending=2, replayed=1, failed=1), 4, 2, 50),
    (Progress(pending=1, replayed=2), 3, 2, 66),  # rounded down: 100 only when finished
    (Progress(replayed=1, failed=1, skipped=1), 3, 3, 100),
]


@pytest.mark.parametrize(("counts", "total", "done", "percent"), PROGRESS)
def test_progress(counts: Progress, total: int, done: int, percent: int) -> None:
    assert (counts.total, counts.done, counts.percent) == (total, done, percent)


def test_progress_from_counts_per_state_fills_the_missing_ones_with_zero() -> None:
    counts = Progress.of({"replayed": 2, "failed": 1})
    assert counts == Progress(replayed=2, failed=1)
    assert counts.to_json() == {"pending": 0, "replayed": 2, "failed": 1, "skipped": 0}


@pytest.mark.parametrize(
    ("counts", "expected"),
    [
        (Progress(replayed=3), D),
        (Progress(replayed=2, skipped=1), D),
        (Progress(replayed=2, failed=1), F),  # as `gateway dlq replay` exits 1
        (Progress(), D),
    ],
)
def test_finished_state(counts: Progress, expected: JobState) -> None:
    assert finished_state(counts) is expected


@pytest.mark.parametrize(
    ("outcome", "expected"),
    [
        ("replayed", ItemState.REPLAYED),
        ("failed", ItemState.FAILED),
        ("skipped", ItemState.SKIPPED),
    ],
)
def test_a_replays_outcome_is_the_items_state(outcome: str, expected: ItemState) -> None:
    assert item_state(outcome) is expected


@pytest.mark.parametrize("outcome", ["would_replay", "pending", "lost"])
def test_outcomes_that_are_never_stored_are_refused(outcome: str) -> None:
    with pytest.raises(ValueError, match=r"outcome|pending"):
        item_state(outcome)


NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
STALE_S = 30.0

# (state, heartbeat seconds before now or None, may a runner take it)
TAKING = [
    (P, None, True),
    (P, 1.0, True),
    (R, 1.0, False),  # its runner is alive
    (R, 30.0, False),  # exactly at the limit: still alive
    (R, 30.5, True),  # gone quiet: taken again
    (R, None, True),  # running without a heartbeat: a runner died before its first beat
    (U, 100.0, False),
    (D, 100.0, False),
    (F, 100.0, False),
    (C, 100.0, False),
]


@pytest.mark.parametrize(("state", "ago_s", "expected"), TAKING)
def test_may_take(state: JobState, ago_s: float | None, expected: bool) -> None:
    beat = None if ago_s is None else NOW - timedelta(seconds=ago_s)
    assert may_take(state, beat, NOW, STALE_S) is expected


def test_a_heartbeat_from_the_future_is_not_stale() -> None:
    """Clocks of two hosts differ a little: a beat ahead of `now` is a live runner."""
    assert not is_stale(NOW + timedelta(seconds=5), NOW, STALE_S)


# (rows, typed, may start)
CONFIRM = [
    (CONFIRM_ABOVE_ROWS, None, True),
    (CONFIRM_ABOVE_ROWS + 1, None, False),
    (CONFIRM_ABOVE_ROWS + 1, "", False),
    (CONFIRM_ABOVE_ROWS + 1, "100", False),
    (CONFIRM_ABOVE_ROWS + 1, "101", True),
    (1234, " 1,234 ", True),
    (1234, "1_234", True),
    (1234, "1234.0", False),
    (1234, "\uff11\uff12\uff13\uff14", False),  # full-width digits are not what the page showed
]


@pytest.mark.parametrize(("rows", "typed", "expected"), CONFIRM)
def test_more_than_100_rows_need_the_count_typed(
    rows: int, typed: str | None, expected: bool
) -> None:
    assert confirmed(rows, typed) is expected
