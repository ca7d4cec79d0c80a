"""The TigerBeetle ledger's `check()` over several pages of accounts, without a server.

A stand-in cluster answers `query_accounts` page by page (by creation timestamp, as
TigerBeetle does) and lets a transfer land between two pages, the way a live settlement
worker does while an operator runs `gateway ledger check`: the debit side already read,
the credit side not yet. The check must not call that an imbalance.
"""

from __future__ import annotations

from typing import Any

import pytest
import tigerbeetle as tb

from gateway.adapters.tigerbeetle import CHECK_TRIES, TigerBeetleLedger
from gateway.core.ledger.port import LedgerTotals
from gateway.errors import LedgerUnavailable


class MovingCluster:
    """Accounts 1..n; after each page it answers, `transfers_after` says whether one
    transfer of 10 lands from the first account to the last (a debit and its credit)."""

    def __init__(self, accounts: int, *, transfers_after: int, skew: int = 0) -> None:
        self.debits = dict.fromkeys(range(1, accounts + 1), 0)
        self.credits = dict.fromkeys(range(1, accounts + 1), 0)
        # A real imbalance: a debit with no credit anywhere (what the check must report).
        self.debits[1] += skew
        self.transfers_after = transfers_after
        self.requests = 0

    async def query_accounts(self, query: tb.QueryFilter) -> list[tb.Account]:
        self.requests += 1
        ids = [i for i in self.debits if i >= query.timestamp_min][: query.limit]
        page = [
            tb.Account(
                id=i,
                ledger=1,
                code=1,
                debits_posted=self.debits[i],
                credits_posted=self.credits[i],
                timestamp=i,
            )
            for i in ids
        ]
        if self.requests <= self.transfers_after:
            self.debits[1] += 10
            self.credits[max(self.debits)] += 10
        return page


def _ledger(cluster: MovingCluster, page_size: int) -> TigerBeetleLedger:
    client: Any = cluster
    return TigerBeetleLedger(client, page_size=page_size)


@pytest.mark.parametrize(
    ("accounts", "page_size", "transfers_after", "skew", "requests", "totals"),
    [
        # One page is one state of the cluster: one request, whatever lands after it.
        (5, 8, 1, 0, 1, LedgerTotals(0, 0)),
        # Three pages, quiet: two reads that agree (six requests).
        (5, 2, 0, 0, 6, LedgerTotals(0, 0)),
        # Transfers land during the first read only: it is off by two transfers' credit
        # and the second read differs from it; after a pause, a pair that agrees.
        (5, 2, 3, 0, 12, LedgerTotals(30, 30)),
        # A real imbalance stays one: two agreeing reads report it.
        (5, 2, 0, 7, 6, LedgerTotals(7, 0)),
    ],
    ids=["one-page", "quiet", "moving-then-quiet", "real-imbalance"],
)
async def test_check_sums_a_state_the_cluster_was_in(
    accounts: int,
    page_size: int,
    transfers_after: int,
    skew: int,
    requests: int,
    totals: LedgerTotals,
) -> None:
    cluster = MovingCluster(accounts, transfers_after=transfers_after, skew=skew)
    assert await _ledger(cluster, page_size).check() == totals
    assert cluster.requests == requests


async def test_check_gives_up_as_unavailable_while_transfers_keep_landing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("gateway.adapters.tigerbeetle.CHECK_PAUSE_S", 0.001)
    cluster = MovingCluster(5, transfers_after=10**9)
    with pytest.raises(LedgerUnavailable, match=f"kept changing over {CHECK_TRIES} pairs"):
        await _ledger(cluster, 2).check()
    assert cluster.requests == 2 * 3 * CHECK_TRIES


async def test_the_first_read_alone_would_have_seen_an_imbalance() -> None:
    """The stand-in is a fair test: paged once, it shows the false imbalance."""
    cluster = MovingCluster(5, transfers_after=3)
    first = await _ledger(cluster, 2).balances()
    assert sum(b.debits_posted for b in first) != sum(b.credits_posted for b in first)
