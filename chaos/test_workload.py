"""The load's plan: deterministic for a seed, the mix asked for, refunds that make sense,
and a delivery order that never sends a refund before its payment."""

from __future__ import annotations

from collections import Counter

from chaos.loadgen import LoadGen
from chaos.workload import UNKNOWN_MERCHANT, LoadSpec, plan


def test_plan_is_deterministic_and_has_the_mix_asked_for():
    spec = LoadSpec(events=400, payments=0.5, refunds=0.15, forged=0.01, seed=5)
    events = plan(spec, "run1")
    assert [e.body for e in events] == [e.body for e in plan(spec, "run1")]
    kinds = Counter(e.kind for e in events)
    assert kinds == {"payment": 200, "refund": 60, "other": 140, "forged": 4}
    assert {e.provider for e in events if e.kind == "other"} == {"stripe", "standard"}
    assert all(1 <= e.deliveries <= spec.max_deliveries for e in events)
    assert len({(e.provider, e.event_id) for e in events}) == len(events)
    assert all("_run1_" in e.event_id for e in events)


def test_refunds_refund_known_payments_within_their_amount():
    events = plan(LoadSpec(events=400, seed=9), "r")
    payments = {e.settlement_id: e for e in events if e.kind == "payment"}
    for refund in (e for e in events if e.kind == "refund"):
        paid = payments[refund.settlement_id]
        assert paid.merchant_id != UNKNOWN_MERCHANT
        assert refund.currency == paid.currency and 0 < refund.amount_minor <= paid.amount_minor
    assert any(e.expect_parked for e in payments.values())


def test_deliveries_are_shuffled_but_a_refund_never_precedes_its_payment():
    gen = LoadGen(["http://127.0.0.1:1"], LoadSpec(events=300, seed=2))
    order = gen._order()
    assert len(order) == gen.total
    first_payment: dict[str, int] = {}
    for position, (event, _) in enumerate(order):
        if event.kind == "payment":
            first_payment.setdefault(event.settlement_id or "", position)
        elif event.kind == "refund":
            assert first_payment[event.settlement_id or ""] < position
    kinds = [e.kind for e, _ in order[:50]]
    assert len(set(kinds)) > 2  # shuffled, not grouped by kind
