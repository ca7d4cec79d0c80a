"""A `paypal` provider's own keys, read into `SchemeParams.extra`: the webhook id it
signs with, and the test-only stand-ins for PayPal's certificate host.

- `webhook_id` (required): the id PayPal's dashboard shows for this webhook; it is part
  of what PayPal signs and is never sent.
- `signing_cert_url`: the certificate URL `gateway sign` writes in the requests it
  signs with `secrets[0]` (a PEM RSA private key); never needed to verify.
- `cert_extra_hosts`, `cert_extra_ca_file`: a `host:port` a certificate may also come
  from, and a PEM file of CAs trusted besides the system's. For a local stand-in of
  PayPal's certificate host in tests; empty by default, and nothing a live PayPal
  webhook needs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.core.signatures.paypal.scheme import (
    CERT_EXTRA_HOSTS,
    SIGNING_CERT_URL,
    WEBHOOK_ID,
)
from gateway.errors import ConfigError
from gateway.settings.values import read_value

#: Where the extra trust anchors' file is named (read by `adapters.paypal_certs`).
CERT_EXTRA_CA_FILE = "cert_extra_ca_file"
#: The keys only a `paypal` provider takes.
PAYPAL_KEYS = (WEBHOOK_ID, SIGNING_CERT_URL, CERT_EXTRA_HOSTS, CERT_EXTRA_CA_FILE)


def paypal_extra(scheme: str, data: Mapping[str, Any], path: str) -> dict[str, str]:
    """The `paypal` keys of `data` as `SchemeParams.extra`; ConfigError naming one given
    to another scheme, or of the wrong type."""
    if scheme != "paypal":
        for key in PAYPAL_KEYS:
            if key in data:
                raise ConfigError(f"{path}{key}", "is a setting of scheme 'paypal'")
        return {}
    extra = {
        WEBHOOK_ID: read_value(data, WEBHOOK_ID, path, str, ""),
        SIGNING_CERT_URL: read_value(data, SIGNING_CERT_URL, path, str, ""),
        CERT_EXTRA_CA_FILE: read_value(data, CERT_EXTRA_CA_FILE, path, str, ""),
    }
    hosts = read_value(data, CERT_EXTRA_HOSTS, path, list, [])
    if not all(isinstance(h, str) and h and not any(c.isspace() for c in h) for h in hosts):
        raise ConfigError(f"{path}{CERT_EXTRA_HOSTS}", "must be a list of 'host:port'")
    extra[CERT_EXTRA_HOSTS] = " ".join(h.lower() for h in hosts)
    return extra
