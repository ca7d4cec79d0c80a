"""PayPal's signing certificates, fetched, judged and kept: the adapter behind
`Provider.certificate` (`core.signatures.paypal.chain` decides; this module does the I/O).

A request names its certificate (`PAYPAL-CERT-URL`); the URL is held to PayPal's hosts
before anything is fetched. The fetch, as backfill's API calls (`provider_api.http_json`):
- https with verified TLS (the system's roots, plus `cert_extra_ca_file` in tests);
- no redirect followed: a 3xx is a refusal, since the allow-list names the host that
  must answer;
- at most `ANSWER_BYTES_MAX` read, and the whole answer within `FETCH_TIMEOUT_S`.
What the host says decides the answer the sender gets: no answer (refused connection,
time out, a 5xx) is `SigningCertificateUnavailable`, answered 503 so PayPal sends the
event again; an answer that is not a trusted PayPal certificate (a 4xx, a redirect, a
bad chain, an expired one, a TLS peer that is not who it says) is
`SigningCertificateRefused`, answered 401. Either way nothing is stored.

Trusted certificates are kept by URL, at most `CACHE_ENTRIES_MAX` and each for
`CACHE_AGE_S_MAX` (PayPal's certificate URLs name one certificate each, so a URL's
answer does not change; the age bounds how long a revoked one would stay trusted).
Concurrent requests for one URL share a single fetch.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
import warnings
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

import certifi
import httpx
from cryptography import x509
from cryptography.utils import CryptographyDeprecationWarning

from gateway.adapters.http_answers import certificate_refused, read_capped
from gateway.core.signatures.paypal.chain import load_chain, trusted_leaf
from gateway.errors import SigningCertificateRefused, SigningCertificateUnavailable

log = logging.getLogger(__name__)

#: A certificate and two intermediates in PEM are about 6 KiB; PayPal's is one ~2 KiB.
ANSWER_BYTES_MAX = 64 * 1024
#: Under `[http] request_timeout_s` (10 s by default), so a slow host is a 503 of ours.
FETCH_TIMEOUT_S = 5.0
CACHE_ENTRIES_MAX = 64
CACHE_AGE_S_MAX = 3600.0

Clock = Callable[[], float]


def system_anchors() -> list[x509.Certificate]:
    """The system's trusted roots (OpenSSL's default CA file, else certifi's bundle)."""
    cafile = ssl.get_default_verify_paths().cafile
    path = Path(cafile) if cafile and Path(cafile).is_file() else Path(certifi.where())
    with warnings.catch_warnings():
        # Some distributions' bundles hold an old root with a non-positive serial,
        # which cryptography reads with a deprecation warning; PayPal's chain is not one.
        warnings.simplefilter("ignore", CryptographyDeprecationWarning)
        return x509.load_pem_x509_certificates(path.read_bytes())


def trust_anchors(extra_ca_file: str = "") -> list[x509.Certificate]:
    """The system's roots, plus `extra_ca_file`'s CAs when given (a test stand-in's)."""
    anchors = system_anchors()
    if extra_ca_file:
        anchors += x509.load_pem_x509_certificates(Path(extra_ca_file).read_bytes())
    return anchors


class CertificateStore:
    """The trusted certificates of one provider's requests, by URL."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        anchors: Sequence[x509.Certificate],
        clock: Clock = time.time,
    ) -> None:
        self._client = client
        self._anchors = list(anchors)
        self._clock = clock
        self._cache: OrderedDict[str, tuple[x509.Certificate, float]] = OrderedDict()
        self._fetching: dict[str, asyncio.Future[x509.Certificate]] = {}

    async def trusted(self, url: str) -> x509.Certificate:
        """The trusted leaf certificate at `url` (already held to the allow-list)."""
        now_s = self._clock()
        held = self._cache.get(url)
        if held is not None and now_s - held[1] <= CACHE_AGE_S_MAX:
            self._cache.move_to_end(url)
            return held[0]
        pending = self._fetching.get(url)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[x509.Certificate] = asyncio.get_running_loop().create_future()
        self._fetching[url] = future
        try:
            leaf = await self._fetch_and_judge(url)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: no "never retrieved" warning when nobody waits
            raise
        finally:
            del self._fetching[url]
        future.set_result(leaf)
        self._cache[url] = (leaf, now_s)
        while len(self._cache) > CACHE_ENTRIES_MAX:
            self._cache.popitem(last=False)
        return leaf

    async def _fetch_and_judge(self, url: str) -> x509.Certificate:
        pem = await self._fetch(url)
        chain = load_chain(pem)
        return trusted_leaf(chain, self._anchors, datetime.fromtimestamp(self._clock(), UTC))

    async def _fetch(self, url: str) -> bytes:
        try:
            async with asyncio.timeout(FETCH_TIMEOUT_S):
                async with self._client.stream("GET", url) as response:
                    status = response.status_code
                    if 300 <= status < 400:
                        raise SigningCertificateRefused(
                            f"the certificate host answered {status}, a redirect; none is followed"
                        )
                    if status >= 500 or status == 429:
                        raise SigningCertificateUnavailable(
                            f"the certificate host answered {status}"
                        )
                    if status != 200:
                        raise SigningCertificateRefused(f"the certificate host answered {status}")
                    return await read_capped(response, ANSWER_BYTES_MAX, _too_large)
        except TimeoutError:
            raise SigningCertificateUnavailable(
                f"no certificate within {FETCH_TIMEOUT_S:g} s"
            ) from None
        except httpx.TransportError as exc:
            if certificate_refused(exc):
                raise SigningCertificateRefused(
                    "the certificate host's TLS certificate is not trusted"
                ) from exc
            raise SigningCertificateUnavailable(
                f"the certificate host did not answer ({type(exc).__name__})"
            ) from exc


def _too_large(declared: int | None) -> SigningCertificateRefused:
    if declared is not None:
        return SigningCertificateRefused(f"the certificate answer declares {declared} bytes")
    return SigningCertificateRefused(f"the certificate answer passed {ANSWER_BYTES_MAX} B")


def tls_context(extra_ca_file: str) -> ssl.SSLContext:
    """Verified TLS with the system's roots, plus `extra_ca_file`'s CAs when given."""
    context = ssl.create_default_context()
    if extra_ca_file:
        context.load_verify_locations(cafile=extra_ca_file)
    return context


@contextlib.asynccontextmanager
async def opened_store(extra_ca_file: str = "") -> AsyncIterator[CertificateStore]:
    """A `CertificateStore` with its own client, closed on exit. The anchors are the
    system's, plus `extra_ca_file`'s (a test stand-in's CA)."""
    anchors = trust_anchors(extra_ca_file)  # read once, at start-up
    limits = httpx.Limits(max_connections=8, max_keepalive_connections=4)
    async with httpx.AsyncClient(
        verify=tls_context(extra_ca_file),
        follow_redirects=False,
        trust_env=False,  # a proxy from the environment is not PayPal's host
        limits=limits,
        timeout=FETCH_TIMEOUT_S,
    ) as client:
        yield CertificateStore(client, anchors)
