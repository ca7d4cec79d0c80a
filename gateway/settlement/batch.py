"""Settling a fetched batch together: the steps of `gateway.settlement.steps`, each once
for the whole batch (one look-up, one upsert, one ledger batch in one transaction, like
TigerBeetle's `create_transfers`, one update). Each event still gets its own outcome or
its own exception, which the worker answers (ack, nak with delay, or DLQ) exactly as it
would answer the event settled alone.

Settlements already started (a redelivery, with its fixed amount), a second event for
a settlement already in the batch, and refunds of payments not settled before the batch
are settled alone afterwards (`Settler.settle_alone`), so a refund sees a payment
settled earlier in the same batch, or is retried as before. If a batch-wide step fails
for a reason other than an outage, the events it covered are settled alone too, so one
bad event cannot fail its neighbours.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from gateway import tracing
from gateway.core.events.model import Event
from gateway.core.settlement.instructions import SettlementInstruction
from gateway.settlement.items import Item, Result, items_of
from gateway.settlement.settler import Settler
from gateway.settlement.steps import WithSettled

__all__ = ["Result", "settle_batch"]


async def settle_batch(
    settler: Settler,
    work: Sequence[tuple[Event, int]],
    concurrency: int = 32,
    spans: Sequence[tracing.Span | None] | None = None,
    with_settled: WithSettled | None = None,
    instruction: Callable[[Event], SettlementInstruction | None] | None = None,
) -> list[Result]:
    """Settle `(event, delivery number)` pairs; one outcome or exception each, in order.

    `spans`: each event's settlement span (None: not traced), parent of its steps' spans.
    `with_settled`: run in each transaction that marks items settled, with those items
    (their `index` is their place in `work`). `instruction`: each event's settlement
    instruction, when the caller read them already (default: `Settler.instruction`).
    """
    triage = items_of(work, instruction or settler.instruction, spans)
    results: dict[int, Result] = dict(triage.decided)
    tally = await settler.settle_items(triage.go_on, alone=False, with_settled=with_settled)
    results.update(tally.decided)
    first, repeats = _first_and_repeats([*triage.alone, *tally.alone])
    semaphore = asyncio.Semaphore(concurrency)

    async def alone(item: Item) -> Result:
        async with semaphore:
            try:
                with tracing.activated(item.span):  # its log lines join its trace
                    return await settler.settle_alone(item, with_settled)
            except Exception as exc:  # the worker disposes of it
                return exc

    for item, result in zip(first, await asyncio.gather(*map(alone, first)), strict=True):
        results[item.index] = result
    for item in repeats:
        results[item.index] = await alone(item)
    return [results.get(i, RuntimeError("not settled")) for i in range(len(work))]


def _first_and_repeats(items: Sequence[Item]) -> tuple[list[Item], list[Item]]:
    """Different settlements concurrently; a repeat of one only after it (it then finds
    the settlement done, or checks that it says the same)."""
    first: list[Item] = []
    repeats: list[Item] = []
    seen: set[int] = set()
    for item in sorted(items, key=lambda item: item.index):
        (repeats if item.tid in seen else first).append(item)
        seen.add(item.tid)
    return first, repeats
