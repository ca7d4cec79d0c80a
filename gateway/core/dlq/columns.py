"""The dead-letter list's derived columns, for `gateway dlq list` and the console's list:
how severe a row is (from its error class), and the amount its event would have moved
(read from the stored body as the settlement worker reads it). Pure.

The amount is read from the payload: the console shows it only to roles that may read
payloads (`core.payload_text`); JSON documents keep minor units and the currency, the
tables print it with its decimals and currency (`core.money.format_minor`).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from gateway.core.money import format_minor
from gateway.core.ordering.keys import KeyRule
from gateway.core.providers.movements import instruction_of
from gateway.errors import ErrorClass, Family, GatewayError

#: The most body bytes a list reads to find a row's amount: a page of 50 rows reads at
#: most 3.2 MB, never 50 payloads of 1 MiB; a larger body's amount is left unread.
AMOUNT_BODY_MAX_BYTES = 64 * 1024


class Severity(enum.StrEnum):
    """How urgently a dead letter wants a person, most urgent first."""

    #: The ledger may be inconsistent or its outcome is unknown: the classes the
    #: settlement worker raises a critical alert for.
    CRITICAL = "critical"
    #: Retrying cannot help: the event's data, an account or a rule must be fixed.
    ERROR = "error"
    #: A dependency failed past its retries: replaying once it answers should do.
    WARNING = "warning"


#: Classes the worker alerts on as critical (their errors say `critical`, and a ledger
#: that stopped answering leaves the outcome unknown); tests hold this to the errors.
CRITICAL_CLASSES = frozenset(
    {ErrorClass.LEDGER_IMBALANCE, ErrorClass.LEDGER_ID_COLLISION, ErrorClass.LEDGER_UNAVAILABLE}
)


def severity_of(error_class: str) -> Severity:
    """A stored class's severity; a class this gateway does not know (a row written by
    another version) is an error, never quietly a warning."""
    try:
        member = ErrorClass(error_class.upper())
    except ValueError:
        return Severity.ERROR
    if member in CRITICAL_CLASSES:
        return Severity.CRITICAL
    return Severity.WARNING if member.family is Family.TRANSIENT else Severity.ERROR


@dataclass(frozen=True)
class Amount:
    amount_minor: int
    currency: str

    def text(self) -> str:
        """As a person reads it: `12.00 USD`."""
        return format_minor(self.amount_minor, self.currency)

    def doc(self) -> dict[str, object]:
        """As JSON carries it: minor units and the currency."""
        return {"amount_minor": self.amount_minor, "currency": self.currency}


def amount_of(
    provider: str,
    event_type: str | None,
    body: bytes | None,
    schemes: Mapping[str, str],
    merchants: Mapping[str, tuple[KeyRule, ...]] | None = None,
) -> Amount | None:
    """The amount the event moves, or None: no body (removed, or too large to read for
    a list), an event that moves no money, or a body its mapping cannot read."""
    if body is None or len(body) > AMOUNT_BODY_MAX_BYTES:
        return None
    try:
        found = instruction_of(provider, event_type, body, schemes, merchants)
    except (GatewayError, ValueError):  # the row is parked for what makes it unreadable
        return None
    if found is None:
        return None
    return Amount(found.amount_minor, found.currency)
