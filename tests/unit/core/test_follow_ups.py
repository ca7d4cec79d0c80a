"""Netting a payment's refunds, chargebacks and reversals (`core.settlement.follow_ups`): what each
claim moves, and that every arrival order ends in the same balance. Table-driven."""

from __future__ import annotations

import itertools
from decimal import Decimal

import pytest

from gateway.core.ledger.ids import FX_OWNER, clearing_account_id
from gateway.core.money import convert_minor
from gateway.core.settlement.follow_ups import (
    Claim,
    Payment,
    Pool,
    decide,
    exchange_difference,
    held,
    target,
)
from gateway.core.settlement.instructions import SettlementInstruction, SettlementKind, fx_transfer
from gateway.errors import ExceedsPayment, LedgerIdCollision, PaymentMismatch

K = SettlementKind
USD_PAYMENT = Payment("pi_1", 5000, "USD", "USD", Decimal(1))
EUR_PAYMENT = Payment("pi_1", 10_000, "EUR", "USD", Decimal("1.08"))


def claim(kind: SettlementKind, key: str, amount: int, *, total: bool = False,
          currency: str = "USD") -> SettlementInstruction:  # fmt: skip
    return SettlementInstruction("pi_1", kind, None, amount, currency, key, None, total)


def total(amount: int, currency: str = "USD") -> SettlementInstruction:
    """Stripe's `charge.refunded`: the running total, keyed by itself."""
    return claim(K.REFUND, f"refunded:{amount}", amount, total=True, currency=currency)


def settle(order: list[SettlementInstruction], payment: Payment) -> tuple[int, list[int]]:
    """Apply the claims in `order`; the merchant's ledger balance and each one's move."""
    claims: list[Claim] = []
    balance = convert_minor(payment.captured_minor, payment.rate, payment.currency, "USD")
    moves = []
    for instruction in order:
        due = decide(claims, instruction, payment)
        if due is None:
            moves.append(0)
            continue
        claims.append(due.claim)
        sign = 1 if instruction.kind.to_merchant else -1
        balance += sign * due.claim.ledger_due_minor
        moves.append(due.claim.ledger_due_minor)
    return balance, moves


# Each case: the claims in their natural order, the merchant's balance after all of them,
# and what each claim moves in that order.
CASES = {
    # The reproduction: today's Stripe shape, two partial refunds (capture 5000).
    "partial refunds by running total": (
        [total(1000), total(3000)], USD_PAYMENT, 2000, [1000, 2000],
    ),
    "three partials, old shape or new": (
        [total(1000), total(3000), total(3500)], USD_PAYMENT, 1500, [1000, 2000, 500],
    ),
    "refund.* and charge.refunded for the same refunds move them once": (
        [claim(K.REFUND, "re_1", 1000), total(1000), claim(K.REFUND, "re_2", 2000),
         total(3000)],
        USD_PAYMENT, 2000, [1000, 0, 2000, 0],
    ),
    "a running total ahead of the refunds seen one by one": (
        [total(3000), claim(K.REFUND, "re_1", 1000), claim(K.REFUND, "re_2", 2000)],
        USD_PAYMENT, 2000, [3000, 0, 0],
    ),
    "a failed refund comes back": (
        [claim(K.REFUND, "re_1", 1000), claim(K.REFUND_REVERSAL, "re_1", 1000)],
        USD_PAYMENT, 5000, [1000, 1000],
    ),
    "a failed refund after its running total": (
        [total(1000), claim(K.REFUND, "re_1", 1000), claim(K.REFUND_REVERSAL, "re_1", 1000)],
        USD_PAYMENT, 5000, [1000, 0, 1000],
    ),
    "a chargeback and its reversal": (
        [claim(K.CHARGEBACK, "dp_1", 5000), claim(K.CHARGEBACK_REVERSAL, "dp_1", 5000)],
        USD_PAYMENT, 5000, [5000, 5000],
    ),
    "a refund and a chargeback of the rest": (
        [total(2000), claim(K.CHARGEBACK, "dp_1", 3000)], USD_PAYMENT, 0, [2000, 3000],
    ),
    # EUR 100.00 at 1.08 credited USD 108.00; the refunds go back at 1.08 whatever the
    # rate is today, and the cents of three partials add up to the capture exactly.
    "a converted payment refunded in three parts comes back to zero exactly": (
        [total(3333, "EUR"), total(6666, "EUR"), total(10_000, "EUR")], EUR_PAYMENT, 0,
        [3600, 3599, 3601],
    ),
}  # fmt: skip


@pytest.mark.parametrize(("order", "payment", "balance", "moves"), CASES.values(), ids=CASES)
def test_each_claim_moves_what_the_pool_is_owed_beyond_what_it_holds(
    order: list[SettlementInstruction], payment: Payment, balance: int, moves: list[int]
) -> None:
    assert settle(order, payment) == (balance, moves)


@pytest.mark.parametrize(("order", "payment", "balance", "moves"), CASES.values(), ids=CASES)
def test_every_arrival_order_ends_in_the_same_balance(
    order: list[SettlementInstruction], payment: Payment, balance: int, moves: list[int]
) -> None:
    for shuffled in itertools.permutations(order):
        assert settle(list(shuffled), payment)[0] == balance, shuffled


def test_a_repeat_moves_nothing_and_a_changed_amount_is_a_collision() -> None:
    first = decide([], claim(K.REFUND, "re_1", 1000), USD_PAYMENT)
    assert first is not None
    assert decide([first.claim], claim(K.REFUND, "re_1", 1000), USD_PAYMENT) is None
    with pytest.raises(LedgerIdCollision, match="'re_1' of payment 'pi_1' was recorded as 1000"):
        decide([first.claim], claim(K.REFUND, "re_1", 1200), USD_PAYMENT)


@pytest.mark.parametrize(
    "instruction",
    [claim(K.REFUND, "re_1", 5001), total(5001), claim(K.CHARGEBACK, "dp_1", 5001)],
    ids=["refund", "running total", "chargeback"],
)
def test_a_claim_larger_than_the_capture_is_refused(instruction: SettlementInstruction) -> None:
    with pytest.raises(ExceedsPayment, match="is more than payment 'pi_1''s capture of 5000 USD"):
        decide([], instruction, USD_PAYMENT)


def test_claims_that_together_pass_the_capture_still_post() -> None:
    """A refund and a chargeback of most of the payment each: the merchant goes below
    zero rather than the balance depending on which came first."""
    balance, moves = settle([total(4000), claim(K.CHARGEBACK, "dp_1", 4000)], USD_PAYMENT)
    assert (balance, moves) == (-3000, [4000, 4000])


def test_another_currency_than_the_payments_is_refused() -> None:
    with pytest.raises(PaymentMismatch, match="is in USD; payment 'pi_1' was captured in EUR"):
        decide([], claim(K.REFUND, "re_1", 100), EUR_PAYMENT)


def test_a_reversal_before_what_it_reverses_is_recorded_and_moves_nothing() -> None:
    early = decide([], claim(K.CHARGEBACK_REVERSAL, "dp_1", 900), USD_PAYMENT)
    assert early is not None and not early.moves
    late = decide([early.claim], claim(K.CHARGEBACK, "dp_1", 900), USD_PAYMENT)
    assert late is not None and not late.moves


def test_targets_and_holdings_per_pool() -> None:
    claims = [
        Claim(K.REFUND, "re_1", 1000, "USD", False, 1000, 1080),
        Claim(K.REFUND, "refunded:2500", 2500, "USD", True, 1500, 1620),
        Claim(K.CHARGEBACK, "dp_1", 700, "USD", False, 700, 756),
        Claim(K.REFUND_REVERSAL, "re_1", 1000, "USD", False, 1000, 1080),
    ]
    assert target(claims, Pool.REFUNDS) == 1500  # the total less the failed refund
    assert target(claims, Pool.DISPUTES) == 700
    assert held(claims, Pool.REFUNDS) == (1500, 1620)
    assert held(claims, Pool.DISPUTES) == (700, 756)


def test_a_tiny_claim_of_a_converted_payment_waits_for_a_cent() -> None:
    """One JPY at 0.004 is less than a cent: recorded, nothing posted; the next refund
    posts both, so no cent is lost to rounding."""
    payment = Payment("pi_1", 10_000, "JPY", "USD", Decimal("0.004"))
    first = decide([], claim(K.REFUND, "re_1", 1, currency="JPY"), payment)
    assert first is not None and (first.claim.due_minor, first.moves) == (1, False)
    second = decide([first.claim], claim(K.REFUND, "re_2", 100, currency="JPY"), payment)
    assert second is not None
    assert second.claim.ledger_due_minor == convert_minor(101, payment.rate, "JPY", "USD")


@pytest.mark.parametrize(
    ("rate_now", "refunds", "fx_total"),
    [
        ("1.20", [10_000], 1_200),  # EUR 100.00 back at 1.20 cost USD 12.00 more
        ("1.20", [3333, 3333, 3334], 1_200),  # in parts: exactly the same, no cent lost
        ("1.00", [5_000, 5_000], -800),  # the euro fell: the platform gains USD 8.00
        ("1.08", [2_500], 0),  # the rate did not move
    ],
)
def test_the_exchange_difference_of_refunds_is_cumulative_and_exact(
    rate_now: str, refunds: list[int], fx_total: int
) -> None:
    """Refunds of EUR 100.00 captured at 1.08: the merchant gives back at 1.08; what the
    refunds are worth at today's rate less that is the FX account's, summing to the
    single refund's difference however the refund is split."""
    claims: list[Claim] = []
    found = 0
    for n, amount in enumerate(refunds):
        due = decide(claims, claim(K.REFUND, f"re_{n}", amount, currency="EUR"), EUR_PAYMENT)
        assert due is not None
        found += exchange_difference(claims, due.claim, EUR_PAYMENT, Decimal(rate_now))
        claims.append(due.claim)
    assert found == fx_total


@pytest.mark.parametrize(
    ("kind", "fx_minor", "fx_pays"),
    [
        (K.REFUND, 1_200, True),  # money out cost more today: the FX account pays
        (K.REFUND, -800, False),  # it cost less: the FX account gains
        (K.CHARGEBACK, 50, True),
        (K.REFUND_REVERSAL, 1_200, False),  # money back in is worth more: a gain
        (K.CHARGEBACK_REVERSAL, -30, True),
    ],
)
def test_the_fx_transfer_moves_between_clearing_and_the_fx_account(
    kind: SettlementKind, fx_minor: int, fx_pays: bool
) -> None:
    instruction = claim(kind, "x_1", 100, currency="EUR")
    t = fx_transfer(instruction, provider="stripe", ledger_currency="USD", fx_minor=fx_minor,
                    current_rate=Decimal("1.2"))  # fmt: skip
    fx, clearing = clearing_account_id(FX_OWNER, "USD"), clearing_account_id("stripe", "USD")
    expected = (fx, clearing) if fx_pays else (clearing, fx)
    assert (t.debit_account_id, t.credit_account_id) == expected
    assert t.amount_minor == abs(fx_minor) and t.rate_at_payment == Decimal("1.2")
