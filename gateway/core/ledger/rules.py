"""TigerBeetle's rules for posting a transfer, as pure functions over plain values.

The PostgreSQL ledger locks a batch's accounts, reads what its ids already mean, and
then lets these decide each transfer in order, as TigerBeetle does in one request.
Two-phase transfers follow TigerBeetle too: a pending transfer reserves its amount in
the accounts' `*_pending`; a post moves up to that amount to `*_posted` and releases
the whole reservation; a void releases it; each pending transfer is resolved once.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from gateway.core.ledger.port import ID_MAX, LedgerTransfer, TransferPhase, TransferResult

_R = TransferResult


@dataclass
class AccountState:
    """A locked account's limits and running totals while a batch is checked."""

    ledger: int
    debits_limited: bool  # debits_must_not_exceed_credits
    credits_limited: bool  # credits_must_not_exceed_debits
    debits_posted: int
    credits_posted: int
    touched: bool = False
    debits_pending: int = 0
    credits_pending: int = 0


#: What must match for a repost to be `EXISTS` rather than a collision: debit, credit,
#: amount, ledger, code, settlement id, rate, phase and pending id.
TransferFields = tuple[int, int, int, int, int, str, Decimal, str, int]
#: How each pending transfer was resolved, by its id (absent while it is pending).
Resolved = dict[int, TransferPhase]


def transfer_fields(t: LedgerTransfer) -> TransferFields:
    """The fields of `t` a repost is compared on."""
    return (
        t.debit_account_id,
        t.credit_account_id,
        t.amount_minor,
        t.ledger,
        int(t.code),
        t.settlement_id,
        t.rate_at_payment,
        t.phase.value,
        t.pending_id,
    )


def apply_transfer(
    t: LedgerTransfer,
    accounts: dict[int, AccountState],
    existing: dict[int, TransferFields],
    resolved: Resolved | None = None,
) -> None:
    """Move the locked balances for an accepted transfer, and remember its id."""
    existing[t.id] = transfer_fields(t)
    debit, credit = accounts[t.debit_account_id], accounts[t.credit_account_id]
    debit.touched = credit.touched = True
    if t.phase is TransferPhase.PENDING:
        debit.debits_pending += t.amount_minor
        credit.credits_pending += t.amount_minor
        return
    if t.phase.resolves:
        reserved = existing[t.pending_id][2]
        debit.debits_pending -= reserved
        credit.credits_pending -= reserved
        if resolved is not None:
            resolved[t.pending_id] = t.phase
        if t.phase is TransferPhase.VOID:
            return
    debit.debits_posted += t.amount_minor
    credit.credits_posted += t.amount_minor


def compare(t: LedgerTransfer, found: TransferFields) -> TransferResult:
    """`EXISTS` if the transfer already posted under `t.id` is `t`, else a collision."""
    if found == transfer_fields(t):
        return _R.EXISTS
    return _R.EXISTS_WITH_DIFFERENT_FIELDS


def decide(
    t: LedgerTransfer,
    accounts: dict[int, AccountState],
    existing: dict[int, TransferFields],
    failed: set[int],
    resolved: Resolved | None = None,
) -> TransferResult:
    """TigerBeetle's checks for one transfer, in its order of precedence. `existing`
    must hold the pending transfers that the batch's posts and voids name, `resolved`
    how those were resolved."""
    if t.id in existing:
        return compare(t, existing[t.id])
    if t.id in failed:
        return _R.ID_ALREADY_FAILED
    if t.phase.resolves:
        return _decide_resolution(t, existing, resolved or {})
    if t.debit_account_id == t.credit_account_id:
        return _R.ACCOUNTS_MUST_BE_DIFFERENT
    debit = accounts.get(t.debit_account_id)
    if debit is None:
        return _R.DEBIT_ACCOUNT_NOT_FOUND
    credit = accounts.get(t.credit_account_id)
    if credit is None:
        return _R.CREDIT_ACCOUNT_NOT_FOUND
    if debit.ledger != credit.ledger or t.ledger != debit.ledger:
        return _R.LEDGER_MISMATCH
    amount = t.amount_minor
    debits = debit.debits_posted + debit.debits_pending + amount
    credits = credit.credits_posted + credit.credits_pending + amount
    if debits > ID_MAX or credits > ID_MAX:
        return _R.REJECTED  # TigerBeetle's overflows_debits / overflows_credits
    if debit.debits_limited and debits > debit.credits_posted:
        return _R.EXCEEDS_CREDITS
    if credit.credits_limited and credits > credit.debits_posted:
        return _R.EXCEEDS_DEBITS
    return _R.CREATED


def _decide_resolution(
    t: LedgerTransfer, existing: dict[int, TransferFields], resolved: Resolved
) -> TransferResult:
    """A post or void against its pending transfer. Its amount was reserved when the
    pending transfer was created, so no limit is checked again."""
    pending = existing.get(t.pending_id)
    if pending is None:
        return _R.PENDING_TRANSFER_NOT_FOUND
    debit, credit, amount, ledger, code, _, _, phase, _ = pending
    if phase != TransferPhase.PENDING.value:
        return _R.PENDING_TRANSFER_NOT_PENDING
    if (debit, credit, ledger, code) != (
        t.debit_account_id,
        t.credit_account_id,
        t.ledger,
        int(t.code),
    ):
        return _R.PENDING_TRANSFER_HAS_DIFFERENT_FIELDS
    if t.amount_minor > amount:
        return _R.EXCEEDS_PENDING_TRANSFER_AMOUNT
    if t.phase is TransferPhase.VOID and t.amount_minor < amount:
        return _R.PENDING_TRANSFER_HAS_DIFFERENT_AMOUNT
    done = resolved.get(t.pending_id)
    if done is TransferPhase.POST:
        return _R.PENDING_TRANSFER_ALREADY_POSTED
    if done is TransferPhase.VOID:
        return _R.PENDING_TRANSFER_ALREADY_VOIDED
    return _R.CREATED
