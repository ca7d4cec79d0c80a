"""Where the runbook speaks of an error class: the section of the operations page for
it, chosen by the class's family and the stage it failed at. Pure.

What a class means comes from `gateway.errors.ErrorClass`, what to do about it from
`core.failures.actions` (the error-code reference's last column); this module adds only the
pointer to the procedure, so a page about one dead letter says all three without a copy
of the text.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.core.failures.actions import ACTIONS
from gateway.errors import ErrorClass, Family

PAGE = "docs/operations.md"

#: Classes with a section of their own, whatever their family.
_BY_CLASS = {
    ErrorClass.LEDGER_ID_COLLISION: "ledger-critical",
    ErrorClass.LEDGER_IMBALANCE: "ledger-critical",
    ErrorClass.LEDGER_REJECTED: "ledger-critical",
    ErrorClass.LEDGER_ID_ALREADY_FAILED: "ledger-critical",
    ErrorClass.ORDER_PREDECESSOR_MISSING: "ordered-keys",
    ErrorClass.BLOCKED_BY_PREDECESSOR: "ordered-keys",
    ErrorClass.PAYLOAD_REMOVED: "replay-outcomes",
    ErrorClass.PROVIDER_NOT_CONFIGURED: "replay-outcomes",
    ErrorClass.EVENT_ID_CHANGED: "replay-outcomes",
    ErrorClass.EVENT_NOT_RECORDED: "replay-outcomes",
    ErrorClass.NO_HANDLER: "replay-outcomes",
}
#: Permanent failures: the section is the stage's.
_PERMANENT_BY_STAGE = {
    "ingest": "events-parked-at-ingest",
    "publish": "publish-failures",
    "settlement": "settlement-data-and-accounts",
}
_BY_FAMILY = {
    Family.REJECTED: "refused-requests",
    Family.TRANSIENT: "retries-exhausted",
    Family.UNEXPECTED: "unexpected-exceptions-and-internal-errors",
    Family.INTERNAL: "unexpected-exceptions-and-internal-errors",
}


@dataclass(frozen=True)
class RunbookEntry:
    """What the runbook says about one class: its meaning, the action, the section."""

    error_class: str
    family: str
    meaning: str
    action: str
    section: str  # e.g. "docs/operations.md#publish-failures"


def runbook_entry(error_class: str, stage: str) -> RunbookEntry | None:
    """The entry for a stored class; None for a class this gateway does not know (a
    row written by another version)."""
    try:
        member = ErrorClass(error_class.upper())
    except ValueError:
        return None
    anchor = _BY_CLASS.get(member) or (
        _PERMANENT_BY_STAGE.get(stage, "runbook-by-error-class")
        if member.family is Family.PERMANENT
        else _BY_FAMILY.get(member.family, "runbook-by-error-class")
    )
    return RunbookEntry(
        error_class=member.value,
        family=member.family.value,
        meaning=member.description,
        action=ACTIONS[member],
        section=f"{PAGE}#{anchor}",
    )
