"""Deliveries given back untried are not attempts (`gateway.settlement.handed_back`)."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.settlement.handed_back import HandedBack


class Msg:
    def __init__(self, seq: int, delivered: int) -> None:
        self.stream_seq, self.num_delivered = seq, delivered


class Unreadable:
    @property
    def stream_seq(self) -> int:
        raise ValueError("reply subject unreadable")


@pytest.mark.parametrize(
    ("handed_back", "seq", "delivered", "attempt"),
    [
        ([], 1, 4, 4),  # nothing given back: every delivery counts
        ([(1, 1), (1, 2), (1, 3)], 1, 4, 1),  # three hand-backs, then this try: attempt 1
        ([(1, 1), (1, 2), (1, 3)], 1, 6, 3),  # ... and two real failures since
        ([(2, 1), (2, 2)], 1, 4, 4),  # another message's hand-backs
        ([(1, 1), (1, 1), (1, 2)], 1, 3, 1),  # one delivery given back twice counts once
        ([(1, 1), (1, 2), (1, 3)], 1, 2, 1),  # never below 1
    ],
)
def test_attempt_leaves_out_the_hand_backs(
    handed_back: list[tuple[int, int]], seq: int, delivered: int, attempt: int
) -> None:
    counts = HandedBack()
    for s, n in handed_back:
        counts.note([Msg(s, n)])  # type: ignore[list-item]
    assert counts.attempt(Msg(seq, delivered)) == attempt  # type: ignore[arg-type]


def test_the_oldest_are_forgotten_past_the_bound() -> None:
    counts = HandedBack(remembered=2)
    batch: list[Any] = [Msg(1, 1), Msg(2, 1), Msg(3, 1)]
    counts.note(batch)
    assert [counts.attempt(Msg(s, 5)) for s in (1, 2, 3)] == [5, 4, 4]  # type: ignore[arg-type]


def test_an_unreadable_message_is_skipped() -> None:
    counts = HandedBack()
    batch: list[Any] = [Unreadable(), Msg(7, 1)]
    counts.note(batch)
    assert counts.attempt(Msg(7, 2)) == 1  # type: ignore[arg-type]
