"""What a consumer does with a message whose processing failed: retry it after a delay,
or park it in the dead-letter table. Pure: the delivery count and randomness come in."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from gateway.core.classify import is_transient
from gateway.core.retry import CONSUMER_DEFAULT, LEDGER, RetryPolicy, next_delay_s
from gateway.errors import GatewayError, LedgerUnavailable, RetryScheduled


class Action(enum.StrEnum):
    """The consumer's next step for a failed message."""

    RETRY = "retry"  # nak with a delay; redelivered later
    DEAD_LETTER = "dead_letter"  # write the DLQ row, then term


@dataclass(frozen=True)
class Disposition:
    """The decision, with what the DLQ row and the alert need to know."""

    action: Action
    error_class: str
    delay_s: float | None = None
    critical: bool = False


def error_class_of(exc: BaseException) -> str:
    """The stable class name stored in the DLQ; unexpected errors use their type name."""
    if isinstance(exc, GatewayError):
        return exc.error_class
    return f"UNEXPECTED_{type(exc).__name__.upper()}"


@dataclass(frozen=True)
class Policies:
    """The retry tables a consumer applies, by the dependency that failed."""

    consumer: RetryPolicy = CONSUMER_DEFAULT
    ledger: RetryPolicy = LEDGER

    def policy_for(self, exc: BaseException) -> RetryPolicy:
        """The ledger's table for the ledger, the consumer default for the rest."""
        return self.ledger if isinstance(exc, LedgerUnavailable) else self.consumer


def dispose(
    exc: BaseException, deliveries: int, rand: Callable[[], float], policies: Policies = Policies()
) -> Disposition:
    """Decide after delivery number `deliveries` (1-based) failed with `exc`.

    Permanent errors go to the DLQ at once. Transient and unexpected ones are retried on
    their dependency's schedule, counting every failed delivery; when the schedule is
    exhausted the message goes to the DLQ, critically so for the ledger.
    """
    error_class = error_class_of(exc)
    if not is_transient(exc):
        critical = isinstance(exc, GatewayError) and exc.critical
        return Disposition(Action.DEAD_LETTER, error_class, critical=critical)
    if isinstance(exc, RetryScheduled):
        return Disposition(Action.RETRY, error_class, delay_s=exc.delay_s)
    delay_s = next_delay_s(policies.policy_for(exc), deliveries, rand)
    if delay_s is None:
        return Disposition(
            Action.DEAD_LETTER, error_class, critical=isinstance(exc, LedgerUnavailable)
        )
    return Disposition(Action.RETRY, error_class, delay_s=delay_s)
