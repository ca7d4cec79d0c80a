"""Backfill from the providers' APIs: answers that cannot be used."""

from __future__ import annotations

from gateway.errors.base import PermanentError, TransientError
from gateway.errors.codes import ErrorClass


class ProviderApiAuth(PermanentError):
    """The provider's API refused the credentials (401/403): fix `api_key_env`."""

    error_class = ErrorClass.PROVIDER_API_AUTH


class ProviderApiRefused(PermanentError):
    """The provider's API refused the request (a 4xx other than 401/403/408/429)."""

    error_class = ErrorClass.PROVIDER_API_REFUSED


class ProviderApiRedirected(ProviderApiRefused):
    """The provider's API answered a redirect; backfill follows none, so the key stays
    with `api_url`'s host."""

    error_class = ErrorClass.PROVIDER_API_REDIRECTED


class ProviderApiCertificate(ProviderApiRefused):
    """The API's TLS certificate is not trusted (or names another host)."""

    error_class = ErrorClass.PROVIDER_API_CERTIFICATE


class ProviderApiAnswerTooLarge(ProviderApiRefused):
    """An API answer grew past `api_max_answer_bytes`; reading stopped at the cap."""

    error_class = ErrorClass.PROVIDER_API_ANSWER_TOO_LARGE


class ProviderApiAnswerInvalid(ProviderApiRefused):
    """An API answer is not JSON of the listing's shape (a page that is a list, say)."""

    error_class = ErrorClass.PROVIDER_API_ANSWER_INVALID


class ProviderApiUnavailable(TransientError):
    """The provider's API kept failing (429, 5xx, no answer) past the run's deadline."""

    error_class = ErrorClass.PROVIDER_API_UNAVAILABLE
