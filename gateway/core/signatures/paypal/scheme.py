"""PayPal's webhooks, verified: RSA (PKCS#1 v1.5, SHA-256: `SHA256withRSA`) over
`{transmission_id}|{transmission_time}|{webhook_id}|{crc32(body)}`, with the public key
of the certificate the request points to (`PAYPAL-CERT-URL`).

Pure. The layout is `paypalrestsdk`'s (`notifications.WebhookEvent._get_expected_sig`):
the CRC32 of the raw body's bytes as an unsigned decimal integer, and the webhook id
the merchant's dashboard shows (`[providers.NAME] webhook_id`, never sent). The
certificate is not read here: the ingest path fetches it from the URL the request
names (`gateway.adapters.paypal_certs`, after `paypal.chain.check_cert_url`), checks it
(`paypal.chain.trusted_leaf`), and hands it to `PayPalScheme.keyed_verifier`.

Checked in the package's order: the five headers; the algorithm, the transmission
time and the signature's base64; the time within ±`tolerance_s` (PayPal documents no
window; the time is signed, so the window bounds a replay); the certificate's own
validity at that moment; then the RSA signature.

The CRC32 is what the signature covers, not the body: another body with the same CRC32
(four chosen bytes make one) carries the same signature. So the signature does not
vouch for the event id read from the body (`authenticates_id` is False), and the
digest of the signed message is recorded (`replay_digest`): a captured signature is
used once, whatever body comes with it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from datetime import UTC, datetime

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from gateway.core.signatures.base import (
    CertifiedVerifier,
    FieldRef,
    Headers,
    ParamProblem,
    SchemeParams,
    Verifier,
    check_window,
    require_header,
    signing_secret,
)
from gateway.core.signatures.paypal.chain import check_cert_url
from gateway.errors import SignatureMalformed, SignatureMismatch, SigningCertificateRefused

TRANSMISSION_ID = "paypal-transmission-id"
TRANSMISSION_TIME = "paypal-transmission-time"
TRANSMISSION_SIG = "paypal-transmission-sig"
CERT_URL = "paypal-cert-url"
AUTH_ALGO = "paypal-auth-algo"
#: The one algorithm accepted; the SDK maps `SHA1withRSA` too, which PayPal no longer sends.
ALGORITHM = "SHA256withRSA"
_REQUIRED = (TRANSMISSION_ID, TRANSMISSION_TIME, TRANSMISSION_SIG, CERT_URL, AUTH_ALGO)
#: The settings a `paypal` provider reads into `SchemeParams.extra`.
WEBHOOK_ID = "webhook_id"
CERT_EXTRA_HOSTS = "cert_extra_hosts"
SIGNING_CERT_URL = "signing_cert_url"
_ID_REF = FieldRef("json", "id")
_TYPE_REF = FieldRef("json", "event_type")
#: A base64 RSA signature longer than a 8192-bit key's cannot be PayPal's.
_SIG_CHARS_MAX = 1400


def crc32_decimal(body: bytes) -> str:
    """CRC32 of the raw body's bytes as PayPal signs it: an unsigned decimal integer."""
    return str(binascii.crc32(body) & 0xFFFFFFFF)


def signed_message(transmission_id: str, time_text: str, webhook_id: str, body: bytes) -> bytes:
    """What PayPal signs for one delivery of `body`."""
    return f"{transmission_id}|{time_text}|{webhook_id}|{crc32_decimal(body)}".encode()


def parse_transmission_time(text: str) -> float:
    """`PAYPAL-TRANSMISSION-TIME` (ISO 8601 with a zone, `2026-12-06T17:33:43Z`) as Unix
    seconds; `SignatureMalformed` otherwise."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise SignatureMalformed("paypal-transmission-time is not an ISO 8601 time") from None
    if moment.tzinfo is None:
        raise SignatureMalformed("paypal-transmission-time has no time zone")
    return moment.timestamp()


def webhook_id_of(params: SchemeParams) -> str:
    """The configured webhook id; `ParamProblem` naming `webhook_id` without one."""
    webhook_id = params.extra.get(WEBHOOK_ID, "")
    if not webhook_id or webhook_id != webhook_id.strip() or "|" in webhook_id:
        raise ParamProblem(WEBHOOK_ID, "is required for scheme 'paypal' (the dashboard's id)")
    return webhook_id


def extra_hosts(params: SchemeParams) -> tuple[str, ...]:
    """`cert_extra_hosts`: hosts besides PayPal's a certificate may come from (tests)."""
    return tuple(params.extra.get(CERT_EXTRA_HOSTS, "").split())


class PayPalScheme:
    """PayPal's certificate-borne RSA signature (see the module's docstring)."""

    name = "paypal"

    def verify(self, params: SchemeParams, headers: Headers, body: bytes, now_s: float) -> None:
        """Refused: PayPal's verification needs its certificate (`keyed_verifier`)."""
        self.verifier(params)(headers, body, now_s)

    def verifier(self, params: SchemeParams) -> Verifier:
        """The settings checked; the verifier refuses every request, since no certificate
        reaches it: the ingest path calls `keyed_verifier` with the fetched one."""
        webhook_id_of(params)

        def verify(headers: Headers, body: bytes, now_s: float) -> None:
            raise SignatureMismatch("paypal's signing certificate was not fetched")

        return verify

    def cert_url(self, params: SchemeParams, headers: Headers) -> str:
        """The certificate URL the request names, if PayPal's; raises otherwise."""
        return check_cert_url(require_header(headers, CERT_URL), extra_hosts(params))

    def keyed_verifier(self, params: SchemeParams) -> CertifiedVerifier:
        """`verify` given the request's certificate, already trusted by its chain."""
        webhook_id = webhook_id_of(params)
        tolerance_s = params.tolerance_s

        def verify(headers: Headers, body: bytes, now_s: float, cert: x509.Certificate) -> None:
            transmission_id = require_header(headers, TRANSMISSION_ID)
            time_text = require_header(headers, TRANSMISSION_TIME)
            signature_text = require_header(headers, TRANSMISSION_SIG)
            if require_header(headers, AUTH_ALGO) != ALGORITHM:
                raise SignatureMalformed(f"paypal-auth-algo is not {ALGORITHM}")
            sent_s = parse_transmission_time(time_text)
            signature = _decode(signature_text)
            check_window(int(sent_s), now_s, tolerance_s)
            now = datetime.fromtimestamp(now_s, UTC)
            if not cert.not_valid_before_utc <= now <= cert.not_valid_after_utc:
                raise SigningCertificateRefused("the certificate is not valid now")
            key = cert.public_key()
            if not isinstance(key, rsa.RSAPublicKey):
                raise SigningCertificateRefused("the certificate's key is not RSA")
            message = signed_message(transmission_id, time_text, webhook_id, body)
            try:
                key.verify(signature, message, padding.PKCS1v15(), hashes.SHA256())
            except InvalidSignature:
                raise SignatureMismatch("paypal-transmission-sig does not verify") from None

        return verify

    def sign(
        self,
        params: SchemeParams,
        body: bytes,
        now_s: int,
        *,
        event_id: str | None = None,
        event_type: str | None = None,
    ) -> dict[str, str]:
        """PayPal's headers for body, signed with the PEM RSA key `params.secrets[0]`
        and pointing at `signing_cert_url`; `event_id` (random text the caller brings)
        is the transmission id. ValueError if either is missing."""
        key = _private_key(signing_secret(params))
        cert_url = params.extra.get(SIGNING_CERT_URL, "")
        if not cert_url:
            raise ValueError("paypal signs with a certificate URL: set signing_cert_url")
        transmission_id = event_id or hashlib.sha256(body).hexdigest()[:32]
        time_text = datetime.fromtimestamp(now_s, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        message = signed_message(transmission_id, time_text, webhook_id_of(params), body)
        signature = key.sign(message, padding.PKCS1v15(), hashes.SHA256())
        return {
            "Content-Type": "application/json",
            "PAYPAL-TRANSMISSION-ID": transmission_id,
            "PAYPAL-TRANSMISSION-TIME": time_text,
            "PAYPAL-TRANSMISSION-SIG": base64.b64encode(signature).decode("ascii"),
            "PAYPAL-CERT-URL": cert_url,
            "PAYPAL-AUTH-ALGO": ALGORITHM,
        }

    def new_event_id(self, uuid_text: str) -> str:
        """A transmission id: PayPal's are UUIDs (the event id is in the body)."""
        return uuid_text

    def required_headers(self, params: SchemeParams) -> tuple[str, ...]:
        """The five `paypal-*` headers."""
        return _REQUIRED

    def id_ref(self, params: SchemeParams) -> FieldRef:
        """The event's `id` (`WH-…`): the same on every retry, unlike the transmission id."""
        return _ID_REF

    def type_ref(self, params: SchemeParams) -> FieldRef:
        """The event's `event_type`."""
        return _TYPE_REF

    def authenticates_id(self, params: SchemeParams) -> bool:
        """No: only the body's CRC32 is signed (see the module's docstring)."""
        return False

    def replay_digest(self, params: SchemeParams, headers: Headers, body: bytes) -> bytes | None:
        """SHA-256 of the signed message: one per transmission, whatever the body."""
        message = signed_message(
            headers.get(TRANSMISSION_ID, "").strip(),
            headers.get(TRANSMISSION_TIME, "").strip(),
            params.extra.get(WEBHOOK_ID, ""),
            body,
        )
        return hashlib.sha256(message).digest()

    def stored_headers(self, params: SchemeParams) -> tuple[str, ...]:
        """The transmission's id and time, the certificate URL and the algorithm."""
        return (TRANSMISSION_ID, TRANSMISSION_TIME, CERT_URL, AUTH_ALGO)

    def signature_headers(self, params: SchemeParams) -> tuple[str, ...]:
        """`paypal-transmission-sig`."""
        return (TRANSMISSION_SIG,)


def _decode(text: str) -> bytes:
    if len(text) > _SIG_CHARS_MAX or not text.isascii():
        raise SignatureMalformed("paypal-transmission-sig is not a base64 RSA signature")
    try:
        return base64.b64decode(text, validate=True)
    except (ValueError, binascii.Error):
        raise SignatureMalformed("paypal-transmission-sig is not base64") from None


def _private_key(pem: str) -> rsa.RSAPrivateKey:
    try:
        key = serialization.load_pem_private_key(pem.encode("utf-8"), password=None)
    except (ValueError, TypeError):
        raise ParamProblem("secrets", "a paypal signing secret is a PEM RSA private key") from None
    if not isinstance(key, rsa.RSAPrivateKey):
        raise ParamProblem("secrets", "a paypal signing secret is a PEM RSA private key")
    return key
