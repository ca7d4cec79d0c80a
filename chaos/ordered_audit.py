"""Scenario 15's audit: the loss/duplicate audit for keys with several settlements each,
and the ordering property.

`chaos.audit` pairs one settling event with one transfer per (payment, code); here a
payment has several refunds under the same (payment, refund code), so the ledger is
judged per key: its capture transfer (one, of the planned amount, unless the payment is
parked) and its refund transfers (one per refund that is not parked, adding up to the
planned amounts). The ledger holds USD only, so amounts are compared exactly.

- lost: an accepted event with no row, not published, not on the stream, or a key with
  fewer transfers than its unparked events;
- doubled: an event answered `accepted` twice, or a key with more transfers than events;
- money_wrong: a key whose transfers add up to other amounts than planned;
- unexpected_parked: a parked event of a key whose merchant exists;
- and `gateway ledger check`, the ordering property (tests/support/ordering_property.py)
  and the keys still behind after the drain.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from chaos.audit import AuditResult
from chaos.loadgen import LoadRecord
from chaos.observe import Observed
from chaos.workload import PlannedEvent
from gateway.core.ledger.port import TransferCode

_TRANSFERS = """
SELECT settlement_id, code, count(*) AS n, sum(amount)::bigint AS amount
FROM ledger_transfers WHERE settlement_id LIKE 'pi\\_' || $1 || '\\_%'
GROUP BY settlement_id, code
"""


@dataclass
class Money:
    """What the ledger holds per (payment intent, transfer code): count and sum."""

    held: dict[tuple[str, int], tuple[int, int]] = field(default_factory=dict)

    def of(self, pi: str, code: TransferCode) -> tuple[int, int]:
        return self.held.get((pi, int(code)), (0, 0))


async def read_money(database_url: str, run: str) -> Money:
    conn = await asyncpg.connect(database_url)
    try:
        rows = await conn.fetch(_TRANSFERS, run)
    finally:
        await conn.close()
    return Money(
        {(r["settlement_id"], int(r["code"])): (int(r["n"]), int(r["amount"])) for r in rows}
    )


def _running_totals(refunds: list[PlannedEvent]) -> dict[str, int]:
    """Each refund event's `amount_refunded`: the sum of its payment's refunds up to it,
    in the order they were made (the last number of `re_{run}_{payment}_{k}`)."""
    made = sorted(refunds, key=lambda e: int((e.refund_id or "0").rsplit("_", 1)[-1]))
    totals, total = {}, 0
    for e in made:
        total += e.amount_minor
        totals[e.event_id] = total
    return totals


class OrderedAudit(AuditResult):
    @property
    def ok(self) -> bool:
        f = self.figures
        zero = ("lost", "doubled", "money_wrong", "unexpected_parked", "order_violations")
        return all(f[k] == 0 for k in zero) and bool(f["ledger_balanced"])


# Past the complexity bar on purpose: one check per way an ordered stream can go wrong.
def judge_ordered(scenario: str, record: LoadRecord, seen: Observed, money: Money) -> OrderedAudit:  # noqa: C901
    """Pure: the verdict from the load record, the stores' view and the ledger's sums."""
    two_xx: Counter[int] = Counter()
    accepted: Counter[int] = Counter()
    rejected: Counter[str] = Counter()
    for a in record.answers:
        if 200 <= a.status < 300:
            two_xx[a.event] += 1
            accepted[a.event] += a.outcome == "accepted"
        else:
            rejected[str(a.status or "no_answer")] += 1
    problems: list[str] = []
    lost = doubled = money_wrong = unexpected = missing = settled = 0
    parked_by: Counter[str] = Counter()
    by_key: dict[str, list[PlannedEvent]] = defaultdict(list)
    for e in record.events:
        if not two_xx[e.index]:
            continue
        key, name = (e.provider, e.event_id), f"{e.kind} {e.event_id}"
        by_key[e.settlement_id or ""].append(e)
        if accepted[e.index] > 1:
            doubled += 1
            problems.append(f"doubled: {name} answered 'accepted' {accepted[e.index]} times")
        published = seen.rows.get(key)
        reasons = [] if published else ["has no published row"]
        if seen.stream is not None and published and not seen.stream[key]:
            missing += 1
            reasons.append("is not in the stream")
        if reasons:
            lost += 1
            problems.append(f"lost: {name} " + "; ".join(reasons))

    def parked(e: PlannedEvent) -> bool:
        letters = seen.open_dlq.get((e.provider, e.event_id), [])
        return bool(letters) and all(d.error_class and d.error_message for d in letters)

    for pi, events in sorted(by_key.items()):
        for code, group in (
            (TransferCode.CAPTURE, [e for e in events if e.kind == "payment"]),
            (TransferCode.REFUND, [e for e in events if e.kind == "refund"]),
        ):
            n, amount = money.of(pi, code)
            waiting = [e for e in group if parked(e)]
            for e in waiting:
                parked_by[seen.open_dlq[(e.provider, e.event_id)][0].error_class] += 1
                if not e.expect_parked:
                    unexpected += 1
                    problems.append(f"unexpected parked: {e.kind} {e.event_id}")
            if code is TransferCode.REFUND:
                # Each `charge.refunded` carries the charge's running total, and the
                # ledger moves what a total adds to the largest one before it (settled
                # in arrival order, a larger total may come first and cover a smaller
                # one): at most one transfer per event, at least one, and together the
                # largest total of the events not parked.
                totals = _running_totals(group)
                owed = max((totals[e.event_id] for e in group if e not in waiting), default=0)
                if n > len(group):
                    doubled += n - len(group)
                    problems.append(f"doubled: {pi} has {n} REFUND transfers for {len(group)}")
                elif amount < owed:  # not there (yet): the drain waits for it
                    lost += 1
                    problems.append(f"lost: {pi} REFUND holds {amount}, owes {owed}")
                elif amount > owed:
                    money_wrong += 1
                    problems.append(f"money: {pi} REFUND holds {amount}, planned {owed}")
                settled += len(group) - len(waiting)
                continue
            # Settled: as many transfers as events, or as many as the events not parked
            # (the parked ones' amounts then missing from the sum).
            planned = sum(e.amount_minor for e in group)
            unparked = sum(e.amount_minor for e in group if e not in waiting)
            if n > len(group):
                doubled += n - len(group)
                problems.append(f"doubled: {pi} has {n} {code.name} transfers for {len(group)}")
            elif n < len(group) - len(waiting):
                lost += len(group) - len(waiting) - n
                problems.append(f"lost: {pi} has {n} {code.name} transfers, owes {len(group)}")
            elif amount not in ((planned,) if n == len(group) else (unparked,)):
                money_wrong += 1
                problems.append(f"money: {pi} {code.name} holds {amount}, planned {planned}")
            settled += min(n, len(group))
    if not seen.ledger_ok:
        problems.append(f"ledger check failed: {seen.ledger_text}")
    problems += [f"order: {line}" for line in seen.order_violations or []]
    ordering = seen.ordering
    figures: dict[str, Any] = {
        "events": len(record.events),
        "keys": len(by_key),
        "sent": len(record.answers),
        "accepted": sum(accepted.values()),
        "duplicate": sum(1 for a in record.answers if a.outcome == "duplicate"),
        "rejected": dict(rejected),
        "never_2xx": sum(1 for e in record.events if not two_xx[e.index]),
        "settled": settled,
        "parked": dict(parked_by),
        "unexpected_parked": unexpected,
        "missing_from_stream": missing,
        "lost": lost,
        "doubled": doubled,
        "money_wrong": money_wrong,
        "ledger_balanced": seen.ledger_ok,
        "ledger_check": seen.ledger_text,
        "order_keys": ordering.keys if ordering else "-",
        "order_violations": len(seen.order_violations or []),
        "order_applied": ordering.applied if ordering else "-",
        "order_deferred": ordering.deferred if ordering else "-",
        "order_skipped": ordering.skipped if ordering else "-",
        "order_held": ordering.held if ordering else "-",
        "order_behind": ordering.behind if ordering else "-",
        "load_s": record.duration_s,
    }
    return OrderedAudit(scenario, figures, problems)
