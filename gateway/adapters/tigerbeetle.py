"""The production ledger: TigerBeetle through its official client (`ClientAsync`).

The client retries for ever while the cluster is unreachable, so every call here has a
deadline; a call that misses it is `LedgerUnavailable` with an unknown outcome, and the
caller retries with the same ids (TigerBeetle answers `exists` for what did land).

Requests: TigerBeetle takes at most `BATCH_MAX` events per request (one 1 MiB message),
and the client refuses more (`TooMuchDataError`). A cluster started with a smaller
request limit (`--limit-request`, or `--development`: 32 KiB, 255 events) takes fewer,
and the client refuses a larger batch before sending anything: the ledger then halves
its batch until the cluster takes it and keeps that size. Every call here sends up to
that many per request, one request after the other for more (`core.ledger.batches`);
since 0.17 `create_*` answers with one result per event, in order, and `lookup_*` with
the records found, matched back to the ids asked for.

User data on each transfer:
- `user_data_128`: `core.ledger.ids.settlement_ref(settlement_id)`, a 128-bit hash;
- `user_data_64`: `rate_at_payment` * 10**9 (`RATE_SCALE`), exact because the rate is
  kept to 9 decimal places; rates up to about 1.8e10 fit in the u64.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from decimal import Decimal
from typing import Any, TypeVar

import tigerbeetle as tb
from tigerbeetle.client import InitError

from gateway.core.ledger.batches import align_found, one_per_event
from gateway.core.ledger.ids import settlement_ref
from gateway.core.ledger.port import (
    RATE_DECIMALS,
    AccountCode,
    AccountSpec,
    Balance,
    LedgerTotals,
    LedgerTransfer,
    PostedTransfer,
    TransferPhase,
    TransferResult,
)
from gateway.errors import (
    ConfigError,
    LedgerIdCollision,
    LedgerImbalance,
    LedgerRejected,
    LedgerUnavailable,
)

log = logging.getLogger(__name__)

RATE_SCALE = 10**RATE_DECIMALS
_U64_MAX = 2**64 - 1
#: Events per request: 8189 for every operation used here (accounts and transfers are
#: 128 bytes, and a lookup's reply holds as many). The Python package has no constant
#: for it, the native client enforces it; `tests/unit/adapters/test_tigerbeetle_batches`
#: pins it with the client's echo mode: 8189 go, 8190 are `TooMuchDataError`.
BATCH_MAX = 8189
#: Accounts per `query_accounts` page; under `BATCH_MAX`, as the contract suite ran it.
_QUERY_LIMIT = 8000
#: Pairs of whole reads `check()` makes at most while transfers keep landing between
#: its pages, with a pause between pairs (doubling from `CHECK_PAUSE_S`, at most 1 s):
#: a settlement worker posts in batches, and a pair fits between two of them.
CHECK_TRIES = 6
CHECK_PAUSE_S = 0.05
T = TypeVar("T")
E = TypeVar("E")

_S = tb.CreateTransferStatus
_DIFFERENT_PENDING = TransferResult.PENDING_TRANSFER_HAS_DIFFERENT_FIELDS
#: TigerBeetle's transfer results onto the port's; anything not listed is REJECTED.
TRANSFER_RESULTS: dict[tb.CreateTransferStatus, TransferResult] = {
    _S.CREATED: TransferResult.CREATED,
    _S.EXISTS: TransferResult.EXISTS,
    _S.EXISTS_WITH_DIFFERENT_FLAGS: TransferResult.EXISTS_WITH_DIFFERENT_FIELDS,
    _S.EXISTS_WITH_DIFFERENT_PENDING_ID: TransferResult.EXISTS_WITH_DIFFERENT_FIELDS,
    _S.EXISTS_WITH_DIFFERENT_TIMEOUT: TransferResult.EXISTS_WITH_DIFFERENT_FIELDS,
    _S.EXISTS_WITH_DIFFERENT_DEBIT_ACCOUNT_ID: TransferResult.EXISTS_WITH_DIFFERENT_FIELDS,
    _S.EXISTS_WITH_DIFFERENT_CREDIT_ACCOUNT_ID: TransferResult.EXISTS_WITH_DIFFERENT_FIELDS,
    _S.EXISTS_WITH_DIFFERENT_AMOUNT: TransferResult.EXISTS_WITH_DIFFERENT_FIELDS,
    _S.EXISTS_WITH_DIFFERENT_USER_DATA_128: TransferResult.EXISTS_WITH_DIFFERENT_FIELDS,
    _S.EXISTS_WITH_DIFFERENT_USER_DATA_64: TransferResult.EXISTS_WITH_DIFFERENT_FIELDS,
    _S.EXISTS_WITH_DIFFERENT_USER_DATA_32: TransferResult.EXISTS_WITH_DIFFERENT_FIELDS,
    _S.EXISTS_WITH_DIFFERENT_LEDGER: TransferResult.EXISTS_WITH_DIFFERENT_FIELDS,
    _S.EXISTS_WITH_DIFFERENT_CODE: TransferResult.EXISTS_WITH_DIFFERENT_FIELDS,
    _S.ID_ALREADY_FAILED: TransferResult.ID_ALREADY_FAILED,
    _S.DEBIT_ACCOUNT_NOT_FOUND: TransferResult.DEBIT_ACCOUNT_NOT_FOUND,
    _S.CREDIT_ACCOUNT_NOT_FOUND: TransferResult.CREDIT_ACCOUNT_NOT_FOUND,
    _S.ACCOUNTS_MUST_BE_DIFFERENT: TransferResult.ACCOUNTS_MUST_BE_DIFFERENT,
    _S.ACCOUNTS_MUST_HAVE_THE_SAME_LEDGER: TransferResult.LEDGER_MISMATCH,
    _S.TRANSFER_MUST_HAVE_THE_SAME_LEDGER_AS_ACCOUNTS: TransferResult.LEDGER_MISMATCH,
    _S.EXCEEDS_CREDITS: TransferResult.EXCEEDS_CREDITS,
    _S.EXCEEDS_DEBITS: TransferResult.EXCEEDS_DEBITS,
    _S.PENDING_TRANSFER_NOT_FOUND: TransferResult.PENDING_TRANSFER_NOT_FOUND,
    _S.PENDING_TRANSFER_NOT_PENDING: TransferResult.PENDING_TRANSFER_NOT_PENDING,
    _S.PENDING_TRANSFER_HAS_DIFFERENT_DEBIT_ACCOUNT_ID: _DIFFERENT_PENDING,
    _S.PENDING_TRANSFER_HAS_DIFFERENT_CREDIT_ACCOUNT_ID: _DIFFERENT_PENDING,
    _S.PENDING_TRANSFER_HAS_DIFFERENT_LEDGER: _DIFFERENT_PENDING,
    _S.PENDING_TRANSFER_HAS_DIFFERENT_CODE: _DIFFERENT_PENDING,
    _S.EXCEEDS_PENDING_TRANSFER_AMOUNT: TransferResult.EXCEEDS_PENDING_TRANSFER_AMOUNT,
    _S.PENDING_TRANSFER_HAS_DIFFERENT_AMOUNT: TransferResult.PENDING_TRANSFER_HAS_DIFFERENT_AMOUNT,
    _S.PENDING_TRANSFER_ALREADY_POSTED: TransferResult.PENDING_TRANSFER_ALREADY_POSTED,
    _S.PENDING_TRANSFER_ALREADY_VOIDED: TransferResult.PENDING_TRANSFER_ALREADY_VOIDED,
}
_F = tb.TransferFlags
#: The port's phases as TigerBeetle's transfer flags, and back.
PHASE_FLAGS: dict[TransferPhase, tb.TransferFlags] = {
    TransferPhase.SINGLE: _F.NONE,
    TransferPhase.PENDING: _F.PENDING,
    TransferPhase.POST: _F.POST_PENDING_TRANSFER,
    TransferPhase.VOID: _F.VOID_PENDING_TRANSFER,
}
_A = tb.CreateAccountStatus
_ACCOUNT_OK = frozenset({_A.CREATED, _A.EXISTS})
_ACCOUNT_COLLISIONS = frozenset(
    {
        _A.EXISTS_WITH_DIFFERENT_FLAGS,
        _A.EXISTS_WITH_DIFFERENT_USER_DATA_128,
        _A.EXISTS_WITH_DIFFERENT_USER_DATA_64,
        _A.EXISTS_WITH_DIFFERENT_USER_DATA_32,
        _A.EXISTS_WITH_DIFFERENT_LEDGER,
        _A.EXISTS_WITH_DIFFERENT_CODE,
    }
)


def map_transfer_status(status: tb.CreateTransferStatus) -> TransferResult:
    """The port's result for one of TigerBeetle's transfer statuses."""
    return TRANSFER_RESULTS.get(status, TransferResult.REJECTED)


def to_tb_account(spec: AccountSpec) -> tb.Account:
    """The TigerBeetle account for `spec`."""
    flags = tb.AccountFlags.NONE
    if spec.debits_must_not_exceed_credits:
        flags |= tb.AccountFlags.DEBITS_MUST_NOT_EXCEED_CREDITS
    if spec.credits_must_not_exceed_debits:
        flags |= tb.AccountFlags.CREDITS_MUST_NOT_EXCEED_DEBITS
    return tb.Account(id=spec.id, ledger=spec.ledger, code=int(spec.code), flags=flags)


def to_tb_transfer(t: LedgerTransfer) -> tb.Transfer:
    """The TigerBeetle transfer for `t`, with the settlement and rate in its user data."""
    rate_scaled = int(t.rate_at_payment * RATE_SCALE)
    if rate_scaled > _U64_MAX:
        raise LedgerRejected(f"rate {t.rate_at_payment} does not fit user_data_64 at 1e9 scale")
    return tb.Transfer(
        id=t.id,
        debit_account_id=t.debit_account_id,
        credit_account_id=t.credit_account_id,
        amount=t.amount_minor,
        user_data_128=settlement_ref(t.settlement_id),
        user_data_64=rate_scaled,
        ledger=t.ledger,
        code=int(t.code),
        flags=PHASE_FLAGS[t.phase],
        pending_id=t.pending_id,
    )


class _OverLimit(Exception):
    """The client refused a batch as over the cluster's request limit; nothing was sent."""


class TigerBeetleLedger:
    """The `Ledger` port on a TigerBeetle cluster; every call bounded by `timeout_s`."""

    def __init__(
        self, client: tb.ClientAsync, *, timeout_s: float = 5.0, page_size: int = _QUERY_LIMIT
    ) -> None:
        self._client = client
        self._timeout_s = timeout_s
        self._page_size = page_size
        #: Events per request: `BATCH_MAX` until the cluster's own limit proves smaller.
        self.batch_max = BATCH_MAX

    async def _call(self, what: str, call: Awaitable[T]) -> T:
        try:
            return await asyncio.wait_for(call, self._timeout_s)
        except TimeoutError as exc:
            raise LedgerUnavailable(
                f"TigerBeetle did not answer {what} within {self._timeout_s} s; outcome unknown"
            ) from exc
        except (
            tb.ClientClosedError,
            tb.ClientEvictedError,
            tb.ClientReleaseTooLowError,
            tb.ClientReleaseTooHighError,
        ) as exc:
            raise LedgerUnavailable(f"TigerBeetle {what}: {type(exc).__name__}") from exc
        except (tb.TooMuchDataError, tb.IntegerOverflowError) as exc:
            raise LedgerRejected(f"TigerBeetle {what}: {type(exc).__name__}") from exc

    async def _batched(
        self,
        what: str,
        events: Sequence[E],
        send: Callable[[Sequence[E]], Awaitable[list[Any]]],
        answer: Callable[[Sequence[E], list[Any]], list[T]],
    ) -> list[T]:
        """`send` each run of up to `batch_max` events, one request after the other;
        `answer` turns each request's reply into one item per event.

        The client refuses a batch over the cluster's request limit before sending it
        (`TooMuchDataError`), so nothing of a refused batch landed: the same events go
        again in halves, and later calls start at the size the cluster took.
        """
        out: list[T] = []
        start = 0
        while start < len(events):
            chunk = events[start : start + self.batch_max]
            try:
                reply = await self._call(what, self._guard_size(send(chunk)))
            except _OverLimit as exc:
                if len(chunk) == 1:
                    raise LedgerRejected(f"TigerBeetle {what}: TooMuchDataError") from exc
                self.batch_max = len(chunk) // 2
                log.warning(
                    "TigerBeetle refused %d events in one request; sending %d per request",
                    len(chunk),
                    self.batch_max,
                )
                continue
            out.extend(answer(chunk, reply))
            start += len(chunk)
        return out

    @staticmethod
    async def _guard_size(call: Awaitable[list[Any]]) -> list[Any]:
        try:
            return await call
        except tb.TooMuchDataError as exc:
            raise _OverLimit from exc

    async def ensure_accounts(self, accounts: Sequence[AccountSpec]) -> None:
        """Create missing accounts; an existing id with other fields is a collision."""
        statuses = await self._batched(
            "create_accounts",
            accounts,
            lambda batch: self._client.create_accounts([to_tb_account(a) for a in batch]),
            lambda batch, reply: one_per_event("TigerBeetle create_accounts", len(batch), reply),
        )
        for spec, result in zip(accounts, statuses, strict=True):
            if result.status in _ACCOUNT_OK:
                continue
            if result.status is _A.EXISTS_WITH_DIFFERENT_FLAGS and await self._limited_merchant(
                spec
            ):
                continue
            if result.status in _ACCOUNT_COLLISIONS:
                raise LedgerIdCollision(
                    f"account {spec.id:#034x} exists with different fields "
                    f"({result.status.name.lower()})"
                )
            raise LedgerRejected(f"account {spec.id:#034x} refused: {result.status.name.lower()}")

    async def _limited_merchant(self, spec: AccountSpec) -> bool:
        """Whether `spec`'s id is a merchant account opened with the debit limit that
        merchant accounts had before refunds and chargebacks could take them below zero.
        TigerBeetle accounts never change their flags, so such an account is the same
        account and keeps its limit (docs/operations.md, "Negative merchants")."""
        if spec.code is not AccountCode.MERCHANT or spec.debits_must_not_exceed_credits:
            return False
        found = await self._call("lookup_accounts", self._client.lookup_accounts([spec.id]))
        return len(found) == 1 and found[0].flags == tb.AccountFlags.DEBITS_MUST_NOT_EXCEED_CREDITS

    async def post(self, transfers: Sequence[LedgerTransfer]) -> list[TransferResult]:
        """Post up to `batch_max` transfers per request; one result per transfer, in order.

        More than that goes as consecutive requests, each atomic on its own: should a
        later one fail, the earlier ones stay posted, and the caller's retry with the
        same ids finds them `EXISTS`.
        """
        results = await self._batched(
            "create_transfers",
            transfers,
            lambda batch: self._client.create_transfers([to_tb_transfer(t) for t in batch]),
            lambda batch, reply: one_per_event("TigerBeetle create_transfers", len(batch), reply),
        )
        return [map_transfer_status(r.status) for r in results]

    async def balance(self, account_id: int) -> Balance | None:
        """The account's posted totals, or None if it does not exist."""
        return (await self.lookup_balances([account_id]))[0]

    async def lookup_balances(self, account_ids: Sequence[int]) -> list[Balance | None]:
        """These accounts' posted totals, in the same order; None for an unknown id."""
        found = await self._lookup("lookup_accounts", account_ids)
        return [None if a is None else balance_of(a) for a in found]

    async def lookup_transfers(self, transfer_ids: Sequence[int]) -> list[PostedTransfer | None]:
        """The transfers with these ids, in the same order; None where there is none."""
        found = await self._lookup("lookup_transfers", transfer_ids)
        return [None if t is None else posted_of(t) for t in found]

    async def _lookup(self, operation: str, ids: Sequence[int]) -> list[Any]:
        """The client's `operation` (`lookup_accounts` or `lookup_transfers`) over `ids`,
        a request per `batch_max`; each answer at its id's position, None where none."""
        return await self._batched(
            operation,
            ids,
            lambda chunk: getattr(self._client, operation)(list(chunk)),
            lambda chunk, found: align_found(f"TigerBeetle {operation}", chunk, found, _id_of),
        )

    async def balances(self) -> list[Balance]:
        """Every account's posted totals, in creation order (paged by timestamp).

        Each page is one request, so one state of the cluster; with more accounts than a
        page, transfers may land between pages (`check()` reads until two reads agree).
        """
        out: list[Balance] = []
        timestamp_min = 0
        while True:
            query = tb.QueryFilter(
                user_data_128=0,
                user_data_64=0,
                user_data_32=0,
                ledger=0,
                code=0,
                timestamp_min=timestamp_min,
                timestamp_max=0,
                limit=self._page_size,
                flags=tb.QueryFilterFlags.NONE,
            )
            page = await self._call("query_accounts", self._client.query_accounts(query))
            out.extend(balance_of(a) for a in page)
            if len(page) < self._page_size:
                return out
            timestamp_min = page[-1].timestamp + 1

    async def check(self) -> LedgerTotals:
        """Sums of posted debits and credits over every account, at one moment.

        One page is one state of the cluster. Over several pages a transfer can land
        between them, its debit read and its credit not: an imbalance that is not there.
        Posted totals only grow, so two whole reads one after the other that agree on
        every account saw the state at the moment between them: the sums are taken from
        such a pair. While transfers keep landing, the pair is tried again after a
        pause, `CHECK_TRIES` times; then the check is `LedgerUnavailable` (no verdict,
        try again), never a false `LedgerImbalance`, unless two reads in a row show an
        imbalance no moving ledger could (`LedgerTotals.outgrown_by`).
        """
        reads: list[LedgerTotals] = []
        for attempt in range(CHECK_TRIES):
            first = await self.balances()
            if len(first) < self._page_size:  # one page: one state of the cluster
                return _totals(first)
            second = await self.balances()
            if _posted(first) == _posted(second):  # pending totals may move back
                return _totals(second)
            reads += [_totals(first), _totals(second)]
            _imbalance_between(reads[-3:])  # the pairs this attempt added
            if attempt + 1 < CHECK_TRIES:
                await asyncio.sleep(min(CHECK_PAUSE_S * 2**attempt, 1.0))
        raise LedgerUnavailable(
            f"TigerBeetle accounts kept changing over {CHECK_TRIES} pairs of reads; "
            "check again when fewer transfers land"
        )


def _imbalance_between(reads: Sequence[LedgerTotals]) -> None:
    """`LedgerImbalance` if a read's sums outgrow the next read's: certain, unlike any
    difference within one read of several pages."""
    for earlier, later in itertools.pairwise(reads):
        if earlier.outgrown_by(later):
            raise LedgerImbalance(
                "ledger out of balance: a whole read of the accounts summed debits "
                f"{earlier.debits_posted} and credits {earlier.credits_posted}, the read "
                f"after it debits {later.debits_posted} and credits {later.credits_posted}; "
                "posted totals only grow, so no ledger in balance reads so"
            )


def _posted(balances: Sequence[Balance]) -> list[tuple[int, int, int]]:
    return [(b.account_id, b.debits_posted, b.credits_posted) for b in balances]


def _totals(balances: Sequence[Balance]) -> LedgerTotals:
    return LedgerTotals(
        debits_posted=sum(b.debits_posted for b in balances),
        credits_posted=sum(b.credits_posted for b in balances),
    )


def _id_of(record: Any) -> int:
    return int(record.id)


def balance_of(account: tb.Account) -> Balance:
    """The port's balance of a TigerBeetle account, with its ledger and code."""
    return Balance(
        account.id,
        account.debits_posted,
        account.credits_posted,
        ledger=account.ledger,
        code=account.code,
        debits_pending=account.debits_pending,
        credits_pending=account.credits_pending,
    )


def posted_of(transfer: tb.Transfer) -> PostedTransfer:
    """The port's view of a TigerBeetle transfer, its rate read back from user data."""
    return PostedTransfer(
        id=transfer.id,
        debit_account_id=transfer.debit_account_id,
        credit_account_id=transfer.credit_account_id,
        amount_minor=transfer.amount,
        ledger=transfer.ledger,
        code=transfer.code,
        settlement_ref=transfer.user_data_128,
        rate_at_payment=Decimal(transfer.user_data_64).scaleb(-RATE_DECIMALS),
        phase=_phase_of(transfer.flags),
        pending_id=transfer.pending_id,
    )


def _phase_of(flags: int) -> TransferPhase:
    for phase, flag in PHASE_FLAGS.items():
        if flag and flags & flag:
            return phase
    return TransferPhase.SINGLE


@contextlib.asynccontextmanager
async def open_tigerbeetle(
    cluster_id: int, addresses: str, *, timeout_s: float = 5.0
) -> AsyncIterator[TigerBeetleLedger]:
    """A TigerBeetle ledger for the block's lifetime; `addresses` like `3000` or `a:3000,b:3000`.

    Opening never waits for the cluster (the client connects in the background), so the
    worker starts while TigerBeetle is down and its first call answers `LedgerUnavailable`.
    """
    try:
        client = tb.ClientAsync(cluster_id=cluster_id, replica_addresses=addresses)
    except InitError as exc:
        raise ConfigError("ledger.tigerbeetle.addresses", f"client refused {addresses!r}") from exc
    try:
        yield TigerBeetleLedger(client, timeout_s=timeout_s)
    finally:
        try:
            await asyncio.wait_for(client.close(), timeout=timeout_s)
        except (TimeoutError, AssertionError) as exc:
            # A request abandoned at its deadline stays in the client's books, and close()
            # asserts there are none; the native client is shut down either way.
            log.warning("TigerBeetle client closed uncleanly: %s", type(exc).__name__)
