"""The outbox cursor's moves, table-driven: a position passes only settled rows."""

from __future__ import annotations

import pytest

from gateway.core.relay.cursor import EMPTY_SNAPSHOT, Cursor, advance, holding_the_cursor, xip, xmax
from gateway.errors import OutboxCursorAhead

DONE = "100:105:101"
TARGET = "104:120:104,110"
WALKING = Cursor(DONE, TARGET, (0, 0))
BATCH = [(101, 7), (105, 8), (105, 9), (112, 10)]


@pytest.mark.parametrize(
    ("batch", "settled", "limit", "after", "walking", "moved", "stuck"),
    [
        # everything settled, batch shorter than the limit: the range is done
        (BATCH, {7, 8, 9, 10}, 10, (0, 0), False, 4, False),
        # a full batch settled: keep walking from its last row
        (BATCH, {7, 8, 9, 10}, 4, (112, 10), True, 4, False),
        # the first unsettled row holds the position; later acks do not move it
        (BATCH, {7, 8, 10}, 10, (105, 8), True, 2, True),
        (BATCH, {8, 9, 10}, 10, (0, 0), True, 0, True),
        (BATCH, set(), 4, (0, 0), True, 0, True),
        # an empty range is done at once
        ([], set(), 10, (0, 0), False, 0, False),
    ],
)
def test_advance(
    batch: list[tuple[int, int]],
    settled: set[int],
    limit: int,
    after: tuple[int, int],
    walking: bool,
    moved: int,
    stuck: bool,
) -> None:
    step = advance(WALKING, batch, settled, limit)
    assert step.cursor.after == after
    assert step.cursor.walking is walking
    assert step.moved == moved
    assert step.stuck is stuck
    if not walking:
        assert step.cursor.done_snapshot == TARGET


def test_a_held_position_keeps_the_target() -> None:
    step = advance(WALKING, BATCH, {7}, 10)
    assert step.cursor.target_snapshot == TARGET
    assert step.cursor.done_snapshot == DONE


def test_aiming_resets_the_position() -> None:
    cursor = Cursor(EMPTY_SNAPSHOT, EMPTY_SNAPSHOT, (0, 0))
    assert not cursor.walking
    aimed = cursor.aimed_at("200:200:")
    assert aimed.walking and aimed.after == (0, 0) and aimed.done_snapshot == EMPTY_SNAPSHOT


@pytest.mark.parametrize(("batch_len", "limit"), [(3, 2), (0, 0)])
def test_bad_limits_are_refused(batch_len: int, limit: int) -> None:
    with pytest.raises(ValueError):
        advance(WALKING, BATCH[:batch_len], set(), limit)


def test_a_snapshot_behind_the_cursor_stops_the_walk() -> None:
    """A database restored into another cluster counts transactions from lower: aiming
    there would make new rows look walked already."""
    cursor = Cursor("900:905:", "900:905:", (0, 0))
    with pytest.raises(OutboxCursorAhead):
        cursor.aimed_at("10:12:")
    assert cursor.aimed_at("905:905:").target_snapshot == "905:905:"


@pytest.mark.parametrize(("text", "expected"), [("1:1:", 1), ("100:120:101,110", 120)])
def test_xmax(text: str, expected: int) -> None:
    assert xmax(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"), [("1:1:", []), ("100:120:101", [101]), ("100:120:101,110", [101, 110])]
)
def test_xip(text: str, expected: list[int]) -> None:
    assert xip(text) == expected


@pytest.mark.parametrize("text", ["", "12", "a:b:"])
def test_xmax_of_what_is_no_snapshot_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        xmax(text)


@pytest.mark.parametrize("text", ["", "1:2", "1:2:x", "1:2:3,,4"])
def test_xip_of_what_is_no_snapshot_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        xip(text)


@pytest.mark.parametrize(
    ("after", "expected"),
    [((0, 0), (105, -1)), ((104, 9), (105, -1)), ((105, 3), (105, 3)), ((112, 10), (112, 10))],
)
def test_newer_rows_are_read_from_the_later_of_position_and_xmax(
    after: tuple[int, int], expected: tuple[int, int]
) -> None:
    assert Cursor(DONE, TARGET, after).newer_than == expected


@pytest.mark.parametrize(
    ("failed", "counted"),
    [
        (set(), []),  # nothing failed: no attempt counted
        ({9}, [9]),
        ({8, 9, 10}, [8]),  # only the first in walk order: the rest are sent again anyway
        ({10, 7}, [7]),  # walk order, not id order of the set
        ({99}, []),  # not a row of the batch
    ],
)
def test_only_the_row_holding_the_cursor_counts_an_attempt(
    failed: set[int], counted: list[int]
) -> None:
    assert holding_the_cursor(BATCH, failed) == counted
