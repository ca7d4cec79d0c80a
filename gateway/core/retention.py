"""Retention's decisions: which rows are old enough to lose their payload or their key,
and what one pass reports.

Pure: `now` comes in as an argument (the database's clock, so every process agrees);
the adapter turns the cutoffs into batched statements. A row's `received_at` is the
receiving process's clock, believed up to `CLOCK_SKEW_S` ahead of the database's.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any


class Removed(enum.StrEnum):
    """What a pass takes away (the `what` label of `gateway_retention_removed_total`)."""

    PAYLOAD = "payload"  # body and headers emptied, the row and its key kept
    KEY = "key"  # the row itself deleted: its (provider, event_id) is accepted as new again


#: The tables retention works on (the `table` label).
WEBHOOKS = "processed_webhooks"
DEAD_LETTERS = "dlq_webhooks"
#: Per-key order's tables: an idle key's rows in all three go together (`Removed.KEY`),
#: and a later event of the key is numbered from 1 again.
ORDER_COUNTERS = "order_counters"
ORDER_APPLIED = "order_applied"
ORDER_LOG = "order_log"
ORDER_TABLES = (ORDER_COUNTERS, ORDER_APPLIED, ORDER_LOG)


#: How far ahead of the database's clock a row's `received_at` may be and still be
#: believed. The stamp is the receiving process's clock; NTP keeps hosts within
#: milliseconds, so a stamp minutes ahead is a host with a wrong clock. Such a row is
#: dated by the rows recorded after it instead (`plan_scan`): one row stamped a year
#: ahead used to stop the payload walk, and every later pass, on itself.
CLOCK_SKEW_S = 300.0
#: How many rows past a batch the walk looks for a believable stamp, when the batch
#: ends in rows it cannot date (a run of them from a wrong clock longer than a batch).
LOOKAHEAD_ROWS = 10_000


@dataclass(frozen=True)
class Cutoffs:
    """Rows received (dead letters: resolved) before these instants lose what is named;
    None: kept for ever. A `received_at` after `trusted_until` is not believed."""

    payloads_before: datetime | None
    keys_before: datetime | None
    trusted_until: datetime


def cutoffs(
    now: datetime, payload_max_age_s: float, key_max_age_s: float, skew_s: float = CLOCK_SKEW_S
) -> Cutoffs:
    """The cutoffs at `now`; a max age of 0 keeps that part for ever."""
    return Cutoffs(
        payloads_before=now - timedelta(seconds=payload_max_age_s) if payload_max_age_s else None,
        keys_before=now - timedelta(seconds=key_max_age_s) if key_max_age_s else None,
        trusted_until=now + timedelta(seconds=skew_s),
    )


@dataclass(frozen=True)
class ScannedRow:
    """One event row as a walk looks at it, in id order."""

    id: int
    received_at: datetime
    blocks: bool  # the walk stops here whatever the row's age (still in the outbox)
    wanted: bool  # it loses what the pass removes, once old enough


@dataclass(frozen=True)
class Scan:
    """One batch's look at the next rows by id."""

    eligible: list[int]  # rows that may lose what the pass removes
    scanned: int
    last_id: int | None  # the highest id looked at
    stop_id: int | None  # the first row too young, undatable or blocking: the pass ends there


def dated(
    rows: Sequence[ScannedRow], trusted_until: datetime, later: datetime | None = None
) -> list[datetime | None]:
    """When each row was received, as far as the walk can tell.

    A stamp up to `trusted_until` is believed. A later one (a host whose clock ran
    ahead) is not: the row is dated by the next believable stamp after it in id order,
    since ids come from one database sequence, so a row was recorded before every row
    with a higher id (give or take the moments a group commit takes). `later`: the next
    believable stamp past these rows, if known; rows with none after them are None.
    """
    found: list[datetime | None] = []
    next_stamp = later
    for row in reversed(rows):
        if row.received_at <= trusted_until:
            next_stamp = row.received_at
        found.append(next_stamp)
    found.reverse()
    return found


def plan_scan(
    rows: Sequence[ScannedRow],
    cutoff: datetime,
    trusted_until: datetime,
    later: datetime | None = None,
) -> Scan:
    """The batch's eligible rows and where the walk stops: at the first row that blocks,
    is younger than `cutoff`, or cannot be dated (see `dated`); before it, every wanted
    row is eligible."""
    stop_id = None
    eligible = []
    for row, when in zip(rows, dated(rows, trusted_until, later), strict=True):
        if row.blocks or when is None or when >= cutoff:
            stop_id = row.id
            break
        if row.wanted:
            eligible.append(row.id)
    return Scan(eligible, len(rows), rows[-1].id if rows else None, stop_id)


def needs_later_stamp(rows: Sequence[ScannedRow], trusted_until: datetime, limit: int) -> bool:
    """Whether a full batch ends in rows `dated` cannot date without looking further."""
    return len(rows) >= limit > 0 and rows[-1].received_at > trusted_until


def key_horizon_warning(key_max_age_s: float, retry_horizon_s: float) -> str | None:
    """A warning when keys are removed sooner than a provider may still retry: such a
    retry would be accepted as a new event and processed (settled) a second time."""
    if not key_max_age_s or key_max_age_s >= retry_horizon_s:
        return None
    return (
        f"retention.key_max_age_s is {key_max_age_s:g} s, shorter than providers' retry "
        f"schedules ({retry_horizon_s:.0f} s for Stripe): a retry after its key is removed "
        "is accepted as a new event and processed again"
    )


def age_s(now: datetime, then: datetime | None) -> float:
    """Seconds from `then` to `now` (0 when there is nothing, or a clock ran behind)."""
    return 0.0 if then is None else max(0.0, (now - then).total_seconds())


@dataclass
class RetentionReport:
    """What one pass did (or, with `dry_run`, would do)."""

    dry_run: bool = False
    skipped: bool = False  # another process held the retention lock
    payloads_before: datetime | None = None
    keys_before: datetime | None = None
    removed: dict[str, dict[str, int]] = field(default_factory=dict)  # table -> what -> rows
    batches: int = 0
    duration_s: float = 0.0

    def add(self, table: str, what: Removed, rows: int) -> None:
        by_what = self.removed.setdefault(table, {})
        by_what[what.value] = by_what.get(what.value, 0) + rows

    def count(self, table: str, what: Removed) -> int:
        return self.removed.get(table, {}).get(what.value, 0)

    def to_json(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "skipped": self.skipped,
            "payloads_before": self.payloads_before,
            "keys_before": self.keys_before,
            "removed": {
                table: {what.value: self.count(table, what) for what in Removed}
                for table in (WEBHOOKS, DEAD_LETTERS)
            }
            | {
                table: {Removed.KEY.value: self.count(table, Removed.KEY)} for table in ORDER_TABLES
            },
            "batches": self.batches,
            "duration_s": round(self.duration_s, 3),
        }


def next_watermark(
    last_id: int | None, stop_id: int | None, left_behind: Iterable[int]
) -> tuple[int, bool]:
    """Where the payload pass resumes after a batch, and whether this pass ends there.

    It never passes a row it left behind (held by another transaction, or newly held by
    a dead letter: the next pass looks again) nor the first row that was too young or
    still in the outbox. Otherwise it moves past the last row looked at.
    """
    blocking = [i for i in (stop_id, *left_behind) if i is not None]
    if blocking:
        return min(blocking), True
    return (0 if last_id is None else last_id + 1), False
