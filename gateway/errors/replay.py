"""Dead-letter replay: why a row's stage cannot run again as it did."""

from __future__ import annotations

from gateway.errors.base import PermanentError
from gateway.errors.codes import ErrorClass
from gateway.errors.pipeline import PayloadInvalid


class ProviderNotConfigured(PermanentError):
    """The row's provider is no longer in the configuration."""

    error_class = ErrorClass.PROVIDER_NOT_CONFIGURED


class StillInvalid(PayloadInvalid):
    """The payload still fails validation under the current configuration."""

    def __init__(self, error_class: ErrorClass, message: str) -> None:
        super().__init__(message)
        self.error_class = error_class  # the same class the live path would record


class EventIdChanged(PermanentError):
    """The current configuration reads a different event id from the stored request."""

    error_class = ErrorClass.EVENT_ID_CHANGED


class EventNotRecorded(PermanentError):
    """No `processed_webhooks` row exists for the event; replay never inserts one."""

    error_class = ErrorClass.EVENT_NOT_RECORDED


class PayloadRemoved(PermanentError):
    """Retention removed the event's payload (`[retention] payload_max_age_s`): there is
    nothing left to replay or re-publish."""

    error_class = ErrorClass.PAYLOAD_REMOVED
