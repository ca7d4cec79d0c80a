"""Independent signers for the test vectors, written from each provider's documentation.

Deliberately shares no code with `gateway`: if the gateway misreads a spec, these helpers
should disagree with it rather than repeat the mistake.
"""

from __future__ import annotations

import base64
import hashlib
import hmac


def _hmac_sha256(key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, hashlib.sha256).digest()


def stripe_v1(secret: str, timestamp: int, body: bytes) -> str:
    """Stripe: hex HMAC-SHA256 of `{t}.{body}`, keyed with the whole endpoint secret."""
    return _hmac_sha256(secret.encode(), str(timestamp).encode() + b"." + body).hex()


def standard_v1(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """Standard Webhooks: base64 HMAC-SHA256 of `{id}.{ts}.{body}`, keyed with the
    base64-decoded part of the secret after `whsec_`; returned without the `v1,` label."""
    encoded_key = secret[len("whsec_") :] if secret.startswith("whsec_") else secret
    key = base64.b64decode(encoded_key)
    content = msg_id.encode() + b"." + str(timestamp).encode() + b"." + body
    return base64.b64encode(_hmac_sha256(key, content)).decode()


def github_sha256(secret: str, body: bytes) -> str:
    """GitHub: hex HMAC-SHA256 of the body; returned without the `sha256=` label."""
    return _hmac_sha256(secret.encode(), body).hex()


def shopify_b64(secret: str, body: bytes) -> str:
    """Shopify: base64 HMAC-SHA256 of the body."""
    return base64.b64encode(_hmac_sha256(secret.encode(), body)).decode()


def paddle_h1(secret: str, timestamp: int, body: bytes) -> str:
    """Paddle Billing: hex HMAC-SHA256 of `{ts}:{body}`."""
    return _hmac_sha256(secret.encode(), str(timestamp).encode() + b":" + body).hex()


def generic_hex(secret: str, message: bytes) -> str:
    """A plain hex HMAC-SHA256 of whatever the generic scheme signs."""
    return _hmac_sha256(secret.encode(), message).hex()


def generic_b64(secret: str, message: bytes) -> str:
    """A plain base64 HMAC-SHA256 of whatever the generic scheme signs."""
    return base64.b64encode(_hmac_sha256(secret.encode(), message)).decode()


def razorpay_hex(secret: str, body: bytes) -> str:
    """Razorpay: hex HMAC-SHA256 of the raw body, keyed with the webhook secret."""
    return _hmac_sha256(secret.encode(), body).hex()
