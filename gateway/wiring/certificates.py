"""The certificate stores of `gateway serve`: one per configured provider that signs
with a certificate its requests point to (PayPal), each with its own HTTP client."""

from __future__ import annotations

import contextlib

from gateway.adapters.paypal_certs import opened_store
from gateway.core.providers import get_provider
from gateway.errors import ConfigError
from gateway.ingest.certified import CertificateFetcher
from gateway.settings import Settings
from gateway.settings.certificate_params import CERT_EXTRA_CA_FILE


async def certificate_stores(
    settings: Settings, exits: contextlib.AsyncExitStack
) -> dict[str, CertificateFetcher]:
    """A store per provider whose scheme needs one, closed when `exits` closes.
    `ConfigError` naming `cert_extra_ca_file` when that file holds no CA to read."""
    stores: dict[str, CertificateFetcher] = {}
    for name, provider in settings.providers.items():
        if get_provider(provider.scheme).certificate is None:
            continue
        extra_ca_file = provider.params.extra.get(CERT_EXTRA_CA_FILE, "")
        try:
            stores[name] = await exits.enter_async_context(opened_store(extra_ca_file))
        except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
            if not extra_ca_file:
                raise
            raise ConfigError(
                f"providers.{name}.{CERT_EXTRA_CA_FILE}",
                f"cannot read PEM certificates from {extra_ca_file!r} ({type(exc).__name__})",
            ) from None
    return stores
