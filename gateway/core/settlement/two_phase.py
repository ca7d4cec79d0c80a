"""Authorisations, captures and voids of one payment: what each one does, given what
the payment has recorded so far. Pure; `gateway.settlement.two_phase` and the capture's
route ask it, under the payment's lock or from its recorded rows.

An authorisation reserves the amount for the merchant (a pending transfer); the capture
posts it, for the captured amount, and the rest of the reservation is released; a void
releases it all. Whatever the order of arrival, the posted balances end the same: a
capture always moves its money (posting the reservation when there is one to post, at
the authorisation's rate, else at once), an authorisation after its capture or its void
reserves nothing, and a void with nothing to release moves nothing.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from gateway.core.settlement.instructions import SettlementState


class Step(enum.StrEnum):
    """What a movement of a two-phase payment does."""

    #: The authorisation posts its pending transfer.
    RESERVE = "reserve"
    #: The capture posts the pending transfer (up to the authorised amount).
    POST = "post"
    #: The capture moves its money at once: there is no reservation to post.
    PLAIN = "plain"
    #: The capture is more than was authorised, or in another currency: the reservation
    #: is voided, then the capture moves at once.
    RELEASE_THEN_PLAIN = "release_then_plain"
    #: The void releases the reservation.
    VOID = "void"
    #: The authorisation is being posted right now: try again shortly.
    WAIT = "wait"
    #: Moves nothing; recorded, so that a later movement of the payment knows.
    NOTHING = "nothing"


@dataclass(frozen=True)
class Phases:
    """What a payment has recorded: its authorisation's state and amount, whether it
    was captured, whether it was voided (a void recorded, moving money or not)."""

    authorisation: SettlementState | None = None
    authorised_minor: int = 0
    authorised_currency: str = ""
    captured: bool = False
    voided: bool = False


def authorisation_step(phases: Phases) -> Step:
    """An authorisation after its capture or its void reserves nothing."""
    return Step.NOTHING if phases.captured or phases.voided else Step.RESERVE


def void_step(phases: Phases) -> Step:
    """A void releases a posted reservation that no capture has posted."""
    if phases.captured or phases.authorisation in (None, SettlementState.FAILED):
        return Step.NOTHING
    if phases.authorisation is SettlementState.PENDING:
        return Step.WAIT
    return Step.VOID


def capture_step(phases: Phases, capture_minor: int, currency: str) -> Step:
    """A capture posts the reservation when there is one to post, else moves at once."""
    state = phases.authorisation
    if state in (None, SettlementState.FAILED) or phases.voided:
        return Step.PLAIN
    if state is SettlementState.PENDING:
        return Step.WAIT
    if currency != phases.authorised_currency or capture_minor > phases.authorised_minor:
        return Step.RELEASE_THEN_PLAIN
    return Step.POST
