"""Where the outbox cursor goes after a batch: pure decisions, no I/O.

The relay walks a range of recorded rows in `(outbox_xid, id)` order (sql/010). After
publishing a batch it may move its position past a row only when that row is settled:
acknowledged by the stream, or parked. The first unsettled row holds the position, so it
is tried again on the next sweep; the rows behind it that the stream did acknowledge are
sent again too, which JetStream's duplicate window absorbs.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace

from gateway.errors import OutboxCursorAhead

#: A row's place in the walk: (transaction id that recorded it, row id).
Position = tuple[int, int]

#: A snapshot in which no transaction is visible: where a new cursor starts.
EMPTY_SNAPSHOT = "1:1:"


@dataclass(frozen=True)
class Cursor:
    """The relay's progress (one `outbox_cursor` row); snapshots in `pg_snapshot` text."""

    done_snapshot: str
    target_snapshot: str
    after: Position

    @property
    def newer_than(self) -> Position:
        """Where the walk reads on among rows of transactions that began after
        `done_snapshot` was taken: past its position, and at or past that snapshot's
        `xmax` (row ids are positive, so `(xmax, -1)` comes before all of them)."""
        return max(self.after, (xmax(self.done_snapshot), -1))

    @property
    def walking(self) -> bool:
        """True while a range (visible in target, not in done) is still being walked."""
        return self.target_snapshot != self.done_snapshot

    def aimed_at(self, snapshot: str) -> Cursor:
        """Start walking the rows committed between `done_snapshot` and `snapshot`.

        A snapshot behind the cursor means the database now counts transactions from a
        lower number (restored into another cluster): rows recorded from here on would
        look already walked, so the walk stops with an error instead.
        """
        if xmax(snapshot) < xmax(self.done_snapshot):
            raise OutboxCursorAhead(
                f"the outbox cursor ({self.done_snapshot}) is ahead of this database's "
                f"transactions ({snapshot}); to re-base it, see docs/operations.md, "
                "'Restoring a dump into another cluster'"
            )
        return replace(self, target_snapshot=snapshot, after=(0, 0))


def xmax(snapshot: str) -> int:
    """The first transaction id a `pg_snapshot` text ('xmin:xmax:xip,...') does not see."""
    try:
        return int(snapshot.split(":")[1])
    except (IndexError, ValueError):
        raise ValueError(f"not a pg_snapshot: {snapshot!r}") from None


def xip(snapshot: str) -> list[int]:
    """The transactions a `pg_snapshot` text saw running (its third part)."""
    try:
        listed = snapshot.split(":")[2]
        return [int(x) for x in listed.split(",")] if listed else []
    except (IndexError, ValueError):
        raise ValueError(f"not a pg_snapshot: {snapshot!r}") from None


@dataclass(frozen=True)
class Step:
    """What one batch did to the walk."""

    cursor: Cursor
    moved: int  # rows the position passed
    stuck: bool  # an unsettled row held the position: no point sweeping again at once


def advance(
    cursor: Cursor, batch: Sequence[Position], settled: Collection[int], limit: int
) -> Step:
    """The cursor after publishing `batch` (the walk's next rows, in order, at most
    `limit`), of which the rows whose ids are in `settled` need no further publish.

    A batch shorter than `limit` that was settled to its end was the range's last: the
    range is done, and the next sweep aims at a new snapshot.
    """
    if limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")
    if len(batch) > limit:
        raise ValueError(f"a batch of {len(batch)} rows exceeds the limit of {limit}")
    after = cursor.after
    for moved, position in enumerate(batch):
        if position[1] not in settled:
            return Step(replace(cursor, after=after), moved, stuck=True)
        after = position
    if len(batch) < limit:
        done = cursor.target_snapshot
        return Step(Cursor(done, done, (0, 0)), len(batch), stuck=False)
    return Step(replace(cursor, after=after), len(batch), stuck=False)


def holding_the_cursor(batch: Sequence[Position], failed: Collection[int]) -> list[int]:
    """Of the rows of `batch` (in walk order) that failed, the one a publish attempt is
    counted for: the first, which holds the cursor. Empty when none failed.

    The rows after it are sent again by the next sweep whatever happened to them, so a
    failure of theirs says nothing yet: counting it too would park rows the stream had
    stored in an earlier sweep once enough of their copies' answers were lost (a commit
    reply of a whole batch, or one PubAck in twenty). The first failure is the one that
    repeats sweep after sweep when a row can never be published, and it alone is parked
    after `max_publish_attempts`.
    """
    for _, row_id in batch:
        if row_id in failed:
            return [row_id]
    return []
