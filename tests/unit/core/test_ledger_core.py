"""Ledger results → actions, and TigerBeetle's codes → the port's results (real types)."""

from __future__ import annotations

from decimal import Decimal

import pytest
import tigerbeetle as tb

from gateway.adapters.tigerbeetle import (
    RATE_SCALE,
    balance_of,
    map_transfer_status,
    to_tb_account,
    to_tb_transfer,
)
from gateway.core.ledger.ids import settlement_ref
from gateway.core.ledger.port import (
    ID_BURNING_RESULTS,
    ID_MAX,
    AccountCode,
    AccountSpec,
    Balance,
    LedgerTotals,
    LedgerTransfer,
    TransferCode,
    TransferResult,
    interpret,
    verify_totals,
)
from gateway.errors import (
    InsufficientFunds,
    LedgerIdAlreadyFailed,
    LedgerIdCollision,
    LedgerImbalance,
    LedgerRejected,
    PermanentError,
    UnknownAccount,
)

R = TransferResult
S = tb.CreateTransferStatus
TRANSFER = LedgerTransfer(
    id=7, debit_account_id=1, credit_account_id=2, amount_minor=100, ledger=15826,
    code=TransferCode.CAPTURE, settlement_id="pi_1", rate_at_payment=Decimal("1.080000001"),
)  # fmt: skip


@pytest.mark.parametrize("result", [R.CREATED, R.EXISTS])
def test_created_and_exists_are_success(result: TransferResult) -> None:
    """A duplicate transfer (same id, same fields) is success: nothing moved twice."""
    assert interpret(result, TRANSFER) is result


@pytest.mark.parametrize(
    ("result", "error", "critical"),
    [
        (R.EXISTS_WITH_DIFFERENT_FIELDS, LedgerIdCollision, True),
        (R.EXCEEDS_CREDITS, InsufficientFunds, False),
        (R.EXCEEDS_DEBITS, InsufficientFunds, False),
        (R.DEBIT_ACCOUNT_NOT_FOUND, UnknownAccount, False),
        (R.CREDIT_ACCOUNT_NOT_FOUND, UnknownAccount, False),
        (R.ID_ALREADY_FAILED, LedgerIdAlreadyFailed, False),
        (R.ACCOUNTS_MUST_BE_DIFFERENT, LedgerRejected, False),
        (R.LEDGER_MISMATCH, LedgerRejected, False),
        (R.REJECTED, LedgerRejected, False),
    ],
)
def test_refusals_are_permanent_errors(
    result: TransferResult, error: type[PermanentError], critical: bool
) -> None:
    """Every refusal skips the retries; an id collision is also critical."""
    with pytest.raises(error) as caught:
        interpret(result, TRANSFER)
    assert isinstance(caught.value, PermanentError)
    assert caught.value.critical is critical


def test_error_classes_are_the_documented_names() -> None:
    """The DLQ's error_class strings that dashboards and runbooks rely on."""
    assert InsufficientFunds.error_class == "INSUFFICIENT_FUNDS"
    assert LedgerIdCollision.error_class == "LEDGER_ID_COLLISION"


def test_verify_totals() -> None:
    """Balanced totals pass; unequal ones are the critical LEDGER_IMBALANCE."""
    assert verify_totals(LedgerTotals(10, 10)).balanced
    with pytest.raises(LedgerImbalance) as caught:
        verify_totals(LedgerTotals(10, 9))
    assert caught.value.critical


@pytest.mark.parametrize(
    ("earlier", "later", "certain"),
    [
        # Balanced and quiet, or money landing between and during the reads.
        (LedgerTotals(10, 10), LedgerTotals(10, 10), False),
        (LedgerTotals(10, 30), LedgerTotals(40, 30), False),
        (LedgerTotals(30, 10), LedgerTotals(30, 30), False),
        # An earlier sum equal to a later one: the ledger may have stood at 30 between.
        (LedgerTotals(30, 20), LedgerTotals(50, 30), False),
        # Debits of the earlier read above the later credits: no balanced ledger does it.
        (LedgerTotals(31, 20), LedgerTotals(50, 30), True),
        # The same on the other side, and a later sum below an earlier one.
        (LedgerTotals(20, 31), LedgerTotals(30, 50), True),
        (LedgerTotals(10, 10), LedgerTotals(12, 9), True),
    ],
)
def test_a_read_outgrown_by_the_next_is_an_imbalance_for_certain(
    earlier: LedgerTotals, later: LedgerTotals, certain: bool
) -> None:
    assert earlier.outgrown_by(later) is certain


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (S.CREATED, R.CREATED),
        (S.EXISTS, R.EXISTS),
        (S.EXISTS_WITH_DIFFERENT_AMOUNT, R.EXISTS_WITH_DIFFERENT_FIELDS),
        (S.EXISTS_WITH_DIFFERENT_DEBIT_ACCOUNT_ID, R.EXISTS_WITH_DIFFERENT_FIELDS),
        (S.EXISTS_WITH_DIFFERENT_USER_DATA_64, R.EXISTS_WITH_DIFFERENT_FIELDS),
        (S.EXISTS_WITH_DIFFERENT_LEDGER, R.EXISTS_WITH_DIFFERENT_FIELDS),
        (S.EXCEEDS_CREDITS, R.EXCEEDS_CREDITS),
        (S.EXCEEDS_DEBITS, R.EXCEEDS_DEBITS),
        (S.DEBIT_ACCOUNT_NOT_FOUND, R.DEBIT_ACCOUNT_NOT_FOUND),
        (S.CREDIT_ACCOUNT_NOT_FOUND, R.CREDIT_ACCOUNT_NOT_FOUND),
        (S.ID_ALREADY_FAILED, R.ID_ALREADY_FAILED),
        (S.ACCOUNTS_MUST_HAVE_THE_SAME_LEDGER, R.LEDGER_MISMATCH),
        (S.ID_MUST_NOT_BE_ZERO, R.REJECTED),
        (S.OVERFLOWS_CREDITS, R.REJECTED),
    ],
)
def test_tigerbeetle_statuses_map_onto_the_port(
    status: tb.CreateTransferStatus, expected: TransferResult
) -> None:
    assert map_transfer_status(status) is expected


def test_every_tigerbeetle_collision_status_is_a_collision() -> None:
    """No `exists_with_different_*` status of the installed client falls through to REJECTED."""
    collisions = [s for s in S if s.name.startswith("EXISTS_WITH_DIFFERENT_")]
    assert collisions
    assert {map_transfer_status(s) for s in collisions} == {R.EXISTS_WITH_DIFFERENT_FIELDS}


def test_every_tigerbeetle_status_maps_to_a_port_result() -> None:
    """The whole enum of the installed client maps, so a new status cannot crash a worker."""
    assert all(isinstance(map_transfer_status(s), TransferResult) for s in S)


def test_id_burning_results_match_tigerbeetles_transient_set() -> None:
    """The PostgreSQL ledger burns an id exactly when TigerBeetle would."""
    assert {map_transfer_status(s) for s in (S.DEBIT_ACCOUNT_NOT_FOUND, S.CREDIT_ACCOUNT_NOT_FOUND,
                                             S.EXCEEDS_CREDITS, S.EXCEEDS_DEBITS,
                                             S.PENDING_TRANSFER_NOT_FOUND)} == set(
        ID_BURNING_RESULTS
    )  # fmt: skip


def test_transfer_carries_settlement_and_rate_in_user_data() -> None:
    """user_data_128 is the settlement hash; user_data_64 the rate * 10**9, exactly."""
    t = to_tb_transfer(TRANSFER)
    assert isinstance(t, tb.Transfer)
    assert (t.id, t.debit_account_id, t.credit_account_id, t.amount) == (7, 1, 2, 100)
    assert t.user_data_128 == settlement_ref("pi_1")
    assert t.user_data_64 == 1_080_000_001
    assert Decimal(t.user_data_64) / RATE_SCALE == TRANSFER.rate_at_payment
    assert (t.ledger, t.code, t.flags) == (15826, int(TransferCode.CAPTURE), tb.TransferFlags.NONE)


def test_merchant_account_flags() -> None:
    spec = AccountSpec(id=5, ledger=15826, code=AccountCode.MERCHANT,
                       debits_must_not_exceed_credits=True)  # fmt: skip
    account = to_tb_account(spec)
    assert account.flags == tb.AccountFlags.DEBITS_MUST_NOT_EXCEED_CREDITS
    assert (account.id, account.ledger, account.code) == (5, 15826, int(AccountCode.MERCHANT))


def test_a_tigerbeetle_balance_keeps_the_accounts_ledger_and_code() -> None:
    """Kind and currency survive as numbers on the account, for the operator's view."""
    account = to_tb_account(AccountSpec(id=5, ledger=15826, code=AccountCode.CLEARING))
    account.debits_posted, account.credits_posted = 700, 20
    assert balance_of(account) == Balance(5, 700, 20, ledger=15826, code=2)


@pytest.mark.parametrize(
    "changes",
    [{"id": 0}, {"id": ID_MAX}, {"debit_account_id": 0}, {"amount_minor": 0},
     {"rate_at_payment": Decimal("1.0000000001")}, {"rate_at_payment": Decimal(0)}],
)  # fmt: skip
def test_transfers_outside_tigerbeetles_ranges_cannot_be_built(changes: dict[str, object]) -> None:
    """Reserved ids, zero amounts and over-precise rates are refused before any I/O."""
    fields = {**TRANSFER.__dict__, **changes}
    with pytest.raises(ValueError):
        LedgerTransfer(**fields)
