"""Settling a fetched batch together: the same steps as `Settler.settle`, a statement each.

For every event the order of `Settler.settle` is kept (look up the settlement, check the
merchant's account, fix amount and rate in `settlements`, post the transfer, mark it
settled), but each step runs once for the whole batch: one look-up, one upsert, one
ledger batch (one transaction, like TigerBeetle's `create_transfers`), one update. Each
event still gets its own outcome or its own exception, which the worker answers
(ack, nak with delay, or DLQ) exactly as before.

Only first attempts take this path, and refunds only once their payment has settled.
Settlements already started (a redelivery, with its fixed amount), a second event for
a settlement already in the batch, and refunds of payments not settled before the batch
go through `Settler.settle` one by one afterwards, so a refund sees a payment settled
earlier in the same batch, or is retried as before. If a
batch-wide step fails for a reason other than an outage, the events it covered are
settled one by one too, so one bad event cannot fail its neighbours.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal

from gateway import tracing
from gateway.adapters.postgres import connection
from gateway.adapters.postgres import settlements as store
from gateway.core.ledger import LedgerTransfer, TransferResult, interpret
from gateway.core.model import Event
from gateway.core.money import convert_minor
from gateway.core.settlement import (
    SettlementInstruction,
    SettlementKind,
    SettlementState,
    build_transfer,
    merchant_to_post,
    transfer_id,
)
from gateway.errors import TransientError
from gateway.settlement import traced
from gateway.settlement.settler import SettleOutcome, Settler, check_same, log_settled
from gateway.settlement.traced import ledger_spans

log = logging.getLogger(__name__)
REFUND = SettlementKind.REFUND

#: What each event of a batch came to: an outcome, or the exception to dispose of.
Result = SettleOutcome | Exception


@dataclass
class _Item:
    """One event on the batch path, and what has been worked out for it so far."""

    index: int
    event: Event
    attempt: int
    instruction: SettlementInstruction
    tid: int
    merchant: str = ""
    amount_minor: int = 0
    rate: Decimal = Decimal(0)
    transfer: LedgerTransfer | None = None
    span: tracing.Span | None = None  # the event's settlement span, while tracing


def split(
    settler: Settler,
    work: Sequence[tuple[Event, int]],
    spans: Sequence[tracing.Span | None] | None = None,
) -> tuple[list[Result | None], list[_Item], list[int]]:
    """Triage without I/O: (results known already, items for the batch path, indexes to
    settle one by one). A repeat of a settlement already in the batch goes one by one."""
    results: list[Result | None] = [None] * len(work)
    batch: list[_Item] = []
    one_by_one: list[int] = []
    seen: set[int] = set()
    for i, (event, attempt) in enumerate(work):
        try:
            instruction = settler.instruction(event)
        except Exception as exc:  # the worker disposes of it, as before
            results[i] = exc
            continue
        if instruction is None:
            results[i] = SettleOutcome.IGNORED
            continue
        tid = transfer_id(instruction)
        if tid in seen:
            one_by_one.append(i)
            continue
        seen.add(tid)
        batch.append(_Item(i, event, attempt, instruction, tid, span=spans[i] if spans else None))
    return results, batch, one_by_one


async def settle_batch(
    settler: Settler,
    work: Sequence[tuple[Event, int]],
    concurrency: int = 32,
    spans: Sequence[tracing.Span | None] | None = None,
) -> list[Result]:
    """Settle `(event, delivery number)` pairs; one outcome or exception each, in order.

    `spans` (while tracing): each event's settlement span, parent of its steps' spans.
    """
    results, batch, one_by_one = split(settler, work, spans)
    one_by_one += await _settle_together(settler, batch, results)
    # Different settlements concurrently; a repeat of one only after it (it then finds
    # the settlement done, or checks that it says the same).
    first: list[int] = []
    repeats: list[int] = []
    seen: set[int | None] = set()
    for i in sorted(one_by_one):
        tid = _tid(settler, work[i][0])
        (repeats if tid in seen else first).append(i)
        seen.add(tid)
    semaphore = asyncio.Semaphore(concurrency)

    async def alone(i: int) -> None:
        async with semaphore:
            try:
                with tracing.activated(spans[i] if spans else None):  # its steps join it
                    results[i] = await settler.settle(*work[i])
            except Exception as exc:  # the worker disposes of it
                results[i] = exc

    await asyncio.gather(*(alone(i) for i in first))
    for i in repeats:
        await alone(i)
    return [r if r is not None else RuntimeError("not settled") for r in results]


def _tid(settler: Settler, event: Event) -> int | None:
    instruction = settler.instruction(event)
    return None if instruction is None else transfer_id(instruction)


async def _settle_together(
    settler: Settler, items: list[_Item], results: list[Result | None]
) -> list[int]:
    """The batch path; returns the indexes to settle one by one after all."""
    later: list[int] = []

    async def step(what: Callable[[list[_Item]], Awaitable[None]], todo: list[_Item]) -> bool:
        """Run a batch-wide step; on failure, fail (outage) or defer (else) its items."""
        try:
            await what(todo)
            return True
        except TransientError as exc:
            for item in todo:
                results[item.index] = exc
        except Exception:
            log.exception("batch step failed; settling its events one by one")
            later.extend(item.index for item in todo)
        return False

    async def existing(todo: list[_Item]) -> None:
        refunded = [i.instruction.settlement_id for i in todo if i.instruction.kind is REFUND]
        async with connection(settler.pool) as conn:
            found = await store.by_transfers(conn, [item.tid for item in todo])
            captures = await store.captures_of(conn, refunded) if refunded else {}
        for item in todo:
            row = found.get(item.tid)
            try:
                if row is not None:
                    check_same(row, item.instruction)
                    if row.state is SettlementState.SETTLED:
                        results[item.index] = SettleOutcome.DUPLICATE
                    else:
                        later.append(item.index)  # started before: its own amount and rate
                    continue
                item.merchant = _merchant(item.instruction, captures)
            except Exception as exc:
                results[item.index] = exc
            if not item.merchant and results[item.index] is None:
                # A refund of a payment not settled (yet, or earlier in this batch):
                # `Settler.settle` waits for it or tells the worker to retry.
                later.append(item.index)

    if not items or not await step(existing, items):
        return later
    deferred = set(later)
    items = [item for item in items if results[item.index] is None and item.index not in deferred]
    await _convert(settler, items, results)
    items = [item for item in items if results[item.index] is None]

    async def fix(todo: list[_Item]) -> None:
        pending = [
            store.PendingSettlement(item.instruction, item.tid, item.event.provider,
                                    item.merchant, item.amount_minor, settler.currency, item.rate)
            for item in todo
        ]  # fmt: skip
        async with connection(settler.pool) as conn:
            fixed = await store.fix_pending_many(conn, pending)
        for item in todo:
            row = fixed[item.tid]
            item.amount_minor = row.ledger_amount_minor or item.amount_minor
            item.rate = row.rate_at_payment or item.rate
            try:
                item.transfer = build_transfer(
                    item.instruction,
                    provider=item.event.provider,
                    ledger_currency=settler.currency,
                    amount_minor=item.amount_minor,
                    rate_at_payment=item.rate,
                    merchant_id=item.merchant,
                )
            except Exception as exc:
                results[item.index] = exc

    if not items or not await step(fix, items):
        return later
    items = [item for item in items if item.transfer is not None]

    async def post(todo: list[_Item]) -> None:
        transfers = [item.transfer for item in todo if item.transfer is not None]
        started_ns = time.time_ns() if tracing.ENABLED else 0
        answers = await settler.ledger.post(transfers)
        if tracing.ENABLED:
            ledger_spans([item.span for item in todo], started_ns, len(transfers))
        posted: list[tuple[_Item, TransferResult]] = []
        for item, transfer, answer in zip(todo, transfers, answers, strict=True):
            try:
                posted.append((item, interpret(answer, transfer)))
            except Exception as exc:
                results[item.index] = exc
        if not await step(lambda done: _mark_settled(settler, done), [i for i, _ in posted]):
            return  # each item failed with the outage, or is left to settle alone
        for item, answer in posted:
            if results[item.index] is None:
                with tracing.activated(item.span):  # the log line carries its trace id
                    log_settled(item.instruction, item.amount_minor, settler.currency,
                                item.rate, answer)  # fmt: skip
                created = answer is TransferResult.CREATED
                results[item.index] = SettleOutcome.SETTLED if created else SettleOutcome.DUPLICATE

    if items:
        await step(post, items)
    return later


async def _mark_settled(settler: Settler, items: list[_Item]) -> None:
    async with connection(settler.pool) as conn:
        await store.set_settled_many(conn, [item.tid for item in items])


def _merchant(instruction: SettlementInstruction, captures: dict[str, store.SettlementRow]) -> str:
    """The merchant to post for; "" for a refund whose payment has not settled."""
    capture = captures.get(instruction.settlement_id)
    return merchant_to_post(instruction, capture.settled_merchant if capture else None) or ""


async def _convert(settler: Settler, items: list[_Item], results: list[Result | None]) -> None:
    """Each item's merchant account and rate, as `Settler.settle` checks them. Both are
    remembered by the settler once known good, so a batch asks once per merchant and
    currency; a failure is asked again per event (its own retry delay and jitter)."""
    for item in items:
        instruction = item.instruction
        try:
            await settler.require_account(item.merchant)
            if item.span is not None:
                item.rate = await traced.rate(
                    settler.rate_from, item.span, instruction.currency, item.attempt
                )
            else:
                item.rate = await settler.rate(instruction.currency, item.attempt)
            item.amount_minor = convert_minor(
                instruction.amount_minor, item.rate, instruction.currency, settler.currency
            )
        except Exception as exc:  # the worker disposes of it, as before
            results[item.index] = exc
