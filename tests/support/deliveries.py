"""Provider-shaped deliveries signed with the independent test signers."""

from __future__ import annotations

import time
from dataclasses import dataclass

import orjson

from tests.support import vectors
from tests.support.gateway import SECRETS


@dataclass
class Delivery:
    """One HTTP request a provider would send."""

    provider: str
    event_id: str
    headers: dict[str, str]
    body: bytes

    @property
    def path(self) -> str:
        return f"/webhooks/{self.provider}"


def body_for(scheme: str, event_id: str, event_type: str | None) -> bytes:
    """A JSON body shaped like the provider's own (where the id lives in the body)."""
    doc: dict[str, object] = {"data": {"object": {"id": f"obj_{event_id}", "amount": 1200}}}
    if scheme in ("stripe",):
        doc["id"] = event_id
    if scheme in ("paddle", "hmac"):
        doc["event_id"] = event_id
    if event_type is not None:
        doc["event_type" if scheme == "paddle" else "type"] = event_type
    return orjson.dumps(doc)


def deliver(
    scheme: str,
    event_id: str,
    event_type: str | None = "payment.succeeded",
    *,
    secret: str | None = None,
    now_s: int | None = None,
    body: bytes | None = None,
    provider: str | None = None,
) -> Delivery:
    """Sign a delivery for `scheme` (provider name defaults to the scheme name)."""
    secret = secret or SECRETS[scheme]
    ts = int(time.time()) if now_s is None else now_s
    body = body_for(scheme, event_id, event_type) if body is None else body
    headers = {"Content-Type": "application/json"}
    if scheme == "stripe":
        headers["Stripe-Signature"] = f"t={ts},v1={vectors.stripe_v1(secret, ts, body)}"
    elif scheme == "standard":
        sig = vectors.standard_v1(secret, event_id, ts, body)
        headers |= {
            "webhook-id": event_id,
            "webhook-timestamp": str(ts),
            "webhook-signature": f"v1,{sig}",
        }
    elif scheme == "github":
        headers |= {
            "X-Hub-Signature-256": f"sha256={vectors.github_sha256(secret, body)}",
            "X-GitHub-Delivery": event_id,
            "X-GitHub-Event": event_type or "",
        }
    elif scheme == "shopify":
        headers |= {
            "X-Shopify-Hmac-Sha256": vectors.shopify_b64(secret, body),
            "X-Shopify-Webhook-Id": event_id,
            "X-Shopify-Topic": event_type or "",
        }
    elif scheme == "paddle":
        headers["Paddle-Signature"] = f"ts={ts};h1={vectors.paddle_h1(secret, ts, body)}"
    elif scheme == "hmac":
        signed = str(ts).encode() + b"." + body
        headers |= {
            "X-Signature": f"sha256={vectors.generic_hex(secret, signed)}",
            "X-Timestamp": str(ts),
            "X-Event-Type": event_type or "",
        }
    else:
        raise ValueError(scheme)
    if event_type is None:  # a sender that omits the type omits its header too
        for name in ("X-GitHub-Event", "X-Shopify-Topic", "X-Event-Type"):
            headers.pop(name, None)
    return Delivery(provider or scheme, event_id, headers, body)
