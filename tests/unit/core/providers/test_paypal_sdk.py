"""The `paypal` scheme against PayPal's own offline verifier, `paypalrestsdk`'s
`notifications.WebhookEvent`, with certificates from a test CA of our own.

- The message layout: the SDK's `_get_expected_sig` and ours agree byte for byte.
- The certificate checks: the SDK's `_verify_certificate` (its chain through
  pyOpenSSL's `X509Store`, given our CA in place of its bundled DigiCert roots; its
  `.paypal.com` name check; its expiry check) and ours accept and refuse the same
  certificates.
- The RSA step: the SDK's `_verify_signature` calls `OpenSSL.crypto.verify`, which
  pyOpenSSL removed in 24.3 (2024), so on any current install the SDK refuses every
  event, genuine or not (asserted below, so the day it changes is noticed). The
  SDK's message is verified instead by the `openssl` command-line tool (the system's
  OpenSSL, not the library the gateway uses): the same signature is accepted by both,
  and a tampered body or another webhook id refused by both.
"""

from __future__ import annotations

import base64
import datetime as dt
import shutil
import subprocess
from pathlib import Path

import pytest
from OpenSSL import crypto
from paypalrestsdk.notifications import WebhookEvent  # type: ignore[import-untyped]

from gateway.core.signatures import SchemeParams
from gateway.core.signatures.paypal.chain import trusted_leaf
from gateway.core.signatures.paypal.scheme import PayPalScheme, signed_message
from gateway.errors import SignatureError, SigningCertificateRefused
from tests.support.paypal import NOW, WEBHOOK_ID, PayPalKeys, pem

KEYS = PayPalKeys()
pytestmark = pytest.mark.filterwarnings("ignore:X509.get_subject is deprecated:DeprecationWarning")
URL = "https://api.paypal.com/v1/notifications/certs/CERT-360caa42-fca2a594-a5cafa77"
BODIES = [
    b'{"id":"WH-1","event_type":"PAYMENT.CAPTURE.COMPLETED"}',
    '{"id":"WH-2","summary":"Paiement reçu de 10,00 €"}'.encode(),
    b"body 0",  # a CRC32 with the top bit set
]


def _sdk_store(*anchors: bytes) -> crypto.X509Store:
    store = crypto.X509Store()
    for anchor in anchors:
        store.add_cert(crypto.load_certificate(crypto.FILETYPE_PEM, anchor))
    return store


@pytest.mark.parametrize("body", BODIES)
def test_the_message_layout_is_the_sdks(body: bytes) -> None:
    """`_get_expected_sig` over the decoded text equals ours over the raw bytes."""
    expected = WebhookEvent._get_expected_sig(
        "tid", "2026-12-06T10:00:00Z", WEBHOOK_ID, body.decode()
    )
    assert signed_message("tid", "2026-12-06T10:00:00Z", WEBHOOK_ID, body) == expected.encode()


@pytest.mark.parametrize(
    ("which", "trusted"), [("cert", True), ("expired", False), ("forged", False)]
)
def test_the_certificate_checks_agree_with_the_sdks(
    which: str, trusted: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Our CA as the SDK's only trust anchor: the SDK and we accept the same ones."""
    monkeypatch.setattr(
        WebhookEvent,
        "_get_certificate_store",
        classmethod(lambda cls: _sdk_store(pem(KEYS.ca.cert))),
    )
    cert = getattr(KEYS, which)
    sdk_cert = crypto.load_certificate(crypto.FILETYPE_PEM, pem(cert))
    assert bool(WebhookEvent._verify_certificate(sdk_cert)) is trusted
    if trusted:
        assert trusted_leaf([cert], [KEYS.ca.cert], NOW) == cert
    else:
        with pytest.raises(SigningCertificateRefused):
            trusted_leaf([cert], [KEYS.ca.cert], NOW)


def test_the_sdks_rsa_step_is_broken_on_current_pyopenssl(monkeypatch: pytest.MonkeyPatch) -> None:
    """`crypto.verify` is gone, so the SDK refuses even a genuine event: its RSA step
    cannot be the reference (see the module's docstring)."""
    assert not hasattr(crypto, "verify")
    body = BODIES[0]
    headers = KEYS.sign(body, URL)
    monkeypatch.setattr(WebhookEvent, "_get_cert", staticmethod(
        lambda url: crypto.load_certificate(crypto.FILETYPE_PEM, pem(KEYS.cert))))  # fmt: skip
    monkeypatch.setattr(
        WebhookEvent,
        "_get_certificate_store",
        classmethod(lambda cls: _sdk_store(pem(KEYS.ca.cert))),
    )
    genuine = WebhookEvent.verify(
        headers["PAYPAL-TRANSMISSION-ID"], headers["PAYPAL-TRANSMISSION-TIME"], WEBHOOK_ID,
        body.decode(), URL, headers["PAYPAL-TRANSMISSION-SIG"], headers["PAYPAL-AUTH-ALGO"],
    )  # fmt: skip
    assert genuine is False


def _openssl_accepts(tmp_path: Path, message: str, signature_b64: str) -> bool:
    sdk_cert = crypto.load_certificate(crypto.FILETYPE_PEM, pem(KEYS.cert))
    (tmp_path / "pub.pem").write_bytes(
        crypto.dump_publickey(crypto.FILETYPE_PEM, sdk_cert.get_pubkey())
    )
    (tmp_path / "msg").write_bytes(message.encode("utf-8"))
    (tmp_path / "sig").write_bytes(base64.b64decode(signature_b64))
    done = subprocess.run(
        ["openssl", "dgst", "-sha256", "-verify", str(tmp_path / "pub.pem"),
         "-signature", str(tmp_path / "sig"), str(tmp_path / "msg")],
        capture_output=True, check=False,
    )  # fmt: skip
    return done.returncode == 0


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl tool")
@pytest.mark.parametrize(
    ("case", "body_sent", "webhook_id", "accepted"),
    [
        ("genuine", BODIES[1], WEBHOOK_ID, True),
        ("tampered body", BODIES[1].replace(b"10,00", b"99,00"), WEBHOOK_ID, False),
        ("another webhook id", BODIES[1], "WH-OTHER", False),
    ],
)
def test_the_sdks_message_verifies_with_openssl_exactly_when_ours_does(
    case: str, body_sent: bytes, webhook_id: str, accepted: bool, tmp_path: Path
) -> None:
    """One signature, judged by `openssl dgst -verify` over the SDK's message and by
    our verifier over the raw bytes: the same verdict."""
    headers = KEYS.sign(BODIES[1], URL)
    message = WebhookEvent._get_expected_sig(
        headers["PAYPAL-TRANSMISSION-ID"], headers["PAYPAL-TRANSMISSION-TIME"], webhook_id,
        body_sent.decode(),
    )  # fmt: skip
    assert _openssl_accepts(tmp_path, message, headers["PAYPAL-TRANSMISSION-SIG"]) is accepted
    params = SchemeParams(secrets=(), extra={"webhook_id": webhook_id})
    lowered = {k.lower(): v for k, v in headers.items()}
    verify = PayPalScheme().keyed_verifier(params)
    now_s = dt.datetime.now(dt.UTC).timestamp()
    if accepted:
        verify(lowered, body_sent, now_s, KEYS.cert)
    else:
        with pytest.raises(SignatureError):
            verify(lowered, body_sent, now_s, KEYS.cert)
