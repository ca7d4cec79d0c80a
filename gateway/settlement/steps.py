"""The five steps of settling, each over a batch of items: look up the settlement, check
the account and find the rate, fix amount and rate as pending, post the transfer, mark
it settled.

`Settler.settle_items` runs them in that order, for a fetched batch (`settle_batch`) and
for one event (`Settler.settle`, a batch of one) alike. A step that does I/O does it
once for the whole batch (one statement, one ledger transaction) and raises when it
fails for all of its items. What to do with each item is decided by pure functions in
between: each takes the items and returns a `Triage` of those that go on to the next
step, those decided (an outcome, or the exception the worker disposes of), and those
left to be settled alone.

Settled alone (`alone=True`), an item follows the single-event rules: a settlement
started before posts the amount and rate its first attempt fixed, and a refund whose
payment has not settled fails with `PaymentNotSettled` (retried). In a batch both are
left to be settled alone after it, so a refund sees a payment settled earlier in the
same batch.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Protocol

from gateway.adapters.postgres import Conn, Pool, connection, transaction
from gateway.adapters.postgres import claims as claims_store
from gateway.adapters.postgres import settlements as store
from gateway.core.excerpt import excerpt
from gateway.core.ledger import Ledger, LedgerTransfer, TransferResult, interpret
from gateway.core.money import convert_minor
from gateway.core.settlement import (
    SettlementInstruction,
    SettlementKind,
    SettlementState,
    build_transfer,
    fx_transfer,
    merchant_to_post,
)
from gateway.errors import LedgerIdCollision, PaymentNotSettled
from gateway.settlement import traced, two_phase
from gateway.settlement.items import (
    Item,
    Posted,
    Posting,
    Priced,
    Routed,
    SettleOutcome,
    Triage,
)


@dataclass(frozen=True, slots=True)
class Found:
    """The look-up: settlements already started by transfer id, and the captures of
    the refunded payments by payment id."""

    rows: dict[int, store.SettlementRow]
    captures: dict[str, store.SettlementRow]
    #: What the claims of follow-ups started before said, by transfer id.
    claimed: dict[int, claims_store.Claimed] = dataclasses.field(default_factory=dict)


class Pricing(Protocol):
    """What the account-and-rate step asks (the `Settler`)."""

    def ledger_currency_for(
        self, instruction: SettlementInstruction, payment: store.SettlementRow | None
    ) -> str: ...

    async def require_accounts(self, merchant: str, source: str, currency: str) -> None: ...

    @property
    def converts(self) -> bool:
        """False with `[settlement] balances = "per_currency"`: nothing is converted."""
        ...

    async def rate_from(self, currency: str, attempt: int) -> tuple[Decimal, str]: ...


_ONE = Decimal(1)
log = logging.getLogger(__name__)


# --- 1. look up --------------------------------------------------------------------------


async def look_up(pool: Pool, items: Sequence[Item]) -> Found:
    """The items' settlements already started, and the captures their follow-ups
    (refunds, reversals, chargebacks) belong to."""
    if not items:
        return Found({}, {})
    followed = [i.instruction.settlement_id for i in items if i.instruction.kind.of_payment]
    tids = [item.tid for item in items]
    tids.extend(t for item in items for t in two_phase.related_ids(item.instruction))
    async with connection(pool) as conn:
        rows = await store.by_transfers(conn, list(dict.fromkeys(tids)))
        captures = await store.captures_of(conn, followed) if followed else {}
        again = [i.tid for i in items if i.instruction.kind.follows_payment and i.tid in rows]
        claimed = await claims_store.claimed(conn, again) if again else {}
    return Found(rows, captures, claimed)


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
        if not alone and kind in two_phase.PHASED and item.instruction.settlement_id in phased:
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
            if kind in two_phase.PHASED:
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
    problem someone has to look at, and it is raised as the critical id collision.
    """
    same = (
        existing.amount_minor == instruction.amount_minor
        and existing.currency == instruction.currency
        and (instruction.merchant_id is None or existing.merchant_id == instruction.merchant_id)
    )
    if not same:
        merchant = None if instruction.merchant_id is None else excerpt(instruction.merchant_id)
        raise LedgerIdCollision(
            f"settlement {excerpt(instruction.key)} was recorded as {existing.amount_minor} "
            f"{existing.currency} for {excerpt(existing.merchant_id)}; this event says "
            f"{instruction.amount_minor} {instruction.currency} for {merchant}"
        )


# --- 2. account and rate -----------------------------------------------------------------


async def price(routed: Sequence[Routed], pricing: Pricing) -> Triage[Priced]:
    """Each item's merchant account checked, and its amount converted at the rate. The
    settler remembers both once known good, so a batch asks once per merchant and
    currency; a failure is asked again per event (its own retry delay and jitter)."""
    triage: Triage[Priced] = Triage()
    # Rates found in this batch, by currency and delivery number: an untraced item takes
    # its currency's from here, asked once per batch (a traced one asks in its own span).
    found: dict[tuple[str, int], Decimal] = {}
    for r in routed:
        item, instruction = r.item, r.item.instruction
        if instruction.kind is SettlementKind.VOID:  # what its authorisation reserved
            triage.go_on.append(two_phase.void_priced(r))
            continue
        auth = r.authorisation if not r.release else None
        try:
            ledger = pricing.ledger_currency_for(instruction, r.payment)
            if auth is not None:  # posted in the reservation's currency, at its rate
                ledger = auth.ledger_currency or auth.currency
            await pricing.require_accounts(r.merchant, item.event.provider, ledger)
            if r.fixed is not None:
                stored = Priced(item, r.merchant, *r.fixed, ledger, stored=True,
                                authorisation=r.authorisation, release=r.release,
                                fx=r.fx)  # fmt: skip
                triage.go_on.append(stored)
                continue
            if auth is not None and auth.rate_at_payment is not None:
                amount_minor = instruction.amount_minor
                if instruction.currency != ledger:
                    amount_minor = convert_minor(
                        amount_minor, auth.rate_at_payment, instruction.currency, ledger
                    )
                triage.go_on.append(Priced(item, r.merchant, amount_minor, auth.rate_at_payment,
                                           ledger, authorisation=auth))  # fmt: skip
                continue
            if r.payment is not None:  # at its payment's rate, once netted (`follow_ups`)
                current = None
                if pricing.converts and r.payment.currency != ledger:  # for its FX result
                    key = (r.payment.currency, item.attempt)
                    current = found.get(key) if item.span is None else None
                    if current is None:
                        current = await traced.rate(
                            pricing.rate_from, item.span, r.payment.currency, item.attempt
                        )
                        found[key] = current
                triage.go_on.append(Priced(item, r.merchant, 0, Decimal(1), ledger,
                                           payment=r.payment, current_rate=current))  # fmt: skip
                continue
            currency = instruction.currency
            if not pricing.converts:  # balances per currency: the event's own amount
                triage.go_on.append(
                    Priced(item, r.merchant, instruction.amount_minor, _ONE, ledger)
                )
                continue
            key = (currency, item.attempt)
            rate = found.get(key) if item.span is None else None
            if rate is None:
                rate = await traced.rate(pricing.rate_from, item.span, currency, item.attempt)
                found[key] = rate
            amount_minor = convert_minor(instruction.amount_minor, rate, currency, ledger)
        except Exception as exc:  # the worker disposes of it
            triage.decided[item.index] = exc
            continue
        triage.go_on.append(Priced(item, r.merchant, amount_minor, rate, ledger,
                                   authorisation=r.authorisation, release=r.release))  # fmt: skip
    return triage


# --- 3. fix pending ----------------------------------------------------------------------


async def fix_pending(pool: Pool, priced: Sequence[Priced]) -> list[Priced]:
    """Store the items not stored yet as pending with their amount and rate, in one
    statement; the items with the amount and rate stored (a retried settlement keeps its
    first attempt's, even if the rate has moved since)."""
    pending = [
        store.PendingSettlement(p.item.instruction, p.item.tid, p.item.event.provider,
                                p.merchant, p.amount_minor, p.ledger_currency, p.rate)
        for p in priced
        if not p.stored
    ]  # fmt: skip
    if not pending:
        return list(priced)
    async with connection(pool) as conn:
        rows = await store.fix_pending_many(conn, pending)
    return [p if p.stored else _as_stored(p, rows.get(p.item.tid)) for p in priced]


def _as_stored(p: Priced, row: store.SettlementRow | None) -> Priced:
    if row is None:  # stored now, with this amount and rate
        return dataclasses.replace(p, stored=True)
    amount_minor = row.ledger_amount_minor or p.amount_minor
    rate = row.rate_at_payment or p.rate
    return dataclasses.replace(p, amount_minor=amount_minor, rate=rate, stored=True)


def build(priced: Sequence[Priced]) -> Triage[Posting]:
    """Each item's ledger transfer (a converted amount out of range is the item's error)."""
    triage: Triage[Posting] = Triage()
    for p in priced:
        provider = p.item.event.provider
        try:
            transfer = build_transfer(
                p.item.instruction,
                provider=provider,
                ledger_currency=p.ledger_currency,
                amount_minor=p.amount_minor,
                rate_at_payment=p.rate,
                merchant_id=p.merchant,
                authorised=p.authorisation is not None and not p.release,
            )
            before: tuple[LedgerTransfer, ...] = ()
            if p.release and p.authorisation is not None:
                before = (two_phase.release_transfer(p.authorisation, provider),)
            if p.fx is not None:
                before = (fx_transfer(p.item.instruction, provider=provider,
                                      ledger_currency=p.ledger_currency, fx_minor=p.fx[0],
                                      current_rate=p.fx[1]),)  # fmt: skip
        except Exception as exc:  # the worker disposes of it
            triage.decided[p.item.index] = exc
            continue
        triage.go_on.append(Posting(p, transfer, before))
    return triage


# --- 4. post -----------------------------------------------------------------------------


async def post(ledger: Ledger, postings: Sequence[Posting]) -> list[tuple[Posting, TransferResult]]:
    """Post the transfers together (one ledger transaction, like TigerBeetle's
    `create_transfers`, in one `ledger.post` span per event); each with its answer."""
    if not postings:
        return []
    with traced.ledger_post([p.priced.item.span for p in postings]):
        answers = await ledger.post([t for p in postings for t in (*p.before, p.transfer)])
    out: list[tuple[Posting, TransferResult]] = []
    at = 0
    for p in postings:
        # A release's own answer only matters if it failed: the capture after it moved
        # the money either way, and a reservation left pending moves none.
        for before, answer in zip(p.before, answers[at:], strict=False):
            if answer not in (TransferResult.CREATED, TransferResult.EXISTS):
                log.warning("release %#034x of %s: %s", before.id,
                            excerpt(before.settlement_id), answer.value)  # fmt: skip
        at += len(p.before)
        out.append((p, answers[at]))
        at += 1
    return out


def interpreted(answers: Sequence[tuple[Posting, TransferResult]]) -> Triage[Posted]:
    """The ledger's answers: in the ledger (created, or there already) goes on; a refusal
    is the item's permanent error."""
    triage: Triage[Posted] = Triage()
    for posting, answer in answers:
        try:
            triage.go_on.append((posting, interpret(answer, posting.transfer)))
        except Exception as exc:  # the worker disposes of it
            triage.decided[posting.priced.item.index] = exc
    return triage


# --- 5. mark settled ---------------------------------------------------------------------


#: What commits together with marking items settled: run on the same connection, inside
#: the same transaction, with the items marked (the ordering gate moves their keys).
WithSettled = Callable[[Conn, Sequence[Item]], Awaitable[None]]


async def mark_settled(
    pool: Pool, posted: Sequence[Posted], with_settled: WithSettled | None = None
) -> None:
    """Mark the posted items' settlements settled, in one statement; with
    `with_settled`, in one transaction with what it writes."""
    if not posted:
        return
    transfer_ids = [posting.priced.item.tid for posting, _ in posted]
    if with_settled is None:  # one statement is atomic on its own: no BEGIN/COMMIT
        async with connection(pool) as conn:
            await store.set_settled_many(conn, transfer_ids)
        return
    async with transaction(pool) as conn:
        await store.set_settled_many(conn, transfer_ids)
        await with_settled(conn, [posting.priced.item for posting, _ in posted])


def outcome(answer: TransferResult) -> SettleOutcome:
    """A transfer created settled the event; one there already was a duplicate."""
    return SettleOutcome.SETTLED if answer is TransferResult.CREATED else SettleOutcome.DUPLICATE
