"""Ingest, storage and publishing: a verified event's body, PostgreSQL and NATS."""

from __future__ import annotations

from gateway.errors.base import GatewayError, PermanentError, TransientError
from gateway.errors.codes import ErrorClass


class PayloadInvalid(PermanentError):
    """A verified event's body fails validation (not JSON, wrong shape)."""

    error_class = ErrorClass.PAYLOAD_INVALID


class PayloadNotJson(PayloadInvalid):
    """The body of a verified event is not valid JSON where JSON is required."""

    error_class = ErrorClass.PAYLOAD_NOT_JSON


class ConfirmationMismatch(PayloadInvalid):
    """The provider's API answered about another object than the webhook named (another
    id): what it answered is not this event's confirmation."""

    error_class = ErrorClass.CONFIRMATION_MISMATCH


class VerifyAmountMismatch(ConfirmationMismatch):
    """The provider refused to verify a payment for the amount of its order."""

    error_class = ErrorClass.VERIFY_AMOUNT_MISMATCH


class ConfirmationNotFound(PayloadInvalid):
    """The provider's API answered that it knows no such payment, or none paid (a
    forged or abandoned callback), in the body of its answer."""

    error_class = ErrorClass.CONFIRMATION_NOT_FOUND


class DatabaseError(GatewayError):
    """PostgreSQL refused a statement for a reason retrying will not fix."""

    error_class = ErrorClass.DATABASE_ERROR

    def __init__(self, message: str, sqlstate: str | None) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate


class DatabaseUnavailable(TransientError):
    """PostgreSQL cannot be reached or cannot commit right now."""

    error_class = ErrorClass.DATABASE_UNAVAILABLE


class SigningCertificateUnavailable(TransientError):
    """The certificate a request points to could not be fetched now (its host did not
    answer, or not in time): answered 503 so the provider sends the event again."""


class Overloaded(TransientError):
    """The acceptance queue is full; the sender should retry shortly (503)."""

    error_class = ErrorClass.OVERLOADED


class BrokerUnavailable(TransientError):
    """NATS cannot be reached right now."""

    error_class = ErrorClass.BROKER_UNAVAILABLE


class PayloadTooLarge(PermanentError):
    """The event with its NATS headers exceeds the broker's `max_payload`; it is parked at
    stage `publish`."""

    error_class = ErrorClass.PAYLOAD_TOO_LARGE


class PublishAttemptsExhausted(PermanentError):
    """The event failed to publish `outbox.max_publish_attempts` times; it is parked."""

    error_class = ErrorClass.PUBLISH_ATTEMPTS_EXHAUSTED


class StreamMessageUnreadable(PermanentError):
    """A message on the stream cannot be read as an event: a gateway header its consumer
    needs is absent or malformed. It is parked with the headers and body it had."""

    error_class = ErrorClass.STREAM_MESSAGE_UNREADABLE

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
