"""What an authorisation, a capture and a void of one payment do, given what the
payment recorded (`core.settlement.two_phase`), table-driven."""

from __future__ import annotations

import pytest

from gateway.core.settlement.instructions import SettlementState
from gateway.core.settlement.two_phase import (
    Phases,
    Step,
    authorisation_step,
    capture_step,
    void_step,
)

SETTLED, PENDING, FAILED = SettlementState.SETTLED, SettlementState.PENDING, SettlementState.FAILED
NONE = Phases()
AUTHORISED = Phases(SETTLED, 1000, "USD")


@pytest.mark.parametrize(
    ("phases", "step"),
    [
        (NONE, Step.RESERVE),
        (Phases(captured=True), Step.NOTHING),  # captured before: nothing to reserve
        (Phases(voided=True), Step.NOTHING),  # voided before it came
    ],
)
def test_an_authorisation_reserves_unless_captured_or_voided(phases: Phases, step: Step) -> None:
    assert authorisation_step(phases) is step


@pytest.mark.parametrize(
    ("phases", "step"),
    [
        (AUTHORISED, Step.VOID),
        (NONE, Step.NOTHING),  # never authorised, or not yet: recorded, moves nothing
        (Phases(FAILED, 1000, "USD"), Step.NOTHING),
        (Phases(PENDING, 1000, "USD"), Step.WAIT),  # being posted right now
        (Phases(SETTLED, 1000, "USD", captured=True), Step.NOTHING),  # the capture posted it
    ],
)
def test_a_void_releases_a_posted_reservation_no_capture_posted(phases: Phases, step: Step) -> None:
    assert void_step(phases) is step


@pytest.mark.parametrize(
    ("phases", "amount", "currency", "step"),
    [
        (AUTHORISED, 1000, "USD", Step.POST),
        (AUTHORISED, 400, "USD", Step.POST),  # partial: the rest is released
        (AUTHORISED, 1001, "USD", Step.RELEASE_THEN_PLAIN),  # over the authorisation
        (AUTHORISED, 1000, "EUR", Step.RELEASE_THEN_PLAIN),  # another currency
        (NONE, 1000, "USD", Step.PLAIN),
        (Phases(FAILED, 1000, "USD"), 1000, "USD", Step.PLAIN),
        (Phases(SETTLED, 1000, "USD", voided=True), 1000, "USD", Step.PLAIN),
        (Phases(PENDING, 1000, "USD"), 1000, "USD", Step.WAIT),
    ],
)
def test_a_capture_always_moves_its_money(
    phases: Phases, amount: int, currency: str, step: Step
) -> None:
    assert capture_step(phases, amount, currency) is step
