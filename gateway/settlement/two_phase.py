"""Authorisations and voids, and the captures that post what an authorisation reserved.

The capture's side needs no lock: `look_up` reads the payment's authorisation and void
with the capture's own row, and `routed` asks `core.settlement.two_phase.capture_step`. An
authorisation or a void is decided under its payment's advisory lock (`reserve`, run
after pricing, like netting): it reads what the payment recorded, decides, and stores
its pending settlement row, or records that it moved nothing (a claim, so that a
redelivery and `gateway reconcile` find it), in one transaction.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from decimal import Decimal

from gateway.adapters.postgres import Pool, transaction
from gateway.adapters.postgres import claims as claims_store
from gateway.adapters.postgres import settlements as store
from gateway.core.failures.excerpt import excerpt
from gateway.core.ledger.ids import authorisation_transfer_id, capture_transfer_id, void_transfer_id
from gateway.core.ledger.port import LedgerTransfer
from gateway.core.settlement.follow_ups import Claim
from gateway.core.settlement.instructions import (
    SettlementInstruction,
    SettlementKind,
    build_transfer,
    merchant_to_post,
)
from gateway.core.settlement.two_phase import (
    Phases,
    Step,
    authorisation_step,
    capture_step,
    void_step,
)
from gateway.errors import MissingField, PaymentNotSettled
from gateway.settlement.items import Item, Priced, Routed, SettleOutcome, Triage

_K = SettlementKind
#: The kinds whose payment's authorisation, capture and void are read with them.
PHASED = frozenset({_K.CAPTURE, _K.AUTHORISATION, _K.VOID})


def related_ids(instruction: SettlementInstruction) -> tuple[int, ...]:
    """The transfer ids to look up with an instruction: a capture's authorisation (its
    void only when there is one: `voids_to_read`); an authorisation's or void's
    payment's authorisation, capture and void."""
    payment = instruction.settlement_id
    if instruction.kind is _K.CAPTURE:
        return (authorisation_transfer_id(payment),)
    if not instruction.kind.two_phase:
        return ()
    return (
        authorisation_transfer_id(payment),
        capture_transfer_id(payment),
        void_transfer_id(payment),
    )


def voids_to_read(
    instructions: Sequence[SettlementInstruction], rows: Mapping[int, store.SettlementRow]
) -> list[int]:
    """The voids to look up for captures of authorised payments (few: most captures
    have no authorisation, and the look-up then reads nothing more)."""
    return [
        void_transfer_id(i.settlement_id)
        for i in instructions
        if i.kind is _K.CAPTURE and authorised(rows, i.settlement_id)
    ]


def authorised(rows: Mapping[int, store.SettlementRow], payment: str) -> bool:
    """Whether the payment's authorisation was recorded (among `rows`)."""
    return authorisation_transfer_id(payment) in rows


def phases_of(
    rows: Mapping[int, store.SettlementRow], payment: str, *, void_claimed: bool = False
) -> Phases:
    """What the payment recorded, from its rows (and whether a void was claimed)."""
    auth = rows.get(authorisation_transfer_id(payment))
    return Phases(
        authorisation=None if auth is None else auth.state,
        authorised_minor=0 if auth is None else auth.amount_minor,
        authorised_currency="" if auth is None else auth.currency,
        captured=capture_transfer_id(payment) in rows,
        voided=void_claimed or void_transfer_id(payment) in rows,
    )


def routed(
    item: Item, rows: Mapping[int, store.SettlementRow], fixed: tuple[int, Decimal] | None,
    *, alone: bool,
) -> Routed | Exception | None:  # fmt: skip
    """A capture, authorisation or void routed: None to settle it alone (after its
    batch), an exception when it cannot settle now."""
    instruction = item.instruction
    payment = instruction.settlement_id
    auth = rows.get(authorisation_transfer_id(payment))
    if instruction.kind is _K.VOID:  # the locked step decides; the merchant is the auth's
        merchant = auth.merchant_id if auth is not None else (instruction.merchant_id or "")
        return Routed(item, merchant, fixed, authorisation=auth)
    named = merchant_to_post(instruction, None)  # raises MissingField without one
    if named is None:  # a capture or authorisation always names one
        raise MissingField("merchant_id")
    merchant = named
    if instruction.kind is _K.AUTHORISATION:
        return Routed(item, merchant, fixed)
    step = capture_step(phases_of(rows, payment), instruction.amount_minor, instruction.currency)
    if step is Step.WAIT:
        if not alone:
            return None
        return PaymentNotSettled(
            f"capture of {excerpt(payment)} while its authorisation is being posted"
        )
    if step is Step.PLAIN:
        return Routed(item, merchant, fixed)
    return Routed(item, merchant, fixed, authorisation=auth,
                  release=step is Step.RELEASE_THEN_PLAIN)  # fmt: skip


def void_priced(r: Routed) -> Priced:
    """A void moves what its authorisation reserved, at its rate; with no posted
    authorisation it moves nothing (the locked step records it)."""
    auth = r.authorisation
    if auth is None or not auth.ledger_amount_minor or auth.rate_at_payment is None:
        return Priced(r.item, r.merchant, 0, Decimal(1), r.item.instruction.currency)
    return Priced(r.item, r.merchant, auth.ledger_amount_minor, auth.rate_at_payment,
                  auth.ledger_currency or auth.currency, stored=r.fixed is not None,
                  authorisation=auth)  # fmt: skip


def release_transfer(auth: store.SettlementRow, provider: str) -> LedgerTransfer:
    """The void of `auth`'s reservation, posted before a capture that cannot post it
    (more than was authorised, or another currency). Its id is the payment's void's."""
    if not auth.ledger_amount_minor or auth.rate_at_payment is None:
        raise MissingField(f"ledger amount of authorisation {excerpt(auth.settlement_id)}")
    void = SettlementInstruction(
        auth.settlement_id, _K.VOID, auth.merchant_id, auth.amount_minor, auth.currency,
        auth.settlement_id, None,
    )  # fmt: skip
    return build_transfer(void, provider=provider,
                          ledger_currency=auth.ledger_currency or auth.currency,
                          amount_minor=auth.ledger_amount_minor,
                          rate_at_payment=auth.rate_at_payment)  # fmt: skip


async def reserve(pool: Pool, priced: Sequence[Priced]) -> Triage[Priced]:
    """Decide the authorisations and voids not stored yet, under their payments' locks;
    the other items go on as they are."""
    triage: Triage[Priced] = Triage()
    to_decide = [p for p in priced if p.item.instruction.kind.two_phase and not p.stored]
    triage.go_on.extend(p for p in priced if not p.item.instruction.kind.two_phase or p.stored)
    if not to_decide:
        return triage
    payments = [p.item.instruction.settlement_id for p in to_decide]
    kinds = (_K.AUTHORISATION, _K.VOID)
    pending: list[store.PendingSettlement] = []
    claims: list[claims_store.NewClaim] = []
    async with transaction(pool) as conn:
        await claims_store.lock_payments(conn, payments)
        rows = await store.by_transfers(
            conn, [t for p in to_decide for t in related_ids(p.item.instruction)]
        )
        recorded = await claims_store.claims_of(conn, payments, kinds)
        for p in to_decide:
            instruction = p.item.instruction
            payment = instruction.settlement_id
            told = recorded[payment]
            if any(c.kind is instruction.kind for c in told):  # recorded before: moved nothing
                triage.decided[p.item.index] = SettleOutcome.DUPLICATE
                continue
            phases = phases_of(rows, payment, void_claimed=any(c.kind is _K.VOID for c in told))
            if instruction.kind is _K.AUTHORISATION:
                step = authorisation_step(phases)
            else:
                step = void_step(phases)
            if step is Step.WAIT:
                triage.decided[p.item.index] = PaymentNotSettled(
                    f"void of {excerpt(payment)} while its authorisation is being posted"
                )
                continue
            if step is Step.NOTHING:
                claim = Claim(instruction.kind, payment, instruction.amount_minor,
                              instruction.currency, False, 0, 0)  # fmt: skip
                told.append(claim)
                claims.append(claims_store.NewClaim(
                    payment, claim, p.item.tid, p.item.event.provider,
                    instruction.source_event_id,
                ))  # fmt: skip
                triage.decided[p.item.index] = SettleOutcome.DUPLICATE
                continue
            # A batch holds one movement per two-phase payment (`route.route`).
            pending.append(_as_pending(p))
            triage.go_on.append(dataclasses.replace(p, stored=True))
        await store.fix_pending_many(conn, pending)
        await claims_store.record(conn, claims)
    return triage


def _as_pending(p: Priced) -> store.PendingSettlement:
    """A void is stored with its authorisation's amount; an authorisation with its own."""
    instruction = p.item.instruction
    auth = p.authorisation
    if instruction.kind is _K.VOID and auth is not None:
        instruction = dataclasses.replace(
            instruction, amount_minor=auth.amount_minor, currency=auth.currency,
            merchant_id=auth.merchant_id,
        )  # fmt: skip
    return store.PendingSettlement(instruction, p.item.tid, p.item.event.provider, p.merchant,
                                   p.amount_minor, p.ledger_currency, p.rate)  # fmt: skip
