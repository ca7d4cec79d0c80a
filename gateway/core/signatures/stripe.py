"""Stripe: `Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>...]` over `{t}.{body}`."""

from __future__ import annotations

from gateway.core.signatures.base import (
    Encoding,
    FieldRef,
    Headers,
    SchemeParams,
    any_match,
    check_window,
    decode_signature,
    hmac_sha256,
    parse_timestamp,
    require_header,
    single_value,
    split_pairs,
)
from gateway.errors import SignatureMalformed, SignatureMismatch

HEADER = "stripe-signature"


class StripeScheme:
    """Stripe's timestamped HMAC-SHA256 signature."""

    name: str = "stripe"
    body_carries_id: bool = True

    def verify(self, params: SchemeParams, headers: Headers, body: bytes, now_s: float) -> None:
        """Parse the header, check the window, then compare against every secret."""
        pairs = split_pairs(require_header(headers, HEADER), ",")
        ts_text = single_value(pairs, "t")
        timestamp = parse_timestamp(ts_text)
        # Other schemes (v0 is Stripe's test-mode scheme) are ignored, as Stripe advises.
        offered = [decode_signature(v, Encoding.HEX) for k, v in pairs if k == "v1"]
        if not offered:
            raise SignatureMalformed(f"{HEADER} has no v1 signature")
        check_window(timestamp, now_s, params.tolerance_s)
        # Stripe keys the HMAC with the whole `whsec_...` string, not a decoded form.
        message = ts_text.encode("ascii") + b"." + body
        expected = [hmac_sha256(s.encode("utf-8"), message) for s in params.secrets]
        if not any_match(expected, offered):
            raise SignatureMismatch(f"no configured secret matches {HEADER}")

    def id_ref(self, params: SchemeParams) -> FieldRef:
        """The event id is the top-level `id` of the JSON body."""
        return FieldRef("json", "id")

    def type_ref(self, params: SchemeParams) -> FieldRef:
        """The event type is the top-level `type` of the JSON body."""
        return FieldRef("json", "type")


STRIPE = StripeScheme()
