"""Check a settlement worker's log against the retry schedules of the error policy.

Every `settlement will be retried` line names the error class, the delivery that failed
and the delay chosen; the delay must be the schedule's entry for that delivery ±20 %
(the policy's jitter band). Every `settlement dead-lettered` line for a transient class
must come after its schedule was spent. Unexpected errors (`UNEXPECTED_ERROR`) are retried
like transient ones, on the consumer schedule.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gateway.errors import ErrorClass

RATE_CLASSES = frozenset({"RATE_UNAVAILABLE", "RATE_STALE", "RATE_SERVICE_UNAVAILABLE"})
TRANSIENT_CLASSES = RATE_CLASSES | {
    "DATABASE_UNAVAILABLE",
    "LEDGER_UNAVAILABLE",
    "PAYMENT_NOT_SETTLED",
    "TRANSIENT",
}


@dataclass
class ScheduleCheck:
    """How many retries were seen, by class, and which broke the schedule."""

    retries: dict[str, int] = field(default_factory=dict)
    dead_letters: dict[str, int] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)


def schedule_for(error_class: str, settings: Mapping[str, Any]) -> list[float]:
    """The delays that apply to `error_class`, from the config document."""
    if error_class in RATE_CLASSES:
        return list(settings["currency"]["retry_delays_s"])
    if error_class == "LEDGER_UNAVAILABLE":
        return list(settings["ledger"]["retry_delays_s"])
    return list(settings["settlement"]["retry_delays_s"])


def check_schedule(lines: Iterable[Mapping[str, Any]], doc: Mapping[str, Any]) -> ScheduleCheck:
    check = ScheduleCheck()
    for line in lines:
        error_class = str(line.get("error_class", ""))
        deliveries = int(line.get("deliveries", 0))
        if line.get("msg") == "settlement will be retried":
            check.retries[error_class] = check.retries.get(error_class, 0) + 1
            delays = schedule_for(error_class, doc)
            if not 1 <= deliveries <= len(delays):
                check.violations.append(f"{error_class}: retried after delivery {deliveries}")
                continue
            expected, delay = delays[deliveries - 1], float(line["delay_s"])
            if not expected * 0.8 - 1e-6 <= delay <= expected * 1.2 + 1e-6:
                check.violations.append(
                    f"{error_class}: delivery {deliveries} retried after {delay:.3f} s, "
                    f"schedule says {expected} s ±20 %"
                )
        elif line.get("msg") == "settlement dead-lettered":
            check.dead_letters[error_class] = check.dead_letters.get(error_class, 0) + 1
            transient = (
                error_class in TRANSIENT_CLASSES or error_class == ErrorClass.UNEXPECTED_ERROR
            )
            if transient and deliveries <= len(schedule_for(error_class, doc)):
                check.violations.append(
                    f"{error_class}: dead-lettered after only {deliveries} deliveries"
                )
    return check
