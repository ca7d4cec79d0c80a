"""Schemes that sign `{timestamp}{joiner}{body}` and send `key=value` pairs in one header:
Stripe (`t=…,v1=…` joined by `.`) and Paddle Billing (`ts=…;h1=…` joined by `:`)."""

from __future__ import annotations

from gateway.core.signatures.base import (
    Encoding,
    FieldRef,
    Headers,
    SchemeParams,
    Verifier,
    check_window,
    decode_signature,
    hmac_sha256,
    matches,
    parse_timestamp,
    require_header,
    signing_secret,
    single_value,
    split_pairs,
    utf8_keys,
)
from gateway.errors import SignatureMalformed, SignatureMismatch


class TimestampedPairsScheme:
    """A timestamped HMAC-SHA256 hex signature in a header of `key=value` pairs."""

    def __init__(
        self,
        name: str,
        header: str,
        separator: str,
        ts_key: str,
        sig_key: str,
        joiner: bytes,
        id_field: str,
        type_field: str,
    ) -> None:
        self.name = name
        #: The header as the provider spells it (for signing); `header` is what verify reads.
        self.sent_header = header
        self.header = header.lower()
        self.separator = separator
        self.ts_key = ts_key
        self.sig_key = sig_key
        self.joiner = joiner
        self.id_field = id_field
        self.type_field = type_field

    def verify(self, params: SchemeParams, headers: Headers, body: bytes, now_s: float) -> None:
        """Parse the header, check the window, then compare against every secret."""
        self.verifier(params)(headers, body, now_s)

    def verifier(self, params: SchemeParams) -> Verifier:
        """`verify` for one provider: its secrets' keys prepared once."""
        # The key is the secret string as configured (Stripe: the whole `whsec_...`).
        keys = utf8_keys(params.secrets)
        tolerance_s = params.tolerance_s
        header, separator, ts_key, sig_key = self.header, self.separator, self.ts_key, self.sig_key
        joiner = self.joiner

        def verify(headers: Headers, body: bytes, now_s: float) -> None:
            pairs = split_pairs(require_header(headers, header), separator)
            ts_text = single_value(pairs, ts_key)
            timestamp = parse_timestamp(ts_text)
            # Several signatures appear while the provider rotates its secret; other keys
            # (Stripe's test-mode v0) are ignored, as the providers advise.
            offered = [decode_signature(v, Encoding.HEX) for k, v in pairs if k == sig_key]
            if not offered:
                raise SignatureMalformed(f"{header} has no {sig_key} signature")
            check_window(timestamp, now_s, tolerance_s)
            if not matches(keys, offered, ts_text.encode("ascii"), joiner, body):
                raise SignatureMismatch(f"no configured secret matches {header}")

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
        """One v1/h1 signature at now_s; the id and type are the body's, so both are unused."""
        ts_text = str(now_s)
        message = ts_text.encode("ascii") + self.joiner + body
        mac = hmac_sha256(signing_secret(params).encode("utf-8"), message)
        value = f"{self.ts_key}={ts_text}{self.separator}{self.sig_key}={mac.hex()}"
        return {self.sent_header: value}

    def required_headers(self, params: SchemeParams) -> tuple[str, ...]:
        """The one header that carries both the timestamp and the signatures."""
        return (self.header,)

    def new_event_id(self, uuid_text: str) -> str:
        """The UUID as it is (unused by `sign`: the id is the body's)."""
        return uuid_text

    def id_ref(self, params: SchemeParams) -> FieldRef:
        """The event id is a top-level field of the JSON body."""
        return FieldRef("json", self.id_field)

    def type_ref(self, params: SchemeParams) -> FieldRef:
        """The event type is a top-level field of the JSON body."""
        return FieldRef("json", self.type_field)

    def authenticates_id(self, params: SchemeParams) -> bool:
        """Always: the id is read from the signed body."""
        return True

    def replay_digest(self, params: SchemeParams, headers: Headers, body: bytes) -> bytes | None:
        """None: a replay under another id would need another body, and fail verification."""
        return None

    def stored_headers(self, params: SchemeParams) -> tuple[str, ...]:
        """None of its own: the id, type and timestamp are in the body and the signature."""
        return ()

    def signature_headers(self, params: SchemeParams) -> tuple[str, ...]:
        """The one header with the timestamp and the signatures."""
        return (self.header,)
