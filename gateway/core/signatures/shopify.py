"""Shopify: `X-Shopify-Hmac-Sha256: <base64>` over the body; no timestamp."""

from __future__ import annotations

from gateway.core.signatures.base import (
    Encoding,
    FieldRef,
    Headers,
    SchemeParams,
    any_match,
    decode_signature,
    hmac_sha256,
    require_header,
)
from gateway.errors import SignatureMismatch

HEADER = "x-shopify-hmac-sha256"


class ShopifyScheme:
    """Shopify's HMAC-SHA256 body signature."""

    name: str = "shopify"
    body_carries_id: bool = False

    def verify(self, params: SchemeParams, headers: Headers, body: bytes, now_s: float) -> None:
        """Parse the header, then compare against every secret (Shopify signs no timestamp)."""
        # Shopify sends one value; a comma list is what a proxy makes of a repeated header
        # (base64 never contains a comma, so the split is unambiguous).
        offered = [
            decode_signature(item.strip(), Encoding.BASE64)
            for item in require_header(headers, HEADER).split(",")
        ]
        expected = [hmac_sha256(s.encode("utf-8"), body) for s in params.secrets]
        if not any_match(expected, offered):
            raise SignatureMismatch(f"no configured secret matches {HEADER}")

    def id_ref(self, params: SchemeParams) -> FieldRef:
        """The webhook id is the `X-Shopify-Webhook-Id` header."""
        return FieldRef("header", "x-shopify-webhook-id")

    def type_ref(self, params: SchemeParams) -> FieldRef:
        """The topic is the `X-Shopify-Topic` header."""
        return FieldRef("header", "x-shopify-topic")


SHOPIFY = ShopifyScheme()
