"""Request verification: refused before anything is stored (answered 4xx)."""

from __future__ import annotations

from gateway.errors.base import GatewayError
from gateway.errors.codes import ErrorClass


class RequestRejected(GatewayError):
    """The request is refused before anything is stored."""

    status_code: int = 400


class SignatureError(RequestRejected):
    """The request's signature cannot be trusted (answered 401)."""

    status_code = 401
    error_class = ErrorClass.SIGNATURE_INVALID


class SignatureMissing(SignatureError):
    """A header the signature scheme needs is absent."""

    error_class = ErrorClass.SIGNATURE_MISSING


class SignatureMalformed(SignatureError):
    """A signature header is present but cannot be parsed."""

    error_class = ErrorClass.SIGNATURE_MALFORMED


class SignatureMismatch(SignatureError):
    """No configured secret produces any of the signatures offered."""

    error_class = ErrorClass.SIGNATURE_MISMATCH


class TimestampOutOfWindow(SignatureError):
    """The signed timestamp is too old or too far in the future."""

    error_class = ErrorClass.TIMESTAMP_OUT_OF_WINDOW


class SigningCertificateRefused(SignatureError):
    """The certificate a request points to is not one its provider signs with: off the
    provider's hosts, untrusted, expired, or not its name (PayPal)."""


class Unauthorized(RequestRejected):
    """An internal publisher's bearer token is missing or unknown (401)."""

    status_code = 401
    error_class = ErrorClass.UNAUTHORIZED


class Forbidden(RequestRejected):
    """An authenticated publisher asked for a subject outside its scope (403)."""

    status_code = 403
    error_class = ErrorClass.FORBIDDEN


class UnknownProvider(RequestRejected):
    """No provider of that name is configured (404)."""

    status_code = 404
    error_class = ErrorClass.UNKNOWN_PROVIDER


class BodyTooLarge(RequestRejected):
    """The body exceeds `http.max_body_bytes` (413)."""

    status_code = 413
    error_class = ErrorClass.BODY_TOO_LARGE


class BatchTooLarge(RequestRejected):
    """A request carries more items, or a larger item, than its provider's batch
    bounds allow (413): refused whole, before any row is written."""

    status_code = 413
    error_class = ErrorClass.BATCH_TOO_LARGE


class EventIdMissing(RequestRejected):
    """The request cannot be parsed enough to find its event id (400)."""

    status_code = 400
    error_class = ErrorClass.EVENT_ID_MISSING


class BadRequest(RequestRejected):
    """The request is malformed in a way the sender must fix (400)."""

    status_code = 400
    error_class = ErrorClass.BAD_REQUEST


class ClientGone(GatewayError):
    """The client disconnected before its body arrived; nothing was recorded."""

    error_class = ErrorClass.CLIENT_DISCONNECT
