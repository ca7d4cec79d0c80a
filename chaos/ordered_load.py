"""Scenario 15's load: many payment intents, each a key with several events.

Each payment intent gets `payment_intent.succeeded`, then 0 to `max_refunds` partial
refunds (`charge.refunded` of its charge, the refunds listed newest first as Stripe's
API before 2022-11-15 expands them; each event settles the increase of the charge's
running `amount_refunded`, which is its newest refund's amount). Every event's ordering
key is its payment intent (Stripe's `data.object.payment_intent`, else
`data.object.id`). Amounts are in USD, the ledger's
currency, so the ledger must hold exactly the planned amounts.

A share of payments is for a merchant with no ledger account: the payment is parked and
holds its key, and its refunds must be parked too (blocked behind it, or after their
retries) and never settle.

Deliveries go out as `chaos.loadgen` sends any load: each event 1 to 5 times, shuffled
and concurrent (a refund never before its payment's first delivery), so a key's events
are often recorded, and numbered, in another order than they happened.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import orjson

from chaos.loadgen import LoadGen
from chaos.workload import MERCHANTS, UNKNOWN_MERCHANT, LoadSpec, PlannedEvent


@dataclass(frozen=True)
class OrderedSpec:
    """How many keys, how many refunds each, and how the load is sent."""

    payments: int = 120
    max_refunds: int = 3
    unknown_merchant: float = 0.03
    rate_per_s: float = 150.0  # delivery attempts started per second
    seed: int = 15

    def load_spec(self) -> LoadSpec:
        """What `chaos.loadgen` needs of a spec (its own plan is replaced)."""
        return LoadSpec(events=0, rate_per_s=self.rate_per_s, forged=0.0, seed=self.seed)


def _body(event_id: str, event_type: str, obj: dict[str, object]) -> bytes:
    return orjson.dumps(
        {"id": event_id, "object": "event", "type": event_type, "data": {"object": obj}}
    )


def plan_ordered(spec: OrderedSpec, run: str) -> list[PlannedEvent]:
    """The events of one run; ids carry `run` (the audit's scope)."""
    rng = random.Random(spec.seed)
    events: list[PlannedEvent] = []

    def add(**kw: object) -> None:
        events.append(PlannedEvent(index=len(events), deliveries=rng.randint(1, 5), **kw))  # type: ignore[arg-type]

    for i in range(spec.payments):
        merchant = (
            UNKNOWN_MERCHANT if rng.random() < spec.unknown_merchant else rng.choice(MERCHANTS)
        )
        pi, amount = f"pi_{run}_{i}", rng.randint(1_000, 50_000)
        payment = {
            "id": pi,
            "object": "payment_intent",
            "amount_received": amount,
            "currency": "usd",
            "metadata": {"merchant_id": merchant},
        }
        add(
            provider="stripe",
            event_id=f"evt_{run}_p{i}",
            event_type="payment_intent.succeeded",
            kind="payment",
            settlement_id=pi,
            merchant_id=merchant,
            amount_minor=amount,
            currency="usd",
            body=_body(f"evt_{run}_p{i}", "payment_intent.succeeded", payment),
        )
        refunds: list[dict[str, object]] = []
        left = amount
        for k in range(1, rng.randint(0, spec.max_refunds) + 1):
            part = rng.randint(1, max(1, left // 2))
            left -= part
            refund_id = f"re_{run}_{i}_{k}"
            refunds.insert(0, {"id": refund_id, "object": "refund", "amount": part, "created": k})
            charge = {
                "id": f"ch_{run}_{i}",
                "object": "charge",
                "payment_intent": pi,
                "amount_refunded": amount - left,
                "currency": "usd",
                "metadata": {"merchant_id": merchant},
                "refunds": {"object": "list", "data": list(refunds)},
            }
            event_id = f"evt_{run}_r{i}_{k}"
            add(
                provider="stripe",
                event_id=event_id,
                event_type="charge.refunded",
                kind="refund",
                settlement_id=pi,
                refund_id=refund_id,
                merchant_id=merchant,
                amount_minor=part,
                currency="usd",
                body=_body(event_id, "charge.refunded", charge),
            )
    return events


class OrderedLoadGen(LoadGen):
    """`chaos.loadgen.LoadGen` sending `plan_ordered`'s events."""

    def __init__(self, urls: list[str], spec: OrderedSpec) -> None:
        super().__init__(urls, spec.load_spec())
        self.record.events = plan_ordered(spec, self.record.run)
        self.total = sum(e.deliveries for e in self.record.events)
