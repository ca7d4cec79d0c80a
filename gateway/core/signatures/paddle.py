"""Paddle Billing: `Paddle-Signature: ts=<unix>;h1=<hex>[;h1=<hex>]` over `{ts}:{body}`."""

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

HEADER = "paddle-signature"


class PaddleScheme:
    """Paddle Billing's timestamped HMAC-SHA256 signature."""

    name: str = "paddle"
    body_carries_id: bool = True

    def verify(self, params: SchemeParams, headers: Headers, body: bytes, now_s: float) -> None:
        """Parse the header, check the window, then compare against every secret."""
        pairs = split_pairs(require_header(headers, HEADER), ";")
        ts_text = single_value(pairs, "ts")
        timestamp = parse_timestamp(ts_text)
        # Paddle sends one h1 per active secret while a secret is being rotated.
        offered = [decode_signature(v, Encoding.HEX) for k, v in pairs if k == "h1"]
        if not offered:
            raise SignatureMalformed(f"{HEADER} has no h1 signature")
        check_window(timestamp, now_s, params.tolerance_s)
        message = ts_text.encode("ascii") + b":" + body
        expected = [hmac_sha256(s.encode("utf-8"), message) for s in params.secrets]
        if not any_match(expected, offered):
            raise SignatureMismatch(f"no configured secret matches {HEADER}")

    def id_ref(self, params: SchemeParams) -> FieldRef:
        """The event id is the top-level `event_id` of the JSON body."""
        return FieldRef("json", "event_id")

    def type_ref(self, params: SchemeParams) -> FieldRef:
        """The event type is the top-level `event_type` of the JSON body."""
        return FieldRef("json", "event_type")


PADDLE = PaddleScheme()
