"""The TigerBeetle ledger's `check()` over several pages of accounts, without a server.

A stand-in cluster answers `query_accounts` page by page (by creation timestamp, as
TigerBeetle does) and lets a transfer land between two pages, the way a live settlement
worker does while an operator runs `gateway ledger check`: the debit side already read,
the credit side not yet. The check must not call that an imbalance.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
import tigerbeetle as tb

from gateway.adapters.tigerbeetle import CHECK_TRIES, TigerBeetleLedger
from gateway.core.ledger.port import LedgerTotals
from gateway.errors import LedgerImbalance, LedgerUnavailable


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


async def test_an_imbalance_larger_than_what_lands_is_reported_while_transfers_land(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No two reads agree, but a debit of 100 with no credit is more than the 30 that
    lands between two reads: the first pair already shows it for certain."""
    monkeypatch.setattr("gateway.adapters.tigerbeetle.CHECK_PAUSE_S", 0.001)
    cluster = MovingCluster(5, transfers_after=10**9, skew=100)
    with pytest.raises(LedgerImbalance, match="no ledger in balance reads so"):
        await _ledger(cluster, 2).check()
    assert cluster.requests == 6


async def test_an_imbalance_smaller_than_what_lands_gets_no_verdict(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A debit of 7 with no credit hides in the 10s landing between pages: no verdict,
    not a balanced one."""
    monkeypatch.setattr("gateway.adapters.tigerbeetle.CHECK_PAUSE_S", 0.001)
    cluster = MovingCluster(5, transfers_after=10**9, skew=7)
    with pytest.raises(LedgerUnavailable):
        await _ledger(cluster, 2).check()


class RandomCluster(MovingCluster):
    """After each page, zero to three transfers of random amounts between random
    accounts land, and now and then a new account opens (at zero, after every other in
    creation order, so a read under way still reaches it): a balanced ledger always,
    moving at any pace. (A pending amount posted is, for posted totals, one more
    transfer.)"""

    def __init__(self, accounts: int, rng: random.Random) -> None:
        super().__init__(accounts, transfers_after=0)
        self.rng = rng

    async def query_accounts(self, query: tb.QueryFilter) -> list[tb.Account]:
        page = await super().query_accounts(query)
        if self.rng.random() < 0.2:
            opened = max(self.debits) + 1
            self.debits[opened] = self.credits[opened] = 0
        for _ in range(self.rng.randrange(4)):
            debit, credit = self.rng.sample(sorted(self.debits), 2)
            amount = self.rng.randrange(1, 10**6)
            self.debits[debit] += amount
            self.credits[credit] += amount
        return page


async def test_a_balanced_ledger_moving_at_random_is_never_called_out_of_balance(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """300 clusters, each moving at its own pace: some checks get a verdict (balanced),
    many none while transfers keep landing, none an imbalance."""
    monkeypatch.setattr("gateway.adapters.tigerbeetle.CHECK_PAUSE_S", 0.0)
    outcomes: list[str] = []
    for seed in range(300):
        rng = random.Random(seed)
        cluster = RandomCluster(rng.randrange(3, 12), rng)
        try:
            totals = await _ledger(cluster, rng.randrange(1, 4)).check()
            outcomes.append("balanced" if totals.balanced else "imbalance")
        except LedgerUnavailable:
            outcomes.append("moving")
    assert "imbalance" not in outcomes
    assert {"balanced", "moving"} <= set(outcomes)
