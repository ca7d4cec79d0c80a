"""The pure side of releasing a held key: the note, the numbers it skipped, and the line
the operator reads."""

from __future__ import annotations

import pytest

from gateway.core.ordering.admin import (
    HINT_IDS_MAX,
    Release,
    check_note,
    release_line,
    replay_hint,
)
from gateway.errors import OrderingUsageError


def test_a_note_is_required_and_stripped() -> None:
    assert check_note("  refunded by support \n") == "refunded by support"
    with pytest.raises(OrderingUsageError, match="--note must say why"):
        check_note(" \t ")


@pytest.mark.parametrize(
    ("parked", "expected"),
    [
        ((), "no rows are parked behind it"),
        ((7,), "1 blocked row stays parked: replay it with gateway dlq replay --id 7"),
        (
            (7, 9),
            "2 blocked rows stay parked: replay them with gateway dlq replay --id 7 --id 9",
        ),
        (
            tuple(range(HINT_IDS_MAX + 1)),
            f"{HINT_IDS_MAX + 1} blocked rows stay parked: replay them with gateway dlq replay"
            " --all --provider stripe --error-class BLOCKED_BY_PREDECESSOR",
        ),
    ],
)
def test_the_hint_names_the_rows_or_their_class(parked: tuple[int, ...], expected: str) -> None:
    assert replay_hint("stripe", parked) == expected


def _release(from_seq: int, to_seq: int, dlq_id: int | None) -> Release:
    return Release("paddle", "txn_9", from_seq, to_seq, "X", dlq_id, "ops", "n", (12,))


@pytest.mark.parametrize(
    ("release", "expected"),
    [
        (
            _release(2, 3, 11),
            "released paddle key txn_9 (X): dead letter 11 resolved by hand, seq 3 skipped by"
            " ops; 1 blocked row stays parked: replay it with gateway dlq replay --id 12",
        ),
        (
            _release(1, 4, None),
            "released paddle key txn_9 (X): seqs 2-4 skipped by ops; 1 blocked row stays parked:"
            " replay it with gateway dlq replay --id 12",
        ),
    ],
)
def test_the_release_line_says_what_was_done(release: Release, expected: str) -> None:
    assert release_line(release) == expected


@pytest.mark.parametrize(("from_seq", "to_seq", "skipped"), [(2, 3, 1), (1, 4, 3), (5, 5, 0)])
def test_a_release_counts_every_number_it_moved_past(
    from_seq: int, to_seq: int, skipped: int
) -> None:
    """A hold after a gap skips the missing numbers too."""
    assert _release(from_seq, to_seq, 1).skipped == skipped
