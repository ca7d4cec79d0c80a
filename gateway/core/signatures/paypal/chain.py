"""PayPal's signing certificate, judged: where it may come from, and whether its chain
and validity make it PayPal's.

Pure: the caller brings the certificate's bytes (the adapter fetched them,
`gateway.adapters.paypal_certs`), the trust anchors and the time. The decisions are
PayPal's and `paypalrestsdk`'s (`notifications.WebhookEvent._verify_certificate`): a
chain to a trusted root, a subject under `paypal.com`, and not expired. Unlike the SDK,
which fetches whatever URL the request names, the URL is held to PayPal's own hosts
first, so a forged request cannot make the gateway fetch from anywhere else.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from urllib.parse import urlsplit

from cryptography import x509
from cryptography.x509.oid import NameOID
from cryptography.x509.verification import PolicyBuilder, Store, VerificationError

from gateway.errors import SigningCertificateRefused

#: The hosts PayPal serves its webhook certificates from: `cert_url` in PayPal's event
#: samples (`https://api.sandbox.paypal.com/v1/notifications/certs/CERT-…`) and the
#: live API's host, in both spellings PayPal's REST API answers on (`api-m.` is the
#: current one). `paypalrestsdk` checks no host at all; the subject check below is its.
PAYPAL_CERT_HOSTS: tuple[str, ...] = (
    "api.paypal.com",
    "api-m.paypal.com",
    "api.sandbox.paypal.com",
    "api-m.sandbox.paypal.com",
)
#: The path every PayPal certificate URL starts with.
CERT_PATH_PREFIX = "/v1/notifications/certs/"
#: The suffix the certificate's subject must carry (`_is_common_name_valid`).
PAYPAL_DOMAIN_SUFFIX = ".paypal.com"
#: The longest chain read from one answer: a leaf and a few intermediates.
CHAIN_CERTS_MAX = 5
_URL_CHARS_MAX = 512


def check_cert_url(url: str, extra_hosts: Sequence[str] = ()) -> str:
    """The certificate URL if PayPal's, else `SigningCertificateRefused`: https only,
    no credentials, an allow-listed host (port 443 unless an `extra_hosts` entry names
    one, `host:port`: a test stand-in's), and PayPal's certificate path."""
    if len(url) > _URL_CHARS_MAX or not url.isascii() or url != url.strip():
        raise SigningCertificateRefused("paypal-cert-url is not a URL PayPal sends")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise SigningCertificateRefused("paypal-cert-url is not a URL") from None
    host = (parts.hostname or "").lower()
    allowed = host in PAYPAL_CERT_HOSTS and port in (None, 443)
    where = host if port is None else f"{host}:{port}"
    allowed = allowed or where in extra_hosts
    if parts.scheme != "https" or parts.username is not None or parts.password is not None:
        raise SigningCertificateRefused("paypal-cert-url must be an https URL")
    if not allowed:
        raise SigningCertificateRefused(f"paypal-cert-url host {where!r} is not PayPal's")
    if not parts.path.startswith(CERT_PATH_PREFIX) or parts.query or parts.fragment:
        raise SigningCertificateRefused("paypal-cert-url is not a PayPal certificate path")
    return url


def load_chain(pem: bytes) -> list[x509.Certificate]:
    """The certificates of a PEM answer, the leaf first; `SigningCertificateRefused`
    for anything else (none, more than `CHAIN_CERTS_MAX`, unparsable)."""
    try:
        chain = x509.load_pem_x509_certificates(pem)
    except ValueError:
        raise SigningCertificateRefused("the certificate answer is not PEM certificates") from None
    if not chain or len(chain) > CHAIN_CERTS_MAX:
        raise SigningCertificateRefused(f"the certificate answer holds {len(chain)} certificates")
    return chain


def paypal_name(leaf: x509.Certificate) -> str:
    """The leaf's DNS name under `paypal.com` (its subject alternative names, else its
    common name, as the SDK reads); `SigningCertificateRefused` if it has none."""
    names: list[str] = []
    try:
        san = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName)
        names = san.value.get_values_for_type(x509.DNSName)
    except x509.ExtensionNotFound:
        pass
    names += [str(a.value) for a in leaf.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    for name in names:
        if name.lower().endswith(PAYPAL_DOMAIN_SUFFIX) and "*" not in name:
            return name
    raise SigningCertificateRefused("the certificate is not issued to a paypal.com name")


def trusted_leaf(
    chain: Sequence[x509.Certificate], anchors: Sequence[x509.Certificate], now: datetime
) -> x509.Certificate:
    """The chain's leaf if it chains to one of `anchors`, every certificate valid at
    `now`, and its name is PayPal's; `SigningCertificateRefused` otherwise.

    cryptography's WebPKI verifier does the path building, the validity periods, the
    CA and key-usage constraints; the name it is asked to match is the leaf's own
    `paypal.com` name, so the leaf must also be a server certificate for it.
    """
    if not chain or not anchors:
        raise SigningCertificateRefused("no certificate, or no trust anchor to check it by")
    leaf, intermediates = chain[0], list(chain[1:])
    name = paypal_name(leaf)
    verifier = (
        PolicyBuilder()
        .store(Store(list(anchors)))
        .time(now)
        .max_chain_depth(CHAIN_CERTS_MAX)
        .build_server_verifier(x509.DNSName(name))
    )
    try:
        verifier.verify(leaf, intermediates)
    except VerificationError as exc:
        raise SigningCertificateRefused(f"the certificate is not trusted: {exc}") from None
    return leaf
