"""The pure decisions between the settlement steps, table-driven: which items go on,
which are decided (an outcome or an exception) and which are left to settle alone."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest

from gateway.adapters.postgres.settlements import SettlementRow
from gateway.core.events.model import Event
from gateway.core.ledger.port import TransferResult
from gateway.core.settlement.instructions import (
    SettlementInstruction,
    SettlementKind,
    SettlementState,
    transfer_id,
)
from gateway.errors import (
    InvalidAmount,
    LedgerIdCollision,
    LedgerUnavailable,
    MissingField,
    PaymentNotSettled,
    UnknownAccount,
)
from gateway.settlement.items import (
    Item,
    Posting,
    Priced,
    Routed,
    SettleOutcome,
    Tally,
    Triage,
    items_of,
    step_failed,
)
from gateway.settlement.route import route
from gateway.settlement.steps import Found, build, interpreted, outcome

S = SettleOutcome
CAPTURE, REFUND = SettlementKind.CAPTURE, SettlementKind.REFUND


def instruction(pi: str, kind: SettlementKind = CAPTURE, amount: int = 1000,
                merchant: str | None = "m_1") -> SettlementInstruction:  # fmt: skip
    refund_id = f"re_{pi}" if kind is REFUND else None
    return SettlementInstruction(pi, kind, merchant, amount, "USD", refund_id, f"evt_{pi}")


def event(name: str) -> Event:
    return Event("stripe", name, "payment_intent.succeeded", "webhooks.stripe.x", {}, b"{}",
                 datetime.now(UTC))  # fmt: skip


def item(index: int, found: SettlementInstruction) -> Item:
    return Item(index, event(f"e{index}"), 1, found, transfer_id(found))


def row(
    found: SettlementInstruction,
    state: SettlementState,
    amount: int | None = None,
    rate: str | None = None,
    merchant: str = "m_1",
) -> SettlementRow:
    """`found` as stored: `amount` and `rate` once an attempt fixed them."""
    stored_rate = None if rate is None else Decimal(rate)
    tid, kind, currency = transfer_id(found), found.kind.value, found.currency
    return SettlementRow(tid, kind, found.settlement_id, merchant, state, found.amount_minor,
                         currency, amount, stored_rate, 1)  # fmt: skip


def index_of(x: object) -> int:
    """The work index of whatever a step hands on."""
    if isinstance(x, tuple):
        x = x[0]
    if isinstance(x, Posting):
        x = x.priced
    if isinstance(x, Routed | Priced):
        x = x.item
    if not isinstance(x, Item):
        raise TypeError(x)
    return x.index


def what(triage: Triage[Any]) -> tuple[list[int], dict[int, object], list[int]]:
    """(indexes going on, decided by index as an outcome or exception type, left alone)."""
    on = [index_of(x) for x in triage.go_on]
    decided: dict[int, object] = {
        i: r if isinstance(r, SettleOutcome) else type(r) for i, r in triage.decided.items()
    }
    return on, decided, [i.index for i in triage.alone]


PAID, REFUNDED = instruction("pi_1"), instruction("pi_1", REFUND, 300, merchant=None)


@pytest.mark.parametrize(
    ("case", "stored", "captures", "alone", "expected"),
    [
        # Nothing stored: a capture goes on with its own merchant, alone or not.
        ("new capture", None, {}, False, ([0], {}, [])),
        ("new capture alone", None, {}, True, ([0], {}, [])),
        # Settled before: a duplicate, nothing moves.
        ("settled", SettlementState.SETTLED, {}, False, ([], {0: S.DUPLICATE}, [])),
        # Started before: in a batch it settles alone; alone it goes on with its fixed amount.
        ("pending in a batch", SettlementState.PENDING, {}, False, ([], {}, [0])),
        ("pending alone", SettlementState.PENDING, {}, True, ([0], {}, [])),
    ],
)
def test_route_a_capture(
    case: str,
    stored: SettlementState | None,
    captures: dict[str, SettlementRow],
    alone: bool,
    expected: object,
) -> None:
    """A capture against what is stored for it."""
    rows = {} if stored is None else {transfer_id(PAID): row(PAID, stored, 1000, "1")}
    assert what(route([item(0, PAID)], Found(rows, captures), alone=alone)) == expected


@pytest.mark.parametrize(
    ("payment", "alone", "expected"),
    [
        # The payment settled: the refund posts for the payment's merchant.
        (SettlementState.SETTLED, False, ([0], {}, [])),
        # Not settled (yet): in a batch it waits for the batch; alone it is retried.
        (SettlementState.PENDING, False, ([], {}, [0])),
        (None, False, ([], {}, [0])),
        (SettlementState.PENDING, True, ([], {0: PaymentNotSettled}, [])),
        (None, True, ([], {0: PaymentNotSettled}, [])),
    ],
)
def test_route_a_refund(payment: SettlementState | None, alone: bool, expected: object) -> None:
    """A refund follows its payment's settlement."""
    captures = {} if payment is None else {"pi_1": row(PAID, payment, merchant="m_9")}
    triage = route([item(0, REFUNDED)], Found({}, captures), alone=alone)
    assert what(triage) == expected
    assert [r.merchant for r in triage.go_on] == (["m_9"] if triage.go_on else [])


def test_route_fixes_the_stored_amount_only_when_both_amount_and_rate_are_stored() -> None:
    """An earlier attempt's amount and rate are re-used only when both were stored."""
    for amount, rate, fixed in [(1080, "1.08", (1080, Decimal("1.08"))), (None, None, None)]:
        rows = {transfer_id(PAID): row(PAID, SettlementState.PENDING, amount, rate)}
        [routed] = route([item(0, PAID)], Found(rows, {}), alone=True).go_on
        assert routed.fixed == fixed


@pytest.mark.parametrize(
    ("case", "found", "expected"),
    [
        # Another amount for the same settlement id: the critical id collision.
        ("another amount", instruction("pi_1", amount=999), LedgerIdCollision),
        # Another merchant named for it: the same.
        ("another merchant", instruction("pi_1", merchant="m_2"), LedgerIdCollision),
        # A capture naming no merchant: the field is missing.
        ("no merchant", instruction("pi_2", merchant=None), MissingField),
    ],
)
def test_route_decides_an_events_own_error(
    case: str, found: SettlementInstruction, expected: type
) -> None:
    """A repeat that says something else, or a capture without a merchant, is its own error."""
    rows = {transfer_id(PAID): row(PAID, SettlementState.PENDING)}
    assert what(route([item(3, found)], Found(rows, {}), alone=False)) == ([], {3: expected}, [])


def test_items_of_ignores_what_does_not_settle_and_defers_a_repeat() -> None:
    """Instructions per event: an error or None is decided, a second event of one
    settlement is left to settle alone after the first."""
    by_name = {"e0": PAID, "e1": None, "e2": PAID, "e3": instruction("pi_3")}

    def look(e: Event) -> SettlementInstruction | None:
        if e.event_id == "bad":
            raise MissingField("data.object")
        return by_name[e.event_id]

    work = [(event(name), 1) for name in ["e0", "e1", "bad", "e2", "e3"]]
    assert what(items_of(work, look)) == ([0, 4], {1: S.IGNORED, 2: MissingField}, [3])


def test_build_decides_an_amount_out_of_range_per_item() -> None:
    """A converted amount of nothing is the item's own InvalidAmount; the others post."""
    priced = [Priced(item(0, PAID), "m_1", 1080, Decimal("1.08"), "USD"),
              Priced(item(1, instruction("pi_2")), "m_1", 0, Decimal("0"), "USD")]  # fmt: skip
    triage = build(priced)
    assert what(triage) == ([0], {1: InvalidAmount}, [])
    assert triage.go_on[0].transfer.amount_minor == 1080


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (TransferResult.CREATED, ([0], {}, [])),
        (TransferResult.EXISTS, ([0], {}, [])),  # posted before: success
        (TransferResult.EXISTS_WITH_DIFFERENT_FIELDS, ([], {0: LedgerIdCollision}, [])),
        (TransferResult.CREDIT_ACCOUNT_NOT_FOUND, ([], {0: UnknownAccount}, [])),
    ],
)
def test_interpreted_keeps_what_is_in_the_ledger(answer: TransferResult, expected: object) -> None:
    """The ledger's answer per transfer: in the ledger goes on, a refusal is the item's."""
    [posting] = build([Priced(item(0, PAID), "m_1", 1000, Decimal(1), "USD")]).go_on
    assert what(interpreted([(posting, answer)])) == expected


@pytest.mark.parametrize(
    ("answer", "expected"),
    [(TransferResult.CREATED, S.SETTLED), (TransferResult.EXISTS, S.DUPLICATE)],
)
def test_outcome(answer: TransferResult, expected: SettleOutcome) -> None:
    """A transfer created settled the event; one there already was a duplicate."""
    assert outcome(answer) is expected


@pytest.mark.parametrize(
    ("error", "alone", "expected"),
    [
        # An outage fails every item: the worker retries each on its schedule.
        (LedgerUnavailable("down"), False, ([], {0: LedgerUnavailable, 1: LedgerUnavailable}, [])),
        # Anything else in a batch: each settles alone, so one bad event cannot fail others.
        (RuntimeError("bug"), False, ([], {}, [0, 1])),
        # Settled alone already: the failure is the item's own.
        (RuntimeError("bug"), True, ([], {0: RuntimeError, 1: RuntimeError}, [])),
    ],
)
def test_step_failed(error: Exception, alone: bool, expected: object) -> None:
    """A batch-wide step's failure: fail its items, or leave them to settle alone."""
    items = [item(0, PAID), item(1, instruction("pi_2"))]
    assert what(step_failed(error, items, alone=alone)) == expected


def test_tally_keeps_each_steps_decisions() -> None:
    """The tally gathers what each step decided and hands on what goes on."""
    tally = Tally()
    first, second = item(0, PAID), item(1, instruction("pi_2"))
    assert tally.take(Triage([first], {5: S.IGNORED}, [second])) == [first]
    assert tally.take(Triage([], {0: S.DUPLICATE}, [])) == []
    assert tally.decided == {5: S.IGNORED, 0: S.DUPLICATE} and tally.alone == [second]
