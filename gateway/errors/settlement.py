"""Settlement: the event's fields, amounts and currencies, the ledger."""

from __future__ import annotations

from gateway.errors.base import PermanentError, TransientError
from gateway.errors.codes import ErrorClass
from gateway.errors.pipeline import PayloadInvalid


class FieldError(PayloadInvalid):
    """A field of the event cannot be used; `field` is its path."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


class MissingField(FieldError):
    """A field the settlement needs is absent from the event; the message names it."""

    error_class = ErrorClass.MISSING_FIELD

    def __init__(self, field: str) -> None:
        super().__init__(f"missing field: {field}", field)


class FieldTypeInvalid(FieldError):
    """A field is present but of the wrong type or shape; the message names it."""

    error_class = ErrorClass.FIELD_TYPE_INVALID

    def __init__(self, field: str, expected: str) -> None:
        super().__init__(f"field {field}: expected {expected}", field)
        self.expected = expected


class InvalidAmount(PermanentError):
    """An amount is zero, negative, or rounds to nothing after conversion."""

    error_class = ErrorClass.INVALID_AMOUNT


class ProviderAmountInvalid(InvalidAmount):
    """An amount the provider's own minor-unit rules say it never sends (ISK with aurar)."""

    error_class = ErrorClass.PROVIDER_AMOUNT_INVALID


class UnsupportedPair(PermanentError):
    """The currency-service does not quote this currency pair."""

    error_class = ErrorClass.UNSUPPORTED_PAIR


class UnknownAccount(PermanentError):
    """A ledger account the transfer refers to does not exist."""

    error_class = ErrorClass.UNKNOWN_ACCOUNT


class UnknownMerchant(UnknownAccount):
    """The merchant has no ledger account; open one, then reprocess the event."""

    error_class = ErrorClass.UNKNOWN_MERCHANT


class InsufficientFunds(PermanentError):
    """The transfer would take an account below zero; held for manual review."""

    error_class = ErrorClass.INSUFFICIENT_FUNDS


class EventNotMapped(PermanentError):
    """A payment provider's event moves no money, and its provider parks such events."""

    error_class = ErrorClass.EVENT_NOT_MAPPED


class ExceedsPayment(PermanentError):
    """A refund or chargeback is larger than its payment's capture."""

    error_class = ErrorClass.EXCEEDS_PAYMENT


class PaymentMismatch(PermanentError):
    """A movement names a payment made in another currency."""

    error_class = ErrorClass.PAYMENT_MISMATCH


class LedgerIdCollision(PermanentError):
    """A transfer or account id already exists with different fields."""

    error_class = ErrorClass.LEDGER_ID_COLLISION
    critical = True


class LedgerIdAlreadyFailed(PermanentError):
    """The ledger refused this transfer id before and will refuse it forever."""

    error_class = ErrorClass.LEDGER_ID_ALREADY_FAILED


class LedgerRejected(PermanentError):
    """The ledger refused a transfer as malformed (our bug, not the event's)."""

    error_class = ErrorClass.LEDGER_REJECTED


class LedgerImbalance(PermanentError):
    """Total debits differ from total credits: the ledger is inconsistent."""

    error_class = ErrorClass.LEDGER_IMBALANCE
    critical = True


class LedgerBatchRaced(TransientError):
    """A transfer id of a batch was committed by someone else after it was looked up;
    the batch rolls back and is posted again (the PostgreSQL ledger handles it itself)."""

    error_class = ErrorClass.LEDGER_BATCH_RACED


class LedgerUnavailable(TransientError):
    """The ledger did not answer in time; the outcome is unknown, retry with the same ids."""

    error_class = ErrorClass.LEDGER_UNAVAILABLE


class RateServiceUnavailable(TransientError):
    """The currency-service did not answer usefully (down, slow, 5xx, bad body)."""

    error_class = ErrorClass.RATE_SERVICE_UNAVAILABLE


class RateUnavailable(TransientError):
    """No rate: the currency-service is down and no cached rate exists."""

    error_class = ErrorClass.RATE_UNAVAILABLE


class RateStale(TransientError):
    """The currency-service is down and the cached rate is too old to use."""

    error_class = ErrorClass.RATE_STALE


class PaymentNotSettled(TransientError):
    """A movement arrived before its payment settled; the payment may still arrive."""

    error_class = ErrorClass.PAYMENT_NOT_SETTLED


class OrderPredecessorMissing(PermanentError):
    """An earlier event of the same key did not arrive within `ordering.gap_timeout_s`:
    the event is parked and holds its key."""

    error_class = ErrorClass.ORDER_PREDECESSOR_MISSING


class BlockedByPredecessor(PermanentError):
    """An earlier event of the same key is parked: the event is parked behind it."""

    error_class = ErrorClass.BLOCKED_BY_PREDECESSOR
