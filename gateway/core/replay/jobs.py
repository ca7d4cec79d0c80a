"""Replays as jobs: the states of a `replay_jobs` row and of its items, which operator
action moves a job from which state to which, how far a job has got, and when a runner
that stopped sending its heartbeat may be replaced.

Pure: the time is passed in; nothing here reads the clock or the database. The store
applies a transition as a compare-and-set on the state this module allowed it from, so
two operators (or an operator and a runner) racing on one job cannot both win.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from types import MappingProxyType


class JobState(enum.StrEnum):
    """A job's state (the CHECK of `replay_jobs.state`)."""

    PLANNED = "planned"  # waiting for a runner (new, resumed or retried)
    RUNNING = "running"  # a runner holds it and sends heartbeats
    PAUSED = "paused"  # stopped between two items by an operator; resume continues
    DONE = "done"  # every item ran and none failed
    FAILED = "failed"  # every item ran and some failed, or the run itself could not go on
    CANCELLED = "cancelled"  # stopped by an operator; pending items stay pending until a retry


class ItemState(enum.StrEnum):
    """One item's state (`replay_job_items.state`): the replay's own row outcomes."""

    PENDING = "pending"
    REPLAYED = "replayed"
    FAILED = "failed"
    SKIPPED = "skipped"


class JobAction(enum.StrEnum):
    """What an operator can ask of a job (also the audit actions `replay.<action>`)."""

    PAUSE = "pause"
    RESUME = "resume"
    CANCEL = "cancel"
    RETRY = "retry"  # run the failed items again


#: The states a job can be in when it no longer runs by itself.
FINISHED: frozenset[JobState] = frozenset({JobState.DONE, JobState.FAILED, JobState.CANCELLED})
#: The states a runner takes a job from (running: only once its heartbeat is stale).
RUNNABLE: frozenset[JobState] = frozenset({JobState.PLANNED, JobState.RUNNING})

#: action -> (the states it applies to, the state it leaves). A resumed job is planned
#: again rather than running: only a runner makes a job running, with its heartbeat.
TRANSITIONS: Mapping[JobAction, tuple[frozenset[JobState], JobState]] = MappingProxyType(
    {
        JobAction.PAUSE: (frozenset({JobState.PLANNED, JobState.RUNNING}), JobState.PAUSED),
        JobAction.RESUME: (frozenset({JobState.PAUSED}), JobState.PLANNED),
        JobAction.CANCEL: (
            frozenset({JobState.PLANNED, JobState.RUNNING, JobState.PAUSED}),
            JobState.CANCELLED,
        ),
        JobAction.RETRY: (FINISHED, JobState.PLANNED),
    }
)


def next_state(action: JobAction, state: JobState) -> JobState | None:
    """The state `action` leaves a job in that is `state` now; None when it does not apply
    (pausing a finished job, resuming one that is not paused)."""
    sources, target = TRANSITIONS[action]
    return target if state in sources else None


def allowed_actions(state: JobState, counts: Progress) -> list[JobAction]:
    """The actions a page offers for a job in `state` (retry only with something to run
    again: failed items, or pending ones a cancel or a stopped run left)."""
    found = []
    for action in JobAction:
        if next_state(action, state) is None:
            continue
        if action is JobAction.RETRY and not (counts.failed or counts.pending):
            continue
        found.append(action)
    return found


@dataclass(frozen=True)
class Progress:
    """How many of a job's items are in each state."""

    pending: int = 0
    replayed: int = 0
    failed: int = 0
    skipped: int = 0

    @classmethod
    def of(cls, counts: Mapping[str, int]) -> Progress:
        """From `{item state: count}` (a state with no items may be missing)."""
        return cls(**{s.value: int(counts.get(s.value, 0)) for s in ItemState})

    @property
    def total(self) -> int:
        return self.pending + self.replayed + self.failed + self.skipped

    @property
    def done(self) -> int:
        """Items that ran (or were passed over): everything but the pending ones."""
        return self.total - self.pending

    @property
    def percent(self) -> int:
        """Whole percent done, rounded down (100 only when nothing is pending)."""
        return 100 if self.total == 0 else self.done * 100 // self.total

    def to_json(self) -> dict[str, int]:
        return {s.value: getattr(self, s.value) for s in ItemState}


def finished_state(counts: Progress) -> JobState:
    """The state of a job whose runner found no pending item left: failed when any item
    failed (as `gateway dlq replay` exits 1 then), else done."""
    return JobState.FAILED if counts.failed else JobState.DONE


def item_state(outcome: str) -> ItemState:
    """A replay's row outcome (`RowOutcome` of `gateway.dlq.plan`, which both replays
    share) as the item's state; a dry run's `would_replay` is never stored."""
    try:
        state = ItemState(outcome)
    except ValueError:
        raise ValueError(f"no item state for replay outcome {outcome!r}") from None
    if state is ItemState.PENDING:
        raise ValueError("a replay outcome is never 'pending'")
    return state


#: A runner's heartbeat interval, and how long without one before another runner may take
#: its job: a few missed beats, so a slow item (a ledger retry, a paced rate) is not taken
#: for a dead runner, and a killed runner's job waits well under a minute.
HEARTBEAT_S = 5.0
STALE_AFTER_S = 30.0


def is_stale(heartbeat_at: datetime | None, now: datetime, stale_after_s: float) -> bool:
    """Whether a running job's runner is presumed gone: no heartbeat at all, or the last
    one more than `stale_after_s` before `now`."""
    if heartbeat_at is None:
        return True
    return now - heartbeat_at > timedelta(seconds=stale_after_s)


def may_take(
    state: JobState, heartbeat_at: datetime | None, now: datetime, stale_after_s: float
) -> bool:
    """Whether a runner may take this job at `now`: planned, or running under a runner
    whose heartbeat is stale (the store's claim says the same in SQL)."""
    if state is JobState.PLANNED:
        return True
    return state is JobState.RUNNING and is_stale(heartbeat_at, now, stale_after_s)


#: Above this many rows, a planner asks the operator to type the count before it starts.
CONFIRM_ABOVE_ROWS = 100


def confirmed(rows: int, typed: str | None) -> bool:
    """Whether a job of `rows` rows may start: small ones always; larger ones only when
    the operator typed the row count (spaces, commas and underscores ignored)."""
    if rows <= CONFIRM_ABOVE_ROWS:
        return True
    digits = (typed or "").strip().replace(",", "").replace("_", "").replace(" ", "")
    return digits.isascii() and digits.isdigit() and int(digits) == rows


class JobKind(enum.StrEnum):
    """What a job replays (`replay_jobs.kind`)."""

    DLQ = "dlq"  # dead letters, through `gateway dlq replay`'s code
    EVENTS = "events"  # accepted events, re-published as `gateway events replay` does


@dataclass(frozen=True)
class ReplayJob:
    """A `replay_jobs` row."""

    id: int
    kind: JobKind
    state: JobState
    created_by: str
    created_at: datetime
    idempotency_key: str | None
    request: Mapping[str, object]  # the filter or ids and the options, as asked
    rate_per_s: float | None
    max_attempts: int
    ordered: bool
    total: int
    runner: str | None
    heartbeat_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    error: str | None

    @property
    def force(self) -> bool:
        """Replay rows past `max_attempts` too (`--force`), as the request asked."""
        return bool(self.request.get("force", False))


@dataclass(frozen=True)
class JobItem:
    """A `replay_job_items` row: one dead letter or one accepted event, at its place in
    the plan's order."""

    job_id: int
    position: int
    dlq_id: int | None
    webhook_id: int | None
    state: ItemState
    error_class: str | None
    message: str | None
    done_at: datetime | None

    @property
    def row_id(self) -> int:
        """The dead letter's or the event's id, whichever the job's kind replays."""
        return self.dlq_id if self.dlq_id is not None else int(self.webhook_id or 0)


@dataclass(frozen=True)
class NewJob:
    """What a planner asks to be created: the plan's row ids in replay order."""

    kind: JobKind
    created_by: str
    request: Mapping[str, object]
    row_ids: tuple[int, ...]
    rate_per_s: float | None = None
    max_attempts: int = 5
    ordered: bool = True
    idempotency_key: str | None = None
