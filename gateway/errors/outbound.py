"""Calls the gateway makes outwards: the alert webhook, the publishing client, `sign --send`,
forwarding to HTTP targets."""

from __future__ import annotations

from gateway.errors.base import GatewayError, PermanentError, TransientError
from gateway.errors.codes import ErrorClass


class AlertNotDelivered(TransientError):
    """The alert webhook did not answer 2xx; the notice is owed at the next evaluation."""

    error_class = ErrorClass.ALERT_NOT_DELIVERED


class PublishRejected(GatewayError):
    """The gateway refused the event (4xx); retrying will not help."""

    error_class = ErrorClass.PUBLISH_REJECTED

    def __init__(self, status_code: int, detail: str) -> None:
        super().__init__(f"{status_code}: {detail}")
        self.status_code = status_code


class PublishUnavailable(GatewayError):
    """The gateway could not record the event after every retry."""

    error_class = ErrorClass.PUBLISH_UNAVAILABLE


class SendFailed(GatewayError):
    """`gateway sign --send` got no HTTP answer from the URL."""

    error_class = ErrorClass.SEND_FAILED


class ForwardRefused(PermanentError):
    """The forwarding target answered 4xx, and the destination parks such events."""

    error_class = ErrorClass.FORWARD_REFUSED


class ForwardAttemptsExhausted(PermanentError):
    """The forwarding target failed every attempt of the destination's schedule."""

    error_class = ErrorClass.FORWARD_ATTEMPTS_EXHAUSTED
