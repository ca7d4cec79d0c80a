"""The roots of the tree and the retry wrappers.

Two roots carry the retry decision: anything under `TransientError` may succeed if tried
again later; anything under `PermanentError` never will, so it goes straight to the
dead-letter table. Anything else is retried like a transient failure (the error policy).
"""

from __future__ import annotations

from gateway.errors.codes import ErrorClass


class GatewayError(Exception):
    """Base class of every error the gateway raises on purpose."""

    #: The stable code stored in `dlq_webhooks.error_class` (see `ErrorClass`).
    error_class: ErrorClass = ErrorClass.GATEWAY_ERROR
    critical: bool = False  # True: also log at CRITICAL and send an alert

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self)!r})"


class PermanentError(GatewayError):
    """Retrying will not help; the event goes to the dead-letter table at once."""

    error_class = ErrorClass.PERMANENT


class TransientError(GatewayError):
    """May succeed if tried again later."""

    error_class = ErrorClass.TRANSIENT


class RetryScheduled(TransientError):
    """A dependency named its own retry delay (the currency schedule); `cause` says why."""

    def __init__(self, cause: GatewayError, delay_s: float) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.delay_s = delay_s
        self.error_class = cause.error_class


class RetriesExhausted(PermanentError):
    """A transient failure outlasted its retry schedule; `cause` is the last failure."""

    def __init__(self, cause: GatewayError) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.error_class = cause.error_class
        self.critical = cause.critical


def error_class_of(exc: BaseException) -> ErrorClass:
    """The code stored for `exc`: its own for our errors, else the one unexpected code
    (the exception's type then goes in the message and the stack, not in the code, so a
    dashboard or an `--error-class` filter has one name for every bug)."""
    if isinstance(exc, GatewayError):
        return exc.error_class
    return ErrorClass.UNEXPECTED_ERROR
