"""What a refund, a chargeback or their reversal moves: the payment's claims, netted.

Pure. Every movement that follows a captured payment is a *claim* on one of the
payment's two pools: refunds (refund, refund reversal) and disputes (chargeback,
chargeback reversal). A pool is owed a *target*; what a new claim moves is the target's
change beyond what the pool already holds, so the same money is never moved twice
however the claims overlap or arrive:

- refunds: `max(sum of the refunds known by their own id, the largest running total
  seen) - the refunds reversed`, where a reversed refund drops out of the first sum;
  Stripe's `charge.refunded` (a running total) and its `refund.*` events (one refund
  each) are claims on the same pool, and whichever arrives first moves the money;
- disputes: the sum of the chargebacks not reversed.

A reversal that arrives before what it reverses is recorded as a claim and moves
nothing; the original then finds itself reversed and moves nothing either, so every
arrival order ends in the same balances (docs/concepts.md, "Money movements").

The ledger amount is the pool's target converted at the *payment's* rate, minus what the
pool's transfers already moved, so a full refund of a converted payment returns the
merchant exactly to where it was before the payment, whatever the rate did since, and
rounding never leaves a cent behind over several partial refunds.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from dataclasses import replace as dataclass_replace
from decimal import Decimal

from gateway.core.failures.excerpt import excerpt
from gateway.core.money import convert_minor
from gateway.core.settlement.instructions import SettlementInstruction, SettlementKind
from gateway.errors import ExceedsPayment, InvalidAmount, LedgerIdCollision, PaymentMismatch

_K = SettlementKind


class Pool(enum.StrEnum):
    """The payment's pools: each nets its own claims."""

    REFUNDS = "refunds"
    DISPUTES = "disputes"


#: Each follow-up kind's pool, and whether it adds to the pool (+1) or takes back (-1).
_POOLS: dict[SettlementKind, tuple[Pool, int]] = {
    _K.REFUND: (Pool.REFUNDS, 1),
    _K.REFUND_REVERSAL: (Pool.REFUNDS, -1),
    _K.CHARGEBACK: (Pool.DISPUTES, 1),
    _K.CHARGEBACK_REVERSAL: (Pool.DISPUTES, -1),
}


def pool_of(kind: SettlementKind) -> tuple[Pool, int]:
    """The pool a follow-up kind claims on, and its sign; ValueError for a capture."""
    try:
        return _POOLS[kind]
    except KeyError:
        raise ValueError(f"a {kind.value} claims on no pool") from None


@dataclass(frozen=True)
class Claim:
    """One follow-up as recorded for its payment, with what it moved."""

    kind: SettlementKind
    key: str  # the movement's own id (`refunded:TOTAL` for a running total)
    amount_minor: int  # its own amount, or the running total; the payment's currency
    currency: str
    cumulative: bool
    due_minor: int  # what it moved, in the payment's currency (0: nothing)
    ledger_due_minor: int  # what its transfer moved, in the ledger's currency (0: none)
    #: What `due_minor` is worth at today's rate less `ledger_due_minor` (what it moved
    #: at the payment's rate): the exchange result, posted to the FX account.
    fx_minor: int = 0
    current_rate: Decimal | None = None  # the rate `fx_minor` was found at


@dataclass(frozen=True)
class Payment:
    """The captured payment a follow-up belongs to, as its capture fixed it."""

    settlement_id: str
    captured_minor: int
    currency: str
    ledger_currency: str
    rate: Decimal  # `rate_at_payment`


@dataclass(frozen=True)
class Due:
    """What a new claim moves: in the payment's currency and in the ledger's."""

    claim: Claim

    @property
    def moves(self) -> bool:
        """Whether a transfer is posted (a claim netted to nothing moves nothing)."""
        return self.claim.ledger_due_minor > 0


def target(claims: Iterable[Claim], pool: Pool) -> int:
    """What the pool is owed by `claims`, in the payment's currency (never below 0)."""
    mine = [c for c in claims if _POOLS[c.kind][0] is pool]
    if pool is Pool.DISPUTES:
        reversed_keys = {c.key for c in mine if c.kind is _K.CHARGEBACK_REVERSAL}
        owed = sum(
            c.amount_minor for c in mine if c.kind is _K.CHARGEBACK and c.key not in reversed_keys
        )
        return max(0, owed)
    reversals = [c for c in mine if c.kind is _K.REFUND_REVERSAL]
    reversed_keys = {c.key for c in reversals}
    by_id = sum(
        c.amount_minor
        for c in mine
        if c.kind is _K.REFUND and not c.cumulative and c.key not in reversed_keys
    )
    totals = [c.amount_minor for c in mine if c.kind is _K.REFUND and c.cumulative]
    running = max(totals, default=0) - sum(c.amount_minor for c in reversals)
    return max(0, by_id, running)


def held(claims: Iterable[Claim], pool: Pool) -> tuple[int, int]:
    """What the pool's claims moved so far: (payment currency, ledger currency)."""
    amount = ledger = 0
    for c in claims:
        claim_pool, sign = _POOLS[c.kind]
        if claim_pool is pool:
            amount += sign * c.due_minor
            ledger += sign * c.ledger_due_minor
    return amount, ledger


def decide(
    claims: Sequence[Claim], instruction: SettlementInstruction, payment: Payment
) -> Due | None:
    """What `instruction` moves, given the payment's recorded `claims`; None when it is
    recorded already (a redelivery, or the same refund told again), so it moves nothing.

    Raises `PaymentMismatch` for another currency than the payment's,
    `LedgerIdCollision` for a movement id recorded with another amount, and
    `ExceedsPayment` for a claim larger than the payment's capture.
    """
    kind, key = instruction.kind, instruction.key
    pool, sign = pool_of(kind)
    if instruction.currency != payment.currency:
        raise PaymentMismatch(
            f"{kind.value} {excerpt(key)} is in {instruction.currency}; payment "
            f"{excerpt(payment.settlement_id)} was captured in {payment.currency}"
        )
    for c in claims:
        if c.kind is kind and c.key == key:
            if c.amount_minor != instruction.amount_minor:
                raise LedgerIdCollision(
                    f"{kind.value} {excerpt(key)} of payment {excerpt(payment.settlement_id)} "
                    f"was recorded as {c.amount_minor} {c.currency}; this event says "
                    f"{instruction.amount_minor} {instruction.currency}"
                )
            return None
    if instruction.amount_minor > payment.captured_minor:
        # Judged on the claim alone: a sum of claims may pass the capture for a while
        # when a reversal is still on its way, and refusing it would make the balance
        # depend on the order of arrival.
        raise ExceedsPayment(
            f"{kind.value} {excerpt(key)} of {instruction.amount_minor} {payment.currency} "
            f"is more than payment {excerpt(payment.settlement_id)}'s capture of "
            f"{payment.captured_minor} {payment.currency}"
        )
    draft = Claim(kind, key, instruction.amount_minor, instruction.currency,
                  instruction.cumulative, 0, 0)  # fmt: skip
    owed = target([*claims, draft], pool)
    held_minor, held_ledger = held(claims, pool)
    due = max(0, sign * (owed - held_minor))
    ledger_target = _convert(owed, payment)
    # What moved in the payment's currency decides whether anything moves at all, so the
    # ledger's share of a claim that moved nothing stays with the pool for later.
    ledger_due = max(0, sign * (ledger_target - held_ledger)) if due else 0
    return Due(Claim(kind, key, instruction.amount_minor, instruction.currency,
                     instruction.cumulative, due, ledger_due))  # fmt: skip


def _convert(amount_minor: int, payment: Payment) -> int:
    """`amount_minor` of the payment's currency at its own rate (0 for nothing)."""
    if amount_minor == 0:
        return 0
    try:
        return convert_minor(amount_minor, payment.rate, payment.currency, payment.ledger_currency)
    except InvalidAmount:
        # A target is at most the capture, which converted to at least one minor unit,
        # so this is a small target rounding to nothing: nothing is owed in the ledger yet.
        return 0


def exchange_difference(
    claims: Sequence[Claim], claim: Claim, payment: Payment, current_rate: Decimal
) -> int:
    """What `claim`'s movement is worth at `current_rate` less what it moved at the
    payment's rate, in the ledger's currency (0 for a claim that moved nothing): a
    refund of a payment whose currency rose since costs the platform the difference.

    Cumulative like the movement itself (`claims`: the payment's claims before it), so
    partial refunds at one rate come to exactly the difference of a single refund."""
    if claim.due_minor == 0:
        return 0
    pool, sign = pool_of(claim.kind)
    before, _ = held(claims, pool)
    after = before + sign * claim.due_minor
    today = dataclass_replace(payment, rate=current_rate)
    now = abs(_convert(max(after, 0), today) - _convert(max(before, 0), today))
    return now - claim.ledger_due_minor
