"""The TigerBeetle ledger's requests, without a server: how many events go per request,
one request per chunk, and every answer back at its event's position.

Two kinds of stand-in: a recording fake of `ClientAsync` (answers computed from what it
was sent, so a result that lands at the wrong position shows), and the installed
client's own echo mode (`tb_client_init_echo`: the native client, its size checks
included, answering with the bytes sent), which pins `BATCH_MAX` to the client's limit.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from decimal import Decimal
from typing import Any, cast

import pytest
import tigerbeetle as tb
from tigerbeetle import bindings
from tigerbeetle.lib import c_uint128

from gateway.adapters.tigerbeetle import BATCH_MAX, TigerBeetleLedger, to_tb_transfer
from gateway.core.ledger.ids import settlement_ref
from gateway.core.ledger.port import (
    AccountCode,
    AccountSpec,
    Balance,
    LedgerTransfer,
    PostedTransfer,
    TransferCode,
    TransferResult,
)
from gateway.errors import LedgerIdCollision, LedgerRejected

L = BATCH_MAX
S = tb.CreateTransferStatus
R = TransferResult
_STATUS_BY_REMAINDER = {0: S.CREATED, 1: S.EXISTS, 2: S.EXCEEDS_CREDITS}
_RESULT_BY_REMAINDER = {0: R.CREATED, 1: R.EXISTS, 2: R.EXCEEDS_CREDITS}


class FakeClient:
    """Answers like TigerBeetle 0.17 (one result per event), from what it is sent."""

    def __init__(
        self, *, sparse: bool = False, stored: dict[int, Any] | None = None, limit: int = L
    ) -> None:
        self.calls: list[tuple[str, int]] = []
        self.refused: list[tuple[str, int]] = []
        self.sparse = sparse
        self.stored = stored or {}
        self.limit = limit

    async def create_transfers(self, transfers: list[tb.Transfer]) -> list[Any]:
        self._check("create_transfers", transfers)
        results = [
            tb.CreateTransferResult(timestamp=t.id, status=_STATUS_BY_REMAINDER[t.id % 3])
            for t in transfers
        ]
        return [r for r in results if r.status != S.CREATED] if self.sparse else results

    async def create_accounts(self, accounts: list[tb.Account]) -> list[Any]:
        self._check("create_accounts", accounts)
        A = tb.CreateAccountStatus
        return [
            tb.CreateAccountResult(
                timestamp=1, status=A.EXISTS_WITH_DIFFERENT_FLAGS if a.id == L + 1 else A.CREATED
            )
            for a in accounts
        ]

    async def lookup_accounts(self, ids: list[int]) -> list[Any]:
        self._check("lookup_accounts", ids)
        return [self.stored[i] for i in reversed(ids) if i in self.stored]

    async def lookup_transfers(self, ids: list[int]) -> list[Any]:
        self._check("lookup_transfers", ids)
        return [self.stored[i] for i in reversed(ids) if i in self.stored]

    def _check(self, what: str, events: list[Any]) -> None:
        if len(events) > self.limit:
            self.refused.append((what, len(events)))
            raise tb.TooMuchDataError()
        self.calls.append((what, len(events)))


def _ledger(client: FakeClient) -> TigerBeetleLedger:
    return TigerBeetleLedger(cast(tb.ClientAsync, client), timeout_s=5.0)


def _transfer(i: int) -> LedgerTransfer:
    return LedgerTransfer(
        id=i, debit_account_id=1, credit_account_id=2, amount_minor=i, ledger=15826,
        code=TransferCode.CAPTURE, settlement_id=f"pi_{i}", rate_at_payment=Decimal("1.08"),
    )  # fmt: skip


def _sizes(count: int) -> list[int]:
    return [min(L, count - start) for start in range(0, count, L)]


@pytest.mark.parametrize("count", [0, 1, L - 1, L, L + 1, 2 * L + 1])
async def test_post_sends_one_request_per_chunk_and_keeps_each_result_at_its_position(
    count: int,
) -> None:
    client = FakeClient()
    results = await _ledger(client).post([_transfer(i) for i in range(1, count + 1)])
    assert client.calls == [("create_transfers", n) for n in _sizes(count)]
    assert results == [_RESULT_BY_REMAINDER[i % 3] for i in range(1, count + 1)]


async def test_post_refuses_an_answer_without_one_result_per_event() -> None:
    """TigerBeetle before 0.17 answered for failed events only: never guessed at."""
    with pytest.raises(LedgerRejected, match="results for 10 events"):
        await _ledger(FakeClient(sparse=True)).post([_transfer(i) for i in range(1, 11)])


async def test_ensure_accounts_chunks_and_names_the_colliding_account() -> None:
    """The collision is the second chunk's first account: the error names that one."""
    client = FakeClient()
    specs = [AccountSpec(id=i, ledger=1, code=AccountCode.CLEARING) for i in range(1, L + 3)]
    with pytest.raises(LedgerIdCollision, match=f"{L + 1:#034x}"):
        await _ledger(client).ensure_accounts(specs)
    assert client.calls == [("create_accounts", L), ("create_accounts", 2)]


@pytest.mark.parametrize(
    ("flags", "accepted"),
    [
        (tb.AccountFlags.DEBITS_MUST_NOT_EXCEED_CREDITS, True),
        (tb.AccountFlags.CREDITS_MUST_NOT_EXCEED_DEBITS, False),
    ],
    ids=["the old merchant limit", "another flag"],
)
async def test_a_merchant_account_opened_with_the_old_debit_limit_is_the_same_account(
    flags: Any, accepted: bool
) -> None:
    """TigerBeetle accounts never change their flags: a merchant account opened when
    merchants had a debit limit answers `exists_with_different_flags`, and is accepted
    as the merchant's account (it keeps its limit); any other difference collides."""
    stored = {L + 1: tb.Account(id=L + 1, ledger=1, code=1, flags=flags)}
    client = FakeClient(stored=stored)
    spec = AccountSpec(id=L + 1, ledger=1, code=AccountCode.MERCHANT)
    if accepted:
        await _ledger(client).ensure_accounts([spec])
    else:
        with pytest.raises(LedgerIdCollision):
            await _ledger(client).ensure_accounts([spec])
    assert client.calls == [("create_accounts", 1), ("lookup_accounts", 1)]


async def test_lookups_chunk_and_match_what_was_found_to_the_ids() -> None:
    """Found records come back in reverse order, missing ones not at all."""
    ids = list(range(1, L + 3))
    accounts = {i: tb.Account(id=i, ledger=1, code=1, credits_posted=i) for i in ids if i % 2}
    client = FakeClient(stored=accounts)
    balances = await _ledger(client).lookup_balances(ids)
    assert client.calls == [("lookup_accounts", L), ("lookup_accounts", 2)]
    assert balances == [Balance(i, 0, i, ledger=1, code=1) if i % 2 else None for i in ids]


async def test_lookup_transfers_reads_settlement_and_rate_back() -> None:
    t = _transfer(7)
    client = FakeClient(stored={7: to_tb_transfer(t)})
    found = await _ledger(client).lookup_transfers([8, 7])
    expected = PostedTransfer(
        id=7, debit_account_id=1, credit_account_id=2, amount_minor=7, ledger=15826,
        code=int(TransferCode.CAPTURE), settlement_ref=settlement_ref("pi_7"),
        rate_at_payment=Decimal("1.08"),
    )  # fmt: skip
    assert found == [None, expected]


# --- a cluster with a smaller request limit ---------------------------------------------


async def test_a_cluster_with_a_smaller_request_limit_gets_halves_until_it_takes_them() -> None:
    """`--development` (32 KiB) takes 255 transfers a request: the ledger halves a refused
    batch (nothing of it was sent) until the cluster takes it, every result in place,
    and the next call starts at the size that was taken."""
    client = FakeClient(limit=255)
    ledger = _ledger(client)
    count = L + 1
    results = await ledger.post([_transfer(i) for i in range(1, count + 1)])
    assert results == [_RESULT_BY_REMAINDER[i % 3] for i in range(1, count + 1)]
    assert client.refused == [("create_transfers", n) for n in (L, 4094, 2047, 1023, 511)]
    assert ledger.batch_max == 255
    assert client.calls == [("create_transfers", 255)] * 32 + [("create_transfers", 30)]
    client.refused.clear()
    await ledger.lookup_balances(list(range(1, 300)))
    assert client.refused == []
    assert client.calls[-2:] == [("lookup_accounts", 255), ("lookup_accounts", 44)]


async def test_a_single_event_over_the_limit_is_refused() -> None:
    with pytest.raises(LedgerRejected, match="create_transfers: TooMuchDataError"):
        await _ledger(FakeClient(limit=0)).post([_transfer(1)])


# --- the installed client's own limit (echo mode) --------------------------------------


@pytest.fixture
def echo_client(monkeypatch: pytest.MonkeyPatch) -> Iterator[tb.ClientAsync]:
    """A `ClientAsync` whose native client echoes every request instead of connecting."""
    monkeypatch.setattr(bindings, "tb_client_init", bindings.tb_client_init_echo)
    yield tb.ClientAsync(cluster_id=0, replica_addresses="3000")


_OPERATIONS = [
    (bindings.Operation.CREATE_TRANSFERS, bindings.CTransfer,
     lambda i: tb.Transfer(id=i, debit_account_id=1, credit_account_id=2, amount=1, ledger=1,
                           code=1)),
    (bindings.Operation.CREATE_ACCOUNTS, bindings.CAccount,
     lambda i: tb.Account(id=i, ledger=1, code=1)),
    (bindings.Operation.LOOKUP_ACCOUNTS, c_uint128, lambda i: i),
    (bindings.Operation.LOOKUP_TRANSFERS, c_uint128, lambda i: i),
]  # fmt: skip


@pytest.mark.parametrize(
    ("operation", "c_type", "event"), _OPERATIONS, ids=[op[0].name.lower() for op in _OPERATIONS]
)
async def test_batch_max_is_exactly_what_the_client_takes_per_request(
    echo_client: tb.ClientAsync, operation: bindings.Operation, c_type: Any, event: Any
) -> None:
    """`BATCH_MAX` events go in one request; one more is `TooMuchDataError`. The echo is
    read back as the sent type (the public methods would decode it as results)."""

    async def submit(count: int) -> list[Any]:
        events = [event(i) for i in range(1, count + 1)]
        call = echo_client._submit(operation, events, c_type, c_type)
        return cast(list[Any], await asyncio.wait_for(call, 30))

    try:
        assert len(await submit(BATCH_MAX)) == BATCH_MAX
        with pytest.raises(tb.TooMuchDataError):
            await submit(BATCH_MAX + 1)
    finally:
        await echo_client.close()
