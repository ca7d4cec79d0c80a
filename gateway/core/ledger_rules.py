"""TigerBeetle's rules for posting a transfer, as pure functions over plain values.

The PostgreSQL ledger locks a batch's accounts, reads what its ids already mean, and
then lets these decide each transfer in order, as TigerBeetle does in one request.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from gateway.core.ledger import ID_MAX, LedgerTransfer, TransferResult


@dataclass
class AccountState:
    """A locked account's limits and running totals while a batch is checked."""

    ledger: int
    debits_limited: bool  # debits_must_not_exceed_credits
    credits_limited: bool  # credits_must_not_exceed_debits
    debits_posted: int
    credits_posted: int
    touched: bool = False


#: What must match for a repost to be `EXISTS` rather than a collision.
TransferFields = tuple[int, int, int, int, int, str, Decimal]


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
    )


def apply_transfer(
    t: LedgerTransfer, accounts: dict[int, AccountState], existing: dict[int, TransferFields]
) -> None:
    """Move the locked balances for an accepted transfer, and remember its id."""
    existing[t.id] = transfer_fields(t)
    debit, credit = accounts[t.debit_account_id], accounts[t.credit_account_id]
    debit.debits_posted += t.amount_minor
    credit.credits_posted += t.amount_minor
    debit.touched = credit.touched = True


def compare(t: LedgerTransfer, found: TransferFields) -> TransferResult:
    """`EXISTS` if the transfer already posted under `t.id` is `t`, else a collision."""
    if found == transfer_fields(t):
        return TransferResult.EXISTS
    return TransferResult.EXISTS_WITH_DIFFERENT_FIELDS


def decide(
    t: LedgerTransfer,
    accounts: dict[int, AccountState],
    existing: dict[int, TransferFields],
    failed: set[int],
) -> TransferResult:
    """TigerBeetle's checks for one transfer, in its order of precedence."""
    if t.id in existing:
        return compare(t, existing[t.id])
    if t.id in failed:
        return TransferResult.ID_ALREADY_FAILED
    if t.debit_account_id == t.credit_account_id:
        return TransferResult.ACCOUNTS_MUST_BE_DIFFERENT
    debit = accounts.get(t.debit_account_id)
    if debit is None:
        return TransferResult.DEBIT_ACCOUNT_NOT_FOUND
    credit = accounts.get(t.credit_account_id)
    if credit is None:
        return TransferResult.CREDIT_ACCOUNT_NOT_FOUND
    if debit.ledger != credit.ledger or t.ledger != debit.ledger:
        return TransferResult.LEDGER_MISMATCH
    amount = t.amount_minor
    if debit.debits_posted + amount > ID_MAX or credit.credits_posted + amount > ID_MAX:
        return TransferResult.REJECTED  # TigerBeetle's overflows_debits / overflows_credits
    if debit.debits_limited and debit.debits_posted + amount > debit.credits_posted:
        return TransferResult.EXCEEDS_CREDITS
    if credit.credits_limited and credit.credits_posted + amount > credit.debits_posted:
        return TransferResult.EXCEEDS_DEBITS
    return TransferResult.CREATED
