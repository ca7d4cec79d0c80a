"""Ledger answers put back in the caller's order, or refused when they cannot be."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from gateway.core.ledger.batches import align_found, one_per_event
from gateway.errors import LedgerRejected


@pytest.mark.parametrize(
    ("sent", "results", "ok"),
    [
        (0, [], True),
        (3, ["a", "b", "c"], True),
        # The sparse answer of TigerBeetle before 0.17 (failed events only): refused.
        (3, ["b"], False),
        (3, [], False),
        (2, ["a", "b", "c"], False),
    ],
)
def test_one_result_per_event_or_refused(sent: int, results: list[str], ok: bool) -> None:
    if ok:
        assert one_per_event("create_transfers", sent, results) == results
    else:
        with pytest.raises(LedgerRejected, match=f"{len(results)} results for {sent} events"):
            one_per_event("create_transfers", sent, results)


@dataclass(frozen=True)
class Rec:
    id: int
    tag: str = ""


@pytest.mark.parametrize(
    ("ids", "found", "expected"),
    [
        ([], [], []),
        ([1, 2, 3], [Rec(1), Rec(2), Rec(3)], [Rec(1), Rec(2), Rec(3)]),
        # Answered in another order: matched by id, not by position.
        ([1, 2, 3], [Rec(3), Rec(1), Rec(2)], [Rec(1), Rec(2), Rec(3)]),
        # Only what exists comes back: the gaps are None, at their own positions.
        ([1, 2, 3], [Rec(2)], [None, Rec(2), None]),
        ([1, 2, 3], [], [None, None, None]),
        ([5, 5], [Rec(5)], [Rec(5), Rec(5)]),
    ],
)
def test_found_records_go_back_to_the_ids_asked(
    ids: list[int], found: list[Rec], expected: list[Rec | None]
) -> None:
    assert align_found("lookup", ids, found, lambda r: r.id) == expected


def test_a_record_for_an_id_not_asked_for_is_refused() -> None:
    with pytest.raises(LedgerRejected, match="1 records for ids not asked for"):
        align_found("lookup", [1, 2], [Rec(1), Rec(9)], lambda r: r.id)
