"""Small in-memory fakes of the gateway's ports, for tests that need no PostgreSQL or NATS.

Each keeps the contract its port promises (and nothing more), so a test that passes on a
fake says something about the real thing:

- `MemoryInbox` (`gateway.ingest.parts.Inbox`): idempotent by `(provider, event_id)`;
  can be told to fail (`fail_with`) or to stall until its caller's deadline (`stall`);
- `StaticProbe` (`gateway.ingest.parts.Probe`): answers what it is told, never raises;
- `MemoryLedger` (`gateway.core.ledger.port.Ledger`): decides every transfer with the same
  rules as the PostgreSQL ledger (`gateway.core.ledger.rules`); the ledger contract
  suite (tests/integration/adapters/test_ledger_contract.py) runs against it too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from gateway.core.events.model import Event, Outcome
from gateway.core.ledger.ids import settlement_ref
from gateway.core.ledger.port import (
    ID_BURNING_RESULTS,
    AccountSpec,
    Balance,
    LedgerTotals,
    LedgerTransfer,
    PostedTransfer,
    TransferPhase,
    TransferResult,
)
from gateway.core.ledger.rules import (
    AccountState,
    Resolved,
    TransferFields,
    apply_transfer,
    decide,
)
from gateway.errors import LedgerIdCollision, Overloaded, TransientError


class MemoryInbox:
    """The idempotency gate in a dict: the first event per `(provider, event_id)` is
    ACCEPTED and recorded, every later one is a DUPLICATE and changes nothing.

    `offered` lists every event that reached `accept` (recorded or not), so a test can
    show that a refused request never got this far.
    """

    def __init__(self) -> None:
        self.recorded: dict[tuple[str, str], Event] = {}
        self.offered: list[Event] = []
        self.closed = False
        self._failure: Exception | None = None
        self._released = asyncio.Event()
        self._released.set()

    def fail_with(self, error: Exception | None) -> None:
        """Raise `error` from every `accept` from now on (None: work again).

        A `TransientError` (`DatabaseUnavailable`, `Overloaded`) is what the real inbox
        raises when it cannot make an event durable; anything else plays a bug.
        """
        self._failure = error

    def stall(self) -> None:
        """Hold every `accept` until `release()` or until its caller gives up (a commit
        that does not finish before the request's deadline). Nothing stalled is recorded."""
        self._released.clear()

    def release(self) -> None:
        """Let stalled and later `accept` calls go through."""
        self._released.set()

    @property
    def parked(self) -> list[Event]:
        """Recorded events that carry a failure (the real inbox parks them in the DLQ)."""
        return [e for e in self.recorded.values() if e.failure is not None]

    async def accept(self, event: Event) -> Outcome:
        self.offered.append(event)
        if self.closed:
            raise Overloaded("shutting down")  # as GroupCommitInbox after close()
        if self._failure is not None:
            raise self._failure
        await self._released.wait()
        await asyncio.sleep(0)  # a commit is never instantaneous: let others run
        key = (event.provider, event.event_id)
        if key in self.recorded:
            return Outcome.DUPLICATE
        self.recorded[key] = event
        return Outcome.ACCEPTED

    async def close(self) -> None:
        self.closed = True


class StaticProbe:
    """A dependency that is up or down as the test says; counts how often it was asked."""

    def __init__(self, up: bool = True) -> None:
        self.up = up
        self.pings = 0

    async def ping(self) -> bool:
        self.pings += 1
        return self.up


class MemoryLedger:
    """A double-entry ledger in dicts, with TigerBeetle's semantics as the PostgreSQL
    ledger implements them: idempotent transfers by id, `EXISTS` for a repost,
    `EXISTS_WITH_DIFFERENT_FIELDS` for a reused id, burnt ids for refusals that could
    change, limits on balances, and accounts created idempotently.

    Each call runs to completion without yielding once it has started, so a batch is
    as atomic as the real backends make it. Set `unavailable` to a `TransientError`
    (e.g. `LedgerUnavailable`) to refuse every call before anything changes.
    """

    def __init__(self) -> None:
        self.accounts: dict[int, AccountSpec] = {}
        self.unavailable: TransientError | None = None
        self._state: dict[int, AccountState] = {}
        self._transfers: dict[int, TransferFields] = {}
        self._failed: set[int] = set()
        self._resolved: Resolved = {}

    async def _turn(self) -> None:
        await asyncio.sleep(0)  # a round trip: concurrent callers interleave between calls
        if self.unavailable is not None:
            raise self.unavailable

    async def ensure_accounts(self, accounts: Sequence[AccountSpec]) -> None:
        """Create the missing accounts; all or none, as in one transaction."""
        await self._turn()
        staged = dict(self.accounts)
        for spec in accounts:
            if staged.setdefault(spec.id, spec) != spec:
                raise LedgerIdCollision(f"account {spec.id:#034x} exists with different fields")
        for spec in staged.values():
            if spec.id not in self._state:
                self._state[spec.id] = AccountState(
                    ledger=spec.ledger,
                    debits_limited=spec.debits_must_not_exceed_credits,
                    credits_limited=spec.credits_must_not_exceed_debits,
                    debits_posted=0,
                    credits_posted=0,
                )
        self.accounts = staged

    async def post(self, transfers: Sequence[LedgerTransfer]) -> list[TransferResult]:
        """Decide and apply each transfer in order, as TigerBeetle does in one request."""
        await self._turn()
        results: list[TransferResult] = []
        for t in transfers:
            result = decide(t, self._state, self._transfers, self._failed, self._resolved)
            if result is TransferResult.CREATED:
                apply_transfer(t, self._state, self._transfers, self._resolved)
            elif result in ID_BURNING_RESULTS:
                self._failed.add(t.id)
            results.append(result)
        return results

    async def lookup_transfers(self, transfer_ids: Sequence[int]) -> list[PostedTransfer | None]:
        await self._turn()
        return [self._posted(i) for i in transfer_ids]

    def _posted(self, transfer_id: int) -> PostedTransfer | None:
        fields = self._transfers.get(transfer_id)
        if fields is None:
            return None
        debit, credit, amount, ledger, code, settlement_id, rate, phase, pending_id = fields
        return PostedTransfer(transfer_id, debit, credit, amount, ledger, code,
                              settlement_ref(settlement_id), rate, TransferPhase(phase),
                              pending_id)  # fmt: skip

    async def balance(self, account_id: int) -> Balance | None:
        await self._turn()
        state = self._state.get(account_id)
        if state is None:
            return None
        return self._balance(account_id, state)

    async def balances(self) -> list[Balance]:
        await self._turn()
        return [self._balance(i, s) for i, s in sorted(self._state.items())]

    def _balance(self, account_id: int, state: AccountState) -> Balance:
        code = int(self.accounts[account_id].code)
        return Balance(
            account_id,
            state.debits_posted,
            state.credits_posted,
            ledger=state.ledger,
            code=code,
            debits_pending=state.debits_pending,
            credits_pending=state.credits_pending,
        )

    async def check(self) -> LedgerTotals:
        await self._turn()
        return LedgerTotals(
            debits_posted=sum(s.debits_posted for s in self._state.values()),
            credits_posted=sum(s.credits_posted for s in self._state.values()),
        )
