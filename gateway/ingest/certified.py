"""Requests verified with the certificate they point to (PayPal's): the certificate is
fetched, judged and cached by an adapter (`gateway.adapters.paypal_certs`) between
reading the body and verifying it, so the verification itself stays pure and
synchronous like every other provider's.

`webhook_shaper` gives such a provider a `NeedsCertificate` instead of a plain shaper;
`ingest` awaits `resolved` and then shapes as for any other request.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Protocol

from cryptography import x509

from gateway.core.events.model import Event
from gateway.core.events.shaper import WebhookShaper
from gateway.core.providers.base import CertificateSource
from gateway.core.signatures.base import Headers, SchemeParams
from gateway.errors import SigningCertificateUnavailable


class CertificateFetcher(Protocol):
    """Trusted certificates by URL (`adapters.paypal_certs.CertificateStore`)."""

    async def trusted(self, url: str) -> x509.Certificate:
        """The trusted leaf at url; raises `SigningCertificateRefused` (401) or
        `SigningCertificateUnavailable` (503)."""
        ...


class NeedsCertificate:
    """One provider's shaper, waiting for the certificate a request names."""

    def __init__(
        self,
        provider: str,
        source: CertificateSource,
        params: SchemeParams,
        shape_event: WebhookShaper,
        replay_digest: Callable[[SchemeParams, Headers, bytes], bytes | None],
    ) -> None:
        self.provider = provider
        self._locate = source.locate
        self._verify = source.verifier(params)
        self._params = params
        self._shape_event = shape_event
        self._replay_digest = replay_digest

    async def resolved(
        self, headers: Headers, fetchers: dict[str, CertificateFetcher]
    ) -> Callable[[Headers, bytes], Event]:
        """The shaper for this request, its certificate fetched: the URL is held to the
        allow-list first (a refusal fetches nothing)."""
        url = self._locate(self._params, headers)
        fetcher = fetchers.get(self.provider)
        if fetcher is None:  # the composition root opens one per such provider
            raise SigningCertificateUnavailable(f"no certificate fetcher for {self.provider}")
        certificate = await fetcher.trusted(url)

        def shape(headers: Headers, body: bytes) -> Event:
            self._verify(headers, body, time.time(), certificate)
            digest = self._replay_digest(self._params, headers, body)
            return self._shape_event(headers, body, datetime.now(UTC), digest)

        return shape

    def __call__(self, headers: Headers, body: bytes) -> Event:
        """Not callable before `resolved`: refused, as an unverifiable request."""
        raise SigningCertificateUnavailable("the signing certificate was not fetched")
