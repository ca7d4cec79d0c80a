"""The netting step: a refund, reversal or chargeback against its payment's claims.

Runs between pricing and fixing pending (`Settler.settle_items`), for the items whose
amount is not fixed yet and that follow a payment. In one transaction, under each
payment's advisory lock: read the payments' claims, let `core.settlement.follow_ups.decide` say
what each item moves (in the batch's order, each seeing the ones before it), record
every claim, and store the items that move money as pending settlements with the
amount and the payment's rate, exactly as `fix_pending` stores a capture. An item that
nets to nothing (already moved by an overlapping event, or reversed before it came) is
decided as a duplicate: it moved nothing, and a redelivery finds its claim.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from gateway.adapters.postgres import Pool, transaction
from gateway.adapters.postgres import claims as claims_store
from gateway.adapters.postgres import settlements as store
from gateway.core.failures.excerpt import excerpt
from gateway.core.settlement.follow_ups import Payment, decide, exchange_difference
from gateway.core.settlement.instructions import SettlementKind
from gateway.errors import MissingField
from gateway.settlement.items import Priced, SettleOutcome, Triage

FOLLOW_UP_KINDS = tuple(k for k in SettlementKind if k.follows_payment)


def payment_of(row: store.SettlementRow, ledger_currency: str) -> Payment:
    """The netting terms of a settled capture: its amount, currency and rate."""
    if row.rate_at_payment is None:  # a settled capture always has one; say so if not
        raise MissingField(f"rate_at_payment of payment {excerpt(row.settlement_id)}")
    return Payment(row.settlement_id, row.amount_minor, row.currency, ledger_currency,
                   row.rate_at_payment)  # fmt: skip


async def net(pool: Pool, priced: Sequence[Priced]) -> Triage[Priced]:
    """The items not to net go on as they are; the netted ones go on stored, or are
    decided (moved nothing, or their permanent error)."""
    triage: Triage[Priced] = Triage()
    to_net = [p for p in priced if p.payment is not None and not p.stored]
    triage.go_on.extend(p for p in priced if p.payment is None or p.stored)
    if not to_net:
        return triage
    payments = [p.item.instruction.settlement_id for p in to_net]
    new_claims: list[claims_store.NewClaim] = []
    pending: list[store.PendingSettlement] = []
    async with transaction(pool) as conn:
        await claims_store.lock_payments(conn, payments)
        claims = await claims_store.claims_of(conn, payments, FOLLOW_UP_KINDS)
        for p in to_net:
            item, instruction = p.item, p.item.instruction
            try:
                terms = payment_of(p.payment, p.ledger_currency)  # type: ignore[arg-type]
                due = decide(claims[instruction.settlement_id], instruction, terms)
            except Exception as exc:  # the worker disposes of it
                triage.decided[item.index] = exc
                continue
            if due is None:  # told before: its claim is recorded
                triage.decided[item.index] = SettleOutcome.DUPLICATE
                continue
            claim = due.claim
            if p.current_rate is not None and due.moves:  # a converted payment's
                fx_minor = exchange_difference(
                    claims[instruction.settlement_id], claim, terms, p.current_rate
                )
                claim = dataclasses.replace(claim, fx_minor=fx_minor, current_rate=p.current_rate)
            claims[instruction.settlement_id].append(claim)
            provider = item.event.provider
            new_claim = claims_store.NewClaim(
                instruction.settlement_id,
                claim,
                item.tid,
                provider,
                instruction.source_event_id,
            )
            new_claims.append(new_claim)
            if not due.moves:
                triage.decided[item.index] = SettleOutcome.DUPLICATE
                continue
            moved = dataclasses.replace(instruction, amount_minor=due.claim.due_minor)
            ledger_minor = due.claim.ledger_due_minor
            pending.append(
                store.PendingSettlement(
                    moved,
                    item.tid,
                    provider,
                    p.merchant,
                    ledger_minor,
                    p.ledger_currency,
                    terms.rate,
                )
            )
            fx = (claim.fx_minor, p.current_rate) if claim.fx_minor and p.current_rate else None
            triage.go_on.append(Priced(item, p.merchant, ledger_minor, terms.rate,
                                       p.ledger_currency, stored=True, fx=fx))  # fmt: skip
        await store.fix_pending_many(conn, pending)
        await claims_store.record(conn, new_claims)
    return triage
