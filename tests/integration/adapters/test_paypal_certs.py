"""The PayPal certificate store against a local HTTPS stand-in of PayPal's certificate
host: what each answer becomes (trusted, refused, unavailable), and the cache's
bounds on age and count, and its single fetch per URL."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest

from gateway.adapters import paypal_certs
from gateway.adapters.paypal_certs import (
    CACHE_AGE_S_MAX,
    CACHE_ENTRIES_MAX,
    CertificateStore,
    opened_store,
)
from gateway.core.signatures.base import SchemeParams
from gateway.errors import ConfigError, SigningCertificateRefused, SigningCertificateUnavailable
from gateway.settings import Settings
from gateway.settings.certificate_params import CERT_EXTRA_CA_FILE
from gateway.wiring.certificates import certificate_stores
from tests.support.paypal import (
    ANY_VALID_PREFIX,
    BROKEN_PATH,
    DECLARED_HUGE_PATH,
    EXPIRED_PATH,
    FORGED_PATH,
    HUGE_PATH,
    REDIRECT_PATH,
    TRICKLE_PATH,
    CertHost,
    PayPalKeys,
    cert_host,
)

KEYS = PayPalKeys()


@pytest.fixture
def host(tmp_path: Path) -> Iterator[CertHost]:
    with cert_host(KEYS, tmp_path) as running:
        yield running


@pytest.mark.parametrize(
    ("path", "error"),
    [
        (FORGED_PATH, SigningCertificateRefused),
        (EXPIRED_PATH, SigningCertificateRefused),
        (REDIRECT_PATH, SigningCertificateRefused),
        (HUGE_PATH, SigningCertificateRefused),  # no length declared: cut off at 64 KiB
        # A declared megabyte is refused before reading (what follows is a valid
        # certificate and an early close, which, read, would be a 503).
        (DECLARED_HUGE_PATH, SigningCertificateRefused),
        ("/v1/notifications/certs/CERT-unknown", SigningCertificateRefused),  # 404
        (BROKEN_PATH, SigningCertificateUnavailable),  # 500: PayPal's trouble, retried
    ],
)
async def test_each_answer_is_judged(host: CertHost, path: str, error: type[Exception]) -> None:
    async with opened_store(str(host.ca_file)) as store:
        assert await store.trusted(host.url()) == KEYS.cert
        with pytest.raises(error):
            await store.trusted(host.url(path))


async def test_a_host_whose_tls_is_not_trusted_is_refused(host: CertHost) -> None:
    """Without the test CA, the stand-in's TLS is nobody's: refused, not retried."""
    async with opened_store() as store:
        with pytest.raises(SigningCertificateRefused):
            await store.trusted(host.url())


async def test_a_trickled_answer_is_cut_off_by_the_whole_fetchs_time(
    host: CertHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each read of a byte every 50 ms passes a per-read timeout; the whole answer
    has `FETCH_TIMEOUT_S`, and a host too slow is PayPal's trouble: 503, retried."""
    monkeypatch.setattr(paypal_certs, "FETCH_TIMEOUT_S", 0.5)
    async with opened_store(str(host.ca_file)) as store:
        started = time.monotonic()
        with pytest.raises(SigningCertificateUnavailable):
            await store.trusted(host.url(TRICKLE_PATH))
        assert time.monotonic() - started < 2.0  # the trickle lasts 3 s


class Clock:
    def __init__(self) -> None:
        self.now_s = KEYS.cert.not_valid_before_utc.timestamp() + 3600

    def __call__(self) -> float:
        return self.now_s


async def test_the_cache_is_bounded_by_age_and_count(
    host: CertHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    async with opened_store(str(host.ca_file)) as opened:
        store = CertificateStore(opened._client, opened._anchors, clock)
        first = host.url(ANY_VALID_PREFIX + "0")
        await store.trusted(first)
        await store.trusted(first)
        assert host.requests.count(first[len(host.base) :]) == 1  # kept
        clock.now_s += CACHE_AGE_S_MAX + 1
        await store.trusted(first)
        assert host.requests.count(first[len(host.base) :]) == 2  # too old: fetched again
        monkeypatch.setattr(paypal_certs, "CACHE_ENTRIES_MAX", 3)
        for n in range(1, 4):
            await store.trusted(host.url(f"{ANY_VALID_PREFIX}{n}"))
        await store.trusted(first)  # pushed out by three newer ones
        assert host.requests.count(first[len(host.base) :]) == 3
        assert CACHE_ENTRIES_MAX == 64


async def test_concurrent_requests_for_one_url_share_one_fetch(host: CertHost) -> None:
    async with opened_store(str(host.ca_file)) as store:
        url = host.url(ANY_VALID_PREFIX + "shared")
        found = await asyncio.gather(*(store.trusted(url) for _ in range(20)))
        assert all(cert == KEYS.cert for cert in found)
        assert host.requests == [url[len(host.base) :]]


@pytest.mark.parametrize("content", [None, b"", b"not a certificate"])
async def test_an_extra_ca_file_without_cas_is_a_config_error_naming_it(
    tmp_path: Path, content: bytes | None
) -> None:
    """Missing, empty or not PEM: `gateway serve` stops at start-up naming the key."""
    ca_file = tmp_path / "ca.pem"
    if content is not None:
        ca_file.write_bytes(content)
    extra = {"webhook_id": "WH", CERT_EXTRA_CA_FILE: str(ca_file)}
    provider = SimpleNamespace(scheme="paypal", params=SchemeParams(secrets=(), extra=extra))
    settings = cast(Settings, SimpleNamespace(providers={"pp": provider}))
    async with contextlib.AsyncExitStack() as exits:
        with pytest.raises(ConfigError) as raised:
            await certificate_stores(settings, exits)
    assert raised.value.key == "providers.pp.cert_extra_ca_file"
