"""Ledger requests cut to a per-request limit, answers put back in the caller's order."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from gateway.core.ledger.batches import align_found, chunk_bounds, one_per_event
from gateway.errors import LedgerRejected

L = 8189  # TigerBeetle's limit; any limit behaves alike


@pytest.mark.parametrize(
    ("count", "limit", "expected"),
    [
        (0, L, []),
        (1, L, [(0, 1)]),
        (L - 1, L, [(0, L - 1)]),
        (L, L, [(0, L)]),
        (L + 1, L, [(0, L), (L, L + 1)]),
        (2 * L - 1, L, [(0, L), (L, 2 * L - 1)]),
        (2 * L, L, [(0, L), (L, 2 * L)]),
        (2 * L + 1, L, [(0, L), (L, 2 * L), (2 * L, 2 * L + 1)]),
        (5, 1, [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5)]),
    ],
)
def test_chunks_cover_the_input_in_order_within_the_limit(
    count: int, limit: int, expected: list[tuple[int, int]]
) -> None:
    bounds = chunk_bounds(count, limit)
    assert bounds == expected
    assert all(0 < stop - start <= limit for start, stop in bounds)
    assert [i for start, stop in bounds for i in range(start, stop)] == list(range(count))


@pytest.mark.parametrize(("count", "limit"), [(1, 0), (1, -1), (-1, L)])
def test_chunks_refuse_nonsense(count: int, limit: int) -> None:
    with pytest.raises(ValueError):
        chunk_bounds(count, limit)


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
