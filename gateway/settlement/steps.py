"""The steps of settling, each over a batch of items: look up the settlement (and route
each item, `settlement.route`), check the account and find the rate
(`settlement.pricing`), net a follow-up against its payment (`settlement.follow_ups`)
or decide an authorisation or void (`settlement.two_phase`), fix amount and rate as
pending, post the transfer, mark it settled.

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

from gateway.adapters.postgres import Conn, Pool, connection, transaction
from gateway.adapters.postgres import claims as claims_store
from gateway.adapters.postgres import settlements as store
from gateway.core.failures.excerpt import excerpt
from gateway.core.ledger.port import Ledger, LedgerTransfer, TransferResult, interpret
from gateway.core.settlement.instructions import (
    build_transfer,
    fx_transfer,
)
from gateway.settlement import traced, two_phase
from gateway.settlement.items import (
    Item,
    Posted,
    Posting,
    Priced,
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


log = logging.getLogger(__name__)


# --- 1. look up (then `settlement.route`, and `settlement.pricing`) ----------------------


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
        voids = two_phase.voids_to_read([item.instruction for item in items], rows)
        if voids:
            rows.update(await store.by_transfers(conn, voids))
        captures = await store.captures_of(conn, followed) if followed else {}
        again = [i.tid for i in items if i.instruction.kind.follows_payment and i.tid in rows]
        claimed = await claims_store.claimed(conn, again) if again else {}
    return Found(rows, captures, claimed)


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
