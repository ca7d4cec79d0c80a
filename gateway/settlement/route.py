"""Step 1 continued: each looked-up item against what is stored. A repeat must say what
the first event said; a settled one is a duplicate; a capture, authorisation or void is
routed by its payment's phases (`settlement.two_phase`); a refund waits for its payment;
everything else goes on with the merchant it posts for.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal

from gateway.adapters.postgres import claims as claims_store
from gateway.adapters.postgres import settlements as store
from gateway.core.failures.excerpt import excerpt
from gateway.core.settlement.instructions import (
    SettlementInstruction,
    SettlementKind,
    SettlementState,
    merchant_to_post,
)
from gateway.errors import LedgerIdCollision, PaymentNotSettled
from gateway.settlement import two_phase
from gateway.settlement.items import Item, Routed, SettleOutcome, Triage
from gateway.settlement.steps import Found


def route(items: Sequence[Item], found: Found, *, alone: bool) -> Triage[Routed]:
    """Each item against what is stored: a repeat must say what the first event said
    (`check_same`); settled already is a duplicate; else the merchant to post for."""
    triage: Triage[Routed] = Triage()
    # One movement per two-phase payment in a batch: an authorisation and its capture or
    # void decide on each other's rows, so the later ones settle alone, after it.
    phased = {i.instruction.settlement_id for i in items if i.instruction.kind.two_phase}
    seen: set[str] = set()
    for item in items:
        row = found.rows.get(item.tid)
        kind = item.instruction.kind
        phased_here = kind in two_phase.PHASED and item.instruction.settlement_id in phased
        if phased_here and not alone:
            if item.instruction.settlement_id in seen:
                triage.alone.append(item)
                continue
            seen.add(item.instruction.settlement_id)
        try:
            follow_up = kind.follows_payment
            if row is not None:
                if follow_up:  # its row holds what it netted to; its claim what it said
                    check_claimed(found.claimed.get(item.tid), item.instruction)
                elif kind is not SettlementKind.VOID:  # a void's row holds its auth's
                    check_same(row, item.instruction)
                if row.state is SettlementState.SETTLED:
                    triage.decided[item.index] = SettleOutcome.DUPLICATE
                    continue
                if not alone:  # started before: settled alone, with its own amount and rate
                    triage.alone.append(item)
                    continue
            paid = item.instruction.settlement_id
            if kind.two_phase or (
                kind is SettlementKind.CAPTURE and two_phase.authorised(found.rows, paid)
            ):
                decided = two_phase.routed(item, found.rows, _fixed(row), alone=alone)
                if decided is None:
                    triage.alone.append(item)
                elif isinstance(decided, Exception):
                    triage.decided[item.index] = decided
                else:
                    triage.go_on.append(decided)
                continue
            capture = found.captures.get(item.instruction.settlement_id)
            settled_merchant = capture.settled_merchant if capture else None
            merchant = merchant_to_post(item.instruction, settled_merchant)
        except Exception as exc:
            triage.decided[item.index] = exc
            continue
        if merchant is not None:
            payment = capture if follow_up else None
            fx = _fx(found.claimed.get(item.tid)) if row is not None else None
            triage.go_on.append(Routed(item, merchant, _fixed(row), payment, fx=fx))
        elif alone:
            # The payment's event may still be on its way: transient, DLQ after the schedule.
            triage.decided[item.index] = PaymentNotSettled(
                f"{item.instruction.kind.value} of {excerpt(item.instruction.settlement_id)} "
                "before its payment settled"
            )
        else:  # its payment may settle earlier in this batch: settled alone after it
            triage.alone.append(item)
    return triage


def _fixed(row: store.SettlementRow | None) -> tuple[int, Decimal] | None:
    if row is None or not row.ledger_amount_minor or not row.rate_at_payment:
        return None
    return row.ledger_amount_minor, row.rate_at_payment


def _fx(claimed: claims_store.Claimed | None) -> tuple[int, Decimal] | None:
    if claimed is None or not claimed.fx_minor or claimed.current_rate is None:
        return None
    return claimed.fx_minor, claimed.current_rate


def check_claimed(claimed: claims_store.Claimed | None, instruction: SettlementInstruction) -> None:
    """A repeat of a refund or dispute must claim what it claimed the first time."""
    if claimed is not None and claimed.amount_minor != instruction.amount_minor:
        raise LedgerIdCollision(
            f"{instruction.kind.value} {excerpt(instruction.key)} of payment "
            f"{excerpt(instruction.settlement_id)} was recorded as {claimed.amount_minor} "
            f"{instruction.currency}; this event says {instruction.amount_minor}"
        )


def check_same(existing: store.SettlementRow, instruction: SettlementInstruction) -> None:
    """A second event for a settlement must say the same thing as the first.

    The transfer id comes from the settlement id alone, so a repeat with another amount,
    currency or merchant would otherwise be waved through as a duplicate; it is a data
    problem someone has to look at, and it is raised as the critical id collision. So is
    a second capture of one payment under another capture id (a partial capture the
    ledger keys by its payment): equal amounts would otherwise hide it as a repeat.
    """
    same = (
        existing.amount_minor == instruction.amount_minor
        and existing.currency == instruction.currency
        and (instruction.merchant_id is None or existing.merchant_id == instruction.merchant_id)
        and (
            existing.refund_id is None
            or instruction.refund_id is None
            or existing.refund_id == instruction.refund_id
        )
    )
    if not same:
        merchant = None if instruction.merchant_id is None else excerpt(instruction.merchant_id)
        raise LedgerIdCollision(
            f"settlement {excerpt(instruction.key)} was recorded as {existing.amount_minor} "
            f"{existing.currency} for {excerpt(existing.merchant_id)}"
            + ("" if existing.refund_id is None else f" by {excerpt(existing.refund_id)}")
            + f"; this event says {instruction.amount_minor} {instruction.currency} for "
            f"{merchant}"
        )
