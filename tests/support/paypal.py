"""A stand-in for PayPal's certificate host: a test CA of our own, PayPal-like signing
certificates it issues (valid, expired, and one from a CA nobody trusts), and a local
HTTPS server that serves them, with the misbehaviours a certificate host can have
(a redirect, a huge answer, one that declares itself huge, one trickled, a 500).

The server's own TLS certificate comes from the same CA, so a gateway configured with
`cert_extra_ca_file` (the CA's PEM) and `cert_extra_hosts` (`127.0.0.1:PORT`) trusts
both the connection and the signing certificate, and nothing else changes.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import http.server
import ssl
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from ipaddress import IPv4Address
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from gateway.core.signatures.paypal.scheme import signed_message

PAYPAL_NAME = "messageverificationcerts.paypal.com"
WEBHOOK_ID = "8PT597110X687430LKGECATA"
CERT_PATH = "/v1/notifications/certs/CERT-360caa42-fca2a594-test"
EXPIRED_PATH = "/v1/notifications/certs/CERT-expired"
FORGED_PATH = "/v1/notifications/certs/CERT-forged"
REDIRECT_PATH = "/v1/notifications/certs/CERT-redirect"
HUGE_PATH = "/v1/notifications/certs/CERT-huge"
#: Declares a megabyte, sends the valid certificate, and closes.
DECLARED_HUGE_PATH = "/v1/notifications/certs/CERT-declared-huge"
#: A byte every 50 ms for 3 s: each read is quick, the whole answer is not.
TRICKLE_PATH = "/v1/notifications/certs/CERT-trickle"
BROKEN_PATH = "/v1/notifications/certs/CERT-broken"
#: Every path under this answers the valid certificate (for the cache's bounds).
ANY_VALID_PREFIX = "/v1/notifications/certs/CERT-any-"
NOW = dt.datetime.now(dt.UTC)


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


@dataclass
class Authority:
    """A CA: its key and self-signed certificate."""

    name: str
    key: rsa.RSAPrivateKey = field(default_factory=_key)
    cert: x509.Certificate = field(init=False)

    def __post_init__(self) -> None:
        key_id = x509.SubjectKeyIdentifier.from_public_key(self.key.public_key())
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(_name(self.name))
            .issuer_name(_name(self.name))
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(NOW - dt.timedelta(days=30))
            .not_valid_after(NOW + dt.timedelta(days=3650))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(False, False, False, False, False, True, True, False, False),
                critical=True,
            )
            .add_extension(key_id, critical=False)
            .sign(self.key, hashes.SHA256())
        )

    def issue(
        self,
        key: rsa.RSAPrivateKey,
        dns: str = PAYPAL_NAME,
        *,
        ip: str | None = None,
        expired: bool = False,
    ) -> x509.Certificate:
        """A server certificate for `dns` (and `ip`), valid now unless `expired`."""
        start, end = (
            (NOW - dt.timedelta(days=400), NOW - dt.timedelta(days=1))
            if expired
            else (NOW - dt.timedelta(days=1), NOW + dt.timedelta(days=365))
        )
        names: list[x509.GeneralName] = [x509.DNSName(dns)]
        if ip is not None:
            names.append(x509.IPAddress(IPv4Address(ip)))
        authority_key = x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key())
        return (
            x509.CertificateBuilder()
            .subject_name(_name(dns))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(end)
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(True, False, True, False, False, False, False, False, False),
                critical=True,
            )
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(authority_key, critical=False)
            .sign(self.key, hashes.SHA256())
        )


def pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def key_pem(key: rsa.RSAPrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


@dataclass
class PayPalKeys:
    """The test CA, PayPal's signing key and its certificates."""

    ca: Authority = field(default_factory=lambda: Authority("Gateway Test Root CA"))
    rogue: Authority = field(default_factory=lambda: Authority("Nobody's CA"))
    key: rsa.RSAPrivateKey = field(default_factory=_key)
    cert: x509.Certificate = field(init=False)
    expired: x509.Certificate = field(init=False)
    forged: x509.Certificate = field(init=False)

    def __post_init__(self) -> None:
        self.cert = self.ca.issue(self.key)
        self.expired = self.ca.issue(self.key, expired=True)
        self.forged = self.rogue.issue(self.key)

    def sign(
        self,
        body: bytes,
        cert_url: str,
        *,
        webhook_id: str = WEBHOOK_ID,
        transmission_id: str = "b2384410-f8d2-11e9-8a2d-b7e18d0b6d12",
        when: dt.datetime | None = None,
    ) -> dict[str, str]:
        """PayPal's five headers for `body`, as PayPal signs."""
        time_text = (when or dt.datetime.now(dt.UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
        message = signed_message(transmission_id, time_text, webhook_id, body)
        signature = self.key.sign(message, padding.PKCS1v15(), hashes.SHA256())
        return {
            "PAYPAL-TRANSMISSION-ID": transmission_id,
            "PAYPAL-TRANSMISSION-TIME": time_text,
            "PAYPAL-TRANSMISSION-SIG": base64.b64encode(signature).decode(),
            "PAYPAL-CERT-URL": cert_url,
            "PAYPAL-AUTH-ALGO": "SHA256withRSA",
        }


@dataclass
class CertHost:
    """The running stand-in: its base URL, the CA file to trust and its request log."""

    base: str
    host: str
    ca_file: Path
    requests: list[str]

    def url(self, path: str = CERT_PATH) -> str:
        return self.base + path


@contextlib.contextmanager
def cert_host(keys: PayPalKeys, tmp: Path) -> Iterator[CertHost]:
    """Serve `keys`' certificates over HTTPS on 127.0.0.1, from a thread."""
    tls_key = _key()
    tls_cert = keys.ca.issue(tls_key, "localhost", ip="127.0.0.1")
    (tmp / "tls.pem").write_bytes(pem(tls_cert) + key_pem(tls_key).encode())
    ca_file = tmp / "test-ca.pem"
    ca_file.write_bytes(pem(keys.ca.cert))
    answers = {
        CERT_PATH: pem(keys.cert),
        EXPIRED_PATH: pem(keys.expired),
        FORGED_PATH: pem(keys.forged),
    }
    seen: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            if self.path == REDIRECT_PATH:
                self.send_response(302)
                self.send_header("Location", "https://evil.example/cert.pem")
                self.end_headers()
                return
            if self.path == BROKEN_PATH:
                self.send_response(500)
                self.end_headers()
                return
            if self.path == HUGE_PATH:  # no length declared: cut off while reading
                self.send_response(200)
                self.end_headers()
                with contextlib.suppress(OSError):
                    self.wfile.write(b"A" * (1 << 20))
                return
            if self.path == DECLARED_HUGE_PATH:
                self.send_response(200)
                self.send_header("Content-Length", str(1 << 20))
                self.end_headers()
                self.wfile.write(pem(keys.cert))
                self.close_connection = True
                return
            if self.path == TRICKLE_PATH:
                self.send_response(200)
                self.end_headers()
                with contextlib.suppress(OSError):
                    for _ in range(60):
                        self.wfile.write(b"-")
                        self.wfile.flush()
                        time.sleep(0.05)
                return
            body = answers.get(self.path)
            if self.path.startswith(ANY_VALID_PREFIX):  # any number of URLs, one certificate
                body = pem(keys.cert)
            if body is None:
                self.send_response(404)
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/x-pem-file")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp / "tls.pem")
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    host = f"127.0.0.1:{server.server_address[1]}"
    try:
        yield CertHost(f"https://{host}", host, ca_file, seen)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
