"""What a consumer does with a message whose processing failed: retry it after a delay,
or park it in the dead-letter table, and what the dead-letter row records. Pure: the
delivery count and randomness come in."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from gateway.core.events.model import Failure
from gateway.core.failures.classify import is_transient
from gateway.core.failures.retry import CONSUMER_DEFAULT, LEDGER, RetryPolicy, next_delay_s
from gateway.errors import (
    ErrorClass,
    GatewayError,
    LedgerUnavailable,
    PermanentError,
    RetryScheduled,
    error_class_of,
)

__all__ = ["Action", "Disposition", "Policies", "dispose", "error_class_of", "failure_of"]


class Action(enum.StrEnum):
    """The consumer's next step for a failed message."""

    RETRY = "retry"  # nak with a delay; redelivered later
    DEAD_LETTER = "dead_letter"  # write the DLQ row, then term


@dataclass(frozen=True)
class Disposition:
    """The decision, with what the DLQ row and the alert need to know."""

    action: Action
    error_class: ErrorClass
    delay_s: float | None = None
    critical: bool = False


def failure_of(exc: BaseException, stack: str, *, permanent_stack: bool = True) -> Failure:
    """How `exc` is recorded in a dead-letter row, by the worker and by replay alike;
    `stack` is its formatted traceback (`traceback.format_exception`, which ends with the
    exception's type and text), read by the caller since formatting reads source files.

    Our errors keep their code and message. Every other exception is stored under the one
    code `UNEXPECTED_ERROR`, its type leading the message ("KeyError: 'x'") and closing
    the stack in `error_detail`, so a replay that fails the way the worker did keeps the
    row's code. `permanent_stack=False` leaves the stack out for permanent errors, whose
    message says it all.
    """
    if isinstance(exc, GatewayError):
        keep = permanent_stack or not isinstance(exc, PermanentError)
        return Failure(exc.error_class, str(exc) or type(exc).__name__, stack if keep else None)
    return Failure(ErrorClass.UNEXPECTED_ERROR, f"{type(exc).__name__}: {exc}", stack)


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
