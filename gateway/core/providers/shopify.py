"""Shopify: `X-Shopify-Hmac-Sha256: <base64>`, an HMAC-SHA256 of the body alone; the
webhook id and topic in headers the signature does not cover. Its events move no money
here; they are ordered by their order."""

from __future__ import annotations

from gateway.core.ordering.keys import parse_rules
from gateway.core.providers.base import Provider
from gateway.core.signatures.base import Encoding
from gateway.core.signatures.body_hmac import BodyHmacScheme

SHOPIFY = Provider(
    name="shopify",
    title="Shopify",
    scheme=BodyHmacScheme(
        "shopify",
        "X-Shopify-Hmac-Sha256",
        Encoding.BASE64,
        "",
        "X-Shopify-Webhook-Id",
        "X-Shopify-Topic",
        (
            "X-Shopify-Shop-Domain",
            "X-Shopify-API-Version",
            "X-Shopify-Event-Id",
            "X-Shopify-Triggered-At",
            "X-Shopify-Sub-Topic",
        ),
    ),
    order_keys=parse_rules(
        ("refunds/* /order_id", "order_transactions/* /order_id", "orders/* /id")
    ),
    cross_check="Shopify's documented HMAC (base64 of the body's HMAC-SHA256)",
    resign=True,
)
