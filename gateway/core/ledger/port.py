"""The ledger port: plain values, the `Ledger` protocol, and what each result means.

The semantics are TigerBeetle's, so the PostgreSQL backend can stand in for it:
transfers are immutable and keyed by a client-chosen 128-bit id; posting the same
transfer again is `EXISTS` (success, nothing moves); the same id with other fields is a
collision; a transfer refused for a reason that could change (an account missing, not
enough funds) burns its id, and every later try with that id is `ID_ALREADY_FAILED`.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Protocol

from gateway.core.failures.excerpt import clip
from gateway.errors import (
    InsufficientFunds,
    LedgerIdAlreadyFailed,
    LedgerIdCollision,
    LedgerImbalance,
    LedgerRejected,
    UnknownAccount,
)

#: TigerBeetle reserves 0 and 2**128 - 1 for ids; neither may name an account or transfer.
ID_MAX = 2**128 - 1
#: Decimal places kept of a rate: TigerBeetle stores it scaled by 10**9 in a u64.
RATE_DECIMALS = 9


class AccountCode(enum.IntEnum):
    """What an account is for (TigerBeetle's `code`, a u16)."""

    MERCHANT = 1
    CLEARING = 2


class TransferCode(enum.IntEnum):
    """Why money moved (TigerBeetle's `code`, a u16): a member per
    `core.settlement.instructions.SettlementKind`, of the same name."""

    CAPTURE = 1
    REFUND = 2
    REFUND_REVERSAL = 3
    CHARGEBACK = 4
    CHARGEBACK_REVERSAL = 5
    CREDIT_ADJUSTMENT = 6
    DEBIT_ADJUSTMENT = 7
    PAYOUT = 8
    DISPUTE_FEE = 9
    DISPUTE_FEE_REVERSAL = 10
    #: The exchange result of a converted payment's follow-up
    #: (`core.settlement.instructions.fx_transfer`).
    FX_DIFFERENCE = 11


class TransferPhase(enum.StrEnum):
    """Whether a transfer moves money at once or in two phases (TigerBeetle's flags).

    An authorisation reserves money with a `PENDING` transfer (counted in the accounts'
    `*_pending`, not posted); a capture then `POST`s it, for its whole amount or less
    (the rest is released), or a void `VOID`s it. A pending transfer is resolved once.
    """

    SINGLE = "single"
    PENDING = "pending"
    POST = "post"  # TigerBeetle's post_pending_transfer
    VOID = "void"  # TigerBeetle's void_pending_transfer

    @property
    def resolves(self) -> bool:
        """Post and void name the pending transfer they resolve (`pending_id`)."""
        return self in (TransferPhase.POST, TransferPhase.VOID)


class TransferResult(enum.StrEnum):
    """The outcome of posting one transfer, mirroring TigerBeetle's result codes."""

    CREATED = "created"
    EXISTS = "exists"
    #: Any of TigerBeetle's `exists_with_different_*`: the id is taken by another transfer.
    EXISTS_WITH_DIFFERENT_FIELDS = "exists_with_different_fields"
    ID_ALREADY_FAILED = "id_already_failed"
    DEBIT_ACCOUNT_NOT_FOUND = "debit_account_not_found"
    CREDIT_ACCOUNT_NOT_FOUND = "credit_account_not_found"
    ACCOUNTS_MUST_BE_DIFFERENT = "accounts_must_be_different"
    #: The accounts are on different ledgers, or the transfer's ledger is not theirs.
    LEDGER_MISMATCH = "ledger_mismatch"
    #: The debit account has `debits_must_not_exceed_credits` and too little credit.
    EXCEEDS_CREDITS = "exceeds_credits"
    #: The credit account has `credits_must_not_exceed_debits` and too little debit.
    EXCEEDS_DEBITS = "exceeds_debits"
    #: A post or void whose `pending_id` names no transfer.
    PENDING_TRANSFER_NOT_FOUND = "pending_transfer_not_found"
    #: A post or void whose `pending_id` names a transfer that is not pending.
    PENDING_TRANSFER_NOT_PENDING = "pending_transfer_not_pending"
    #: A post or void whose accounts, ledger or code are not its pending transfer's.
    PENDING_TRANSFER_HAS_DIFFERENT_FIELDS = "pending_transfer_has_different_fields"
    PENDING_TRANSFER_ALREADY_POSTED = "pending_transfer_already_posted"
    PENDING_TRANSFER_ALREADY_VOIDED = "pending_transfer_already_voided"
    #: A post of more than its pending transfer reserved.
    EXCEEDS_PENDING_TRANSFER_AMOUNT = "exceeds_pending_transfer_amount"
    #: A void of another amount than its pending transfer's.
    PENDING_TRANSFER_HAS_DIFFERENT_AMOUNT = "pending_transfer_has_different_amount"
    #: Anything else the ledger refuses as malformed (zero id, overflow, reserved flag...).
    REJECTED = "rejected"


#: Refusals after which TigerBeetle remembers the id as failed (its "transient" results).
ID_BURNING_RESULTS = frozenset(
    {
        TransferResult.DEBIT_ACCOUNT_NOT_FOUND,
        TransferResult.CREDIT_ACCOUNT_NOT_FOUND,
        TransferResult.EXCEEDS_CREDITS,
        TransferResult.EXCEEDS_DEBITS,
        TransferResult.PENDING_TRANSFER_NOT_FOUND,
    }
)


@dataclass(frozen=True)
class AccountSpec:
    """An account to create idempotently: same id and same fields is a no-op."""

    id: int
    ledger: int  # one ledger per currency; see core.ledger.ids.ledger_number
    code: AccountCode
    debits_must_not_exceed_credits: bool = False
    credits_must_not_exceed_debits: bool = False


@dataclass(frozen=True)
class LedgerTransfer:
    """One immutable movement of `amount_minor` from the debit to the credit account."""

    id: int
    debit_account_id: int
    credit_account_id: int
    amount_minor: int
    ledger: int
    code: TransferCode
    #: User data: which settlement this is (TigerBeetle keeps a 128-bit hash of it).
    settlement_id: str
    #: User data: the conversion rate used, at most `RATE_DECIMALS` decimal places.
    rate_at_payment: Decimal
    phase: TransferPhase = TransferPhase.SINGLE
    #: The pending transfer a post or void resolves; 0 for the other phases. A post or
    #: void names its pending transfer's accounts, ledger and code (never left 0).
    pending_id: int = 0

    def __post_init__(self) -> None:
        for name in ("id", "debit_account_id", "credit_account_id"):
            value = getattr(self, name)
            if not 0 < value < ID_MAX:
                raise ValueError(f"{name} {value} is outside 1..2**128-2")
        if self.phase.resolves != (0 < self.pending_id < ID_MAX):
            raise ValueError(f"a {self.phase.value} transfer has pending_id {self.pending_id}")
        if not 0 < self.amount_minor <= ID_MAX:
            raise ValueError(f"amount_minor {self.amount_minor} must be positive (u128)")
        exponent = self.rate_at_payment.as_tuple().exponent
        if (
            not self.rate_at_payment.is_finite()
            or self.rate_at_payment <= 0
            or (isinstance(exponent, int) and exponent < -RATE_DECIMALS)
        ):
            raise ValueError(
                f"rate_at_payment {self.rate_at_payment} must be positive with at most "
                f"{RATE_DECIMALS} decimal places"
            )


@dataclass(frozen=True)
class Balance:
    """An account's posted totals, in minor units of its ledger's currency."""

    account_id: int
    debits_posted: int
    credits_posted: int
    #: The account's ledger (its currency) and code (its kind); 0 where not known.
    ledger: int = 0
    code: int = 0
    #: Reserved by pending transfers (authorisations), not yet posted or voided.
    debits_pending: int = 0
    credits_pending: int = 0

    @property
    def credit_balance_minor(self) -> int:
        """What a merchant account holds: credits minus debits."""
        return self.credits_posted - self.debits_posted


@dataclass(frozen=True)
class LedgerTotals:
    """Sums of posted debits and credits over every account."""

    debits_posted: int
    credits_posted: int

    @property
    def balanced(self) -> bool:
        """True when double entry holds: every debit has its credit."""
        return self.debits_posted == self.credits_posted

    def outgrown_by(self, later: LedgerTotals) -> bool:
        """True when these sums, read before `later`, cannot come from a ledger in balance.

        Either read may span pages read at different moments, so neither alone is a
        state of the ledger. But posted totals only grow, and in balance debits equal
        credits at every moment: each sum of the earlier read is at most the ledger's
        total at the moment between the reads, and each sum of the later one at least
        that. An earlier sum above a later one is an imbalance for certain.
        """
        earlier_most = max(self.debits_posted, self.credits_posted)
        return earlier_most > min(later.debits_posted, later.credits_posted)


@dataclass(frozen=True)
class PostedTransfer:
    """A transfer as the ledger holds it, read back by id (what both backends store)."""

    id: int
    debit_account_id: int
    credit_account_id: int
    amount_minor: int
    ledger: int
    code: int
    #: `core.ledger.ids.settlement_ref` of its settlement id (TigerBeetle keeps only it).
    settlement_ref: int
    rate_at_payment: Decimal
    phase: TransferPhase = TransferPhase.SINGLE
    pending_id: int = 0


class Ledger(Protocol):
    """A double-entry ledger with idempotent, client-keyed transfers."""

    async def ensure_accounts(self, accounts: Sequence[AccountSpec]) -> None:
        """Create the accounts that do not exist; raise `LedgerIdCollision` on a mismatch."""
        ...

    async def post(self, transfers: Sequence[LedgerTransfer]) -> list[TransferResult]:
        """Post a batch; one result per transfer, in order. Raise `LedgerUnavailable`
        when the outcome is unknown (retry the same transfers)."""
        ...

    async def lookup_transfers(self, transfer_ids: Sequence[int]) -> list[PostedTransfer | None]:
        """The transfers with these ids, in the same order; None where there is none
        (for checks: one transfer per event)."""
        ...

    async def balance(self, account_id: int) -> Balance | None:
        """The account's posted totals, or None if it does not exist."""
        ...

    async def balances(self) -> list[Balance]:
        """Every account's posted totals (for `gateway ledger balances`)."""
        ...

    async def check(self) -> LedgerTotals:
        """Total debits and credits over all accounts at one moment (see
        `verify_totals`); `LedgerUnavailable` when no such moment could be read, and
        `LedgerImbalance` when the reads show one for certain without it
        (`LedgerTotals.outgrown_by`)."""
        ...


def interpret(result: TransferResult, transfer: LedgerTransfer) -> TransferResult:
    """Return `result` when the transfer is in the ledger; raise the permanent error otherwise.

    `EXISTS` is success: the same transfer was posted before (a redelivery, or a second
    event for the same settlement), and nothing moved twice.
    """
    if result in (TransferResult.CREATED, TransferResult.EXISTS):
        return result
    code, settlement = transfer.code.name.lower(), clip(transfer.settlement_id)
    where = f"transfer {transfer.id:#034x} ({code} {settlement})"
    if result is TransferResult.EXISTS_WITH_DIFFERENT_FIELDS:
        raise LedgerIdCollision(f"{where}: id exists with different fields")
    if result in (TransferResult.EXCEEDS_CREDITS, TransferResult.EXCEEDS_DEBITS):
        raise InsufficientFunds(f"{where}: {result.value}")
    if result is TransferResult.DEBIT_ACCOUNT_NOT_FOUND:
        raise UnknownAccount(f"{where}: debit account {transfer.debit_account_id:#034x} not found")
    if result is TransferResult.CREDIT_ACCOUNT_NOT_FOUND:
        raise UnknownAccount(
            f"{where}: credit account {transfer.credit_account_id:#034x} not found"
        )
    if result is TransferResult.ID_ALREADY_FAILED:
        raise LedgerIdAlreadyFailed(f"{where}: the ledger refused this id before")
    raise LedgerRejected(f"{where}: {result.value}")


def verify_totals(totals: LedgerTotals) -> LedgerTotals:
    """Return the totals if debits equal credits; raise the critical `LedgerImbalance`."""
    if not totals.balanced:
        raise LedgerImbalance(
            f"ledger out of balance: debits {totals.debits_posted} "
            f"!= credits {totals.credits_posted}"
        )
    return totals
