"""Settlement instructions: what an event asks the ledger to do, and the ids it will use.

Pure. The mappings (`core.providers`, one module per provider) turn an event into a
`SettlementInstruction` (or None when its type does not settle); ids are derived
deterministically, so
the same settlement always maps to the same transfer and accounts, whichever worker or
delivery handles it. Amounts leave the mappings in ISO 4217 minor units, whatever
the provider's own convention (`core.money.from_provider_minor`); conversion between
currencies lives in `core.money` too.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from decimal import Decimal

from gateway.core.ledger.ids import (
    FX_OWNER,
    authorisation_transfer_id,
    capture_transfer_id,
    clearing_account_id,
    fees_owner,
    fx_transfer_id,
    ledger_number,
    merchant_account_id,
    movement_transfer_id,
    payouts_owner,
)
from gateway.core.ledger.port import (
    LedgerTransfer,
    TransferCode,
    TransferPhase,
)
from gateway.core.money import check_amount, check_currency, held_as, quantize_rate
from gateway.errors import MissingField


class SettlementKind(enum.StrEnum):
    """A money movement, as stored in `settlements.kind` (docs/concepts.md, "Money
    movements"). A capture pays the merchant; every other kind follows a captured
    payment and is posted at that payment's rate."""

    CAPTURE = "capture"
    REFUND = "refund"
    #: A refund that failed or was cancelled after it was taken: the money goes back.
    REFUND_REVERSAL = "refund_reversal"
    #: Funds the provider withdrew for a dispute.
    CHARGEBACK = "chargeback"
    #: A dispute's funds reinstated (the dispute was won or withdrawn).
    CHARGEBACK_REVERSAL = "chargeback_reversal"
    #: Money paid out to the merchant: from its account to the source's payouts account.
    PAYOUT = "payout"
    #: An operator's correcting entry (`gateway ledger adjust`): to the merchant, or from.
    CREDIT_ADJUSTMENT = "credit_adjustment"
    DEBIT_ADJUSTMENT = "debit_adjustment"
    #: A payment authorised, not captured: its amount reserved for the merchant (a
    #: pending transfer), moved by the capture, released by a void.
    AUTHORISATION = "authorisation"
    #: An authorisation cancelled or expired before its capture: the reservation released.
    VOID = "void"
    #: The fee the provider charged for a dispute: from the merchant to the source's fees
    #: account, at today's rate; told with the chargeback (`SettlementInstruction.fee`).
    DISPUTE_FEE = "dispute_fee"
    #: A dispute fee returned (the dispute won, where the provider returns it).
    DISPUTE_FEE_REVERSAL = "dispute_fee_reversal"

    @property
    def two_phase(self) -> bool:
        """An authorisation or a void: keyed by its payment, posted as a pending
        transfer or its void (`gateway.settlement.two_phase`)."""
        return self in (SettlementKind.AUTHORISATION, SettlementKind.VOID)

    @property
    def follows_payment(self) -> bool:
        """Refunds, chargebacks and their reversals move money of a payment captured
        before (`core.settlement.follow_ups` nets them against it)."""
        return self in _FOLLOW_UPS

    @property
    def of_payment(self) -> bool:
        """Belongs to a payment and takes its merchant: the follow-ups and the dispute
        fees (which are not netted: a fee is owed whatever the dispute's netting)."""
        return self.follows_payment or self in _FEES

    @property
    def balance_sign(self) -> int:
        """What it does to the merchant's balance: +1 money in, -1 money out, 0 for an
        authorisation or void (a reservation is not in the balance)."""
        if self.two_phase:
            return 0
        return 1 if self in _TO_MERCHANT else -1

    @property
    def to_merchant(self) -> bool:
        """The direction: a capture and the reversals credit the merchant."""
        return self in _TO_MERCHANT


_TO_MERCHANT = frozenset(
    {
        SettlementKind.CAPTURE,
        SettlementKind.REFUND_REVERSAL,
        SettlementKind.CHARGEBACK_REVERSAL,
        SettlementKind.CREDIT_ADJUSTMENT,
        SettlementKind.AUTHORISATION,
        SettlementKind.VOID,
        SettlementKind.DISPUTE_FEE_REVERSAL,
    }
)
_FEES = frozenset({SettlementKind.DISPUTE_FEE, SettlementKind.DISPUTE_FEE_REVERSAL})
_FOLLOW_UPS = frozenset(
    {
        SettlementKind.REFUND,
        SettlementKind.REFUND_REVERSAL,
        SettlementKind.CHARGEBACK,
        SettlementKind.CHARGEBACK_REVERSAL,
    }
)


class SettlementState(enum.StrEnum):
    """Where a settlement stands, as stored in `settlements.state`."""

    PENDING = "pending"
    SETTLED = "settled"
    FAILED = "failed"


@dataclass(frozen=True)
class SettlementInstruction:
    """One money movement to post, in the event's own currency, in ISO minor units."""

    settlement_id: str  # the payment's id; every other kind names the payment it follows
    kind: SettlementKind
    #: None only for a movement that does not repeat the merchant: it is taken from the
    #: settled payment, which the worker must look up anyway.
    merchant_id: str | None
    amount_minor: int  # ISO 4217 minor units of `currency`, not the provider's
    currency: str  # upper-case code
    #: The movement's own id (the refund's, the dispute's); None for a capture. Stored in
    #: `settlements.refund_id`.
    refund_id: str | None
    source_event_id: str | None
    #: `amount_minor` is the payment's running total of this kind, not one movement's
    #: amount (Stripe's `charge.refunded` since API version 2022-11-15 says only how much
    #: of the charge is refunded so far): what moves is the increase over what the
    #: ledger holds (`core.settlement.follow_ups`).
    cumulative: bool = False
    #: The dispute fee (or its return) told with a chargeback (or its reversal): settled
    #: as its own movement just before it, whatever the chargeback's netting moves.
    fee: SettlementInstruction | None = None

    def __post_init__(self) -> None:
        # An amount in tomans (`IRT`) becomes rials here, once, whichever provider
        # read it: the ledger, the conversions and the records only ever see IRR.
        amount, currency = held_as(self.amount_minor, self.currency)
        if currency != self.currency:
            object.__setattr__(self, "amount_minor", amount)
            object.__setattr__(self, "currency", currency)
        if self.kind is not SettlementKind.CAPTURE and not self.refund_id:
            raise ValueError(f"a {self.kind.value} needs its own id")
        if self.kind.two_phase and self.refund_id != self.settlement_id:
            raise ValueError(f"a {self.kind.value} is keyed by its payment")

    @property
    def key(self) -> str:
        """The movement's own id; the payment id for a capture."""
        return self.refund_id if self.refund_id is not None else self.settlement_id


def with_fee(
    instruction: SettlementInstruction, fee_minor: int, currency: str
) -> SettlementInstruction:
    """A chargeback told with the dispute fee the provider charged (a chargeback
    reversal with the fee it returned), in minor units of `currency`; 0 is no fee."""
    if fee_minor == 0:
        return instruction
    if instruction.kind is SettlementKind.CHARGEBACK:
        kind = SettlementKind.DISPUTE_FEE
    elif instruction.kind is SettlementKind.CHARGEBACK_REVERSAL:
        kind = SettlementKind.DISPUTE_FEE_REVERSAL
    else:
        raise ValueError(f"a {instruction.kind.value} carries no dispute fee")
    fee = replace(instruction, kind=kind, amount_minor=check_amount(fee_minor, "dispute fee"),
                  currency=check_currency(currency), cumulative=False, fee=None)  # fmt: skip
    return replace(instruction, fee=fee)


def merchant_to_post(
    instruction: SettlementInstruction, settled_payment_merchant: str | None
) -> str | None:
    """The merchant whose account the transfer moves money for.

    A capture names its merchant (`MissingField` otherwise). Every other movement
    belongs to the merchant of the payment it follows, and only once that payment has
    settled: `settled_payment_merchant` is that payment's merchant then, None before.
    None comes back for a movement whose payment has not settled; the caller decides
    whether to wait.
    """
    if instruction.kind.of_payment:
        if settled_payment_merchant is None:
            return None
        return instruction.merchant_id or settled_payment_merchant
    if not instruction.merchant_id:
        raise MissingField("merchant_id")
    return instruction.merchant_id


# --- transfers ---------------------------------------------------------------------------


def transfer_id(instruction: SettlementInstruction) -> int:
    """The transfer's id: the same movement always gets the same id (a capture by its
    payment, any other kind by its payment, kind and own id)."""
    if instruction.kind is not SettlementKind.CAPTURE:
        return movement_transfer_id(
            instruction.kind.value, instruction.settlement_id, instruction.key
        )
    return capture_transfer_id(instruction.settlement_id)


def fx_transfer(
    instruction: SettlementInstruction,
    *,
    provider: str,
    ledger_currency: str,
    fx_minor: int,
    current_rate: Decimal,
) -> LedgerTransfer:
    """The exchange difference of a follow-up posted at its payment's rate, between the
    provider's clearing account and the FX account, at `current_rate` (recorded).

    `fx_minor` is what the movement is worth today less what it moved (a loss for the
    platform when positive on money going out). The clearing account ends as if the
    movement had been valued at today's rate; the merchant is untouched.
    """
    fx = clearing_account_id(FX_OWNER, ledger_currency)
    clearing = clearing_account_id(provider, ledger_currency)
    fx_pays = (fx_minor > 0) == (instruction.kind.balance_sign < 0)
    return LedgerTransfer(
        id=fx_transfer_id(instruction.kind.value, instruction.settlement_id, instruction.key),
        debit_account_id=fx if fx_pays else clearing,
        credit_account_id=clearing if fx_pays else fx,
        amount_minor=check_amount(abs(fx_minor), "exchange difference"),
        ledger=ledger_number(ledger_currency),
        code=TransferCode.FX_DIFFERENCE,
        settlement_id=instruction.settlement_id,
        rate_at_payment=quantize_rate(current_rate),
    )


def counterparty(kind: SettlementKind, source: str) -> str:
    """The owner of the account on the other side of the merchant's for `kind`."""
    if kind is SettlementKind.PAYOUT:
        return payouts_owner(source)
    if kind in _FEES:
        return fees_owner(source)
    return source


def build_transfer(
    instruction: SettlementInstruction,
    *,
    provider: str,
    ledger_currency: str,
    amount_minor: int,
    rate_at_payment: Decimal,
    merchant_id: str | None = None,
    authorised: bool = False,
) -> LedgerTransfer:
    """The ledger transfer for `instruction`, already converted to `ledger_currency`.

    Capture and the reversals: clearing → merchant. Refund and chargeback: merchant →
    clearing. Payout: merchant → the source's payouts account. `merchant_id` overrides
    the instruction's (needed when the event does not name the merchant).

    An authorisation is a pending capture; a void voids it; a capture that is
    `authorised` posts it (`amount_minor` at most what it reserved). The three share
    the capture's code, as TigerBeetle requires of a pending transfer's post and void.
    """
    merchant = merchant_id or instruction.merchant_id
    if not merchant:
        raise MissingField("merchant_id")
    check_amount(amount_minor, "converted amount")  # positive, within the ledgers' range
    clearing = clearing_account_id(counterparty(instruction.kind, provider), ledger_currency)
    merchant_acct = merchant_account_id(merchant, ledger_currency)
    to_merchant = instruction.kind.to_merchant
    kind = instruction.kind
    phase, pending_id = TransferPhase.SINGLE, 0
    if kind is SettlementKind.AUTHORISATION:
        phase = TransferPhase.PENDING
    elif kind is SettlementKind.VOID or (kind is SettlementKind.CAPTURE and authorised):
        phase = TransferPhase.VOID if kind is SettlementKind.VOID else TransferPhase.POST
        pending_id = authorisation_transfer_id(instruction.settlement_id)
    return LedgerTransfer(
        id=transfer_id(instruction),
        debit_account_id=clearing if to_merchant else merchant_acct,
        credit_account_id=merchant_acct if to_merchant else clearing,
        amount_minor=amount_minor,
        ledger=ledger_number(ledger_currency),
        code=TransferCode.CAPTURE if kind.two_phase else TransferCode[kind.name],
        settlement_id=instruction.settlement_id,
        rate_at_payment=quantize_rate(rate_at_payment),
        phase=phase,
        pending_id=pending_id,
    )
