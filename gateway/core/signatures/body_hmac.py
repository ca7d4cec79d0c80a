"""Schemes that sign the body alone (no timestamp) and name the event in a header: GitHub
(`X-Hub-Signature-256: sha256=<hex>`), Shopify (`X-Shopify-Hmac-Sha256: <base64>`) and
Razorpay (`X-Razorpay-Signature: <hex>`, the id in `x-razorpay-event-id`, the type in
the body's `event`)."""

from __future__ import annotations

from gateway.core.signatures.base import (
    Encoding,
    FieldRef,
    Headers,
    SchemeParams,
    Verifier,
    decode_signature,
    encode_signature,
    header_value,
    hmac_sha256,
    matches,
    require_header,
    sha256_of,
    signing_secret,
    utf8_keys,
)
from gateway.errors import SignatureMalformed, SignatureMismatch


class BodyHmacScheme:
    """An HMAC-SHA256 of the body in one header; id and type in headers of their own."""

    def __init__(
        self,
        name: str,
        header: str,
        encoding: Encoding,
        prefix: str,
        id_header: str,
        type_header: str,
        descriptive_headers: tuple[str, ...] = (),
        type_field: str | None = None,
    ) -> None:
        self.name = name
        self.encoding = encoding
        self.prefix = prefix
        # Headers as the provider spells them (for signing); verify reads the lower-case ones.
        self.sent_headers = (header, id_header, type_header)
        self.header = header.lower()
        self.id_header = id_header.lower()
        self.type_header = type_header.lower()
        self.descriptive_headers = tuple(h.lower() for h in descriptive_headers)
        #: The body's top-level field naming the type, for a provider that sends no type
        #: header (then `type_header` is empty).
        self.type_field = type_field

    def verify(self, params: SchemeParams, headers: Headers, body: bytes, now_s: float) -> None:
        """Parse the header, then compare against every secret (no timestamp is signed)."""
        self.verifier(params)(headers, body, now_s)

    def verifier(self, params: SchemeParams) -> Verifier:
        """`verify` for one provider: its secrets' keys prepared once."""
        keys = utf8_keys(params.secrets)
        header, prefix, encoding = self.header, self.prefix, self.encoding

        def verify(headers: Headers, body: bytes, now_s: float) -> None:
            offered: list[bytes] = []
            # Providers send one value; a comma list is what a proxy makes of a repeated
            # header (neither hex nor base64 contains a comma, so the split is unambiguous).
            for item in require_header(headers, header).split(","):
                item = item.strip()
                if not item.startswith(prefix):
                    raise SignatureMalformed(f"{header} value does not start with {prefix}")
                offered.append(decode_signature(item.removeprefix(prefix), encoding))
            if not matches(keys, offered, body):
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
        """The body's signature plus the id and type headers, both of which are required."""
        mac = hmac_sha256(signing_secret(params).encode("utf-8"), body)
        sig_header, id_header, type_header = self.sent_headers
        headers = {
            sig_header: self.prefix + encode_signature(mac, self.encoding),
            id_header: header_value(event_id, self.name, "event_id"),
        }
        if self.type_field is None:  # else the body names its type
            headers[type_header] = header_value(event_type, self.name, "event_type")
        return headers

    def required_headers(self, params: SchemeParams) -> tuple[str, ...]:
        """The signature header; a missing id or type header is the event's problem (400)."""
        return (self.header,)

    def new_event_id(self, uuid_text: str) -> str:
        """Delivery ids are plain UUIDs."""
        return uuid_text

    def id_ref(self, params: SchemeParams) -> FieldRef:
        """The delivery id header."""
        return FieldRef("header", self.id_header)

    def type_ref(self, params: SchemeParams) -> FieldRef:
        """The event type (topic) header, or the body's field that names it."""
        if self.type_field is not None:
            return FieldRef("json", self.type_field)
        return FieldRef("header", self.type_header)

    def authenticates_id(self, params: SchemeParams) -> bool:
        """Never: the id and type headers are outside the signature."""
        return False

    def replay_digest(self, params: SchemeParams, headers: Headers, body: bytes) -> bytes | None:
        """The body's SHA-256: the body is all the signature covers."""
        return sha256_of(body)

    def stored_headers(self, params: SchemeParams) -> tuple[str, ...]:
        """The id and type headers, then the provider's descriptive ones."""
        if self.type_field is not None:  # the body names the type
            return (self.id_header, *self.descriptive_headers)
        return (self.id_header, self.type_header, *self.descriptive_headers)

    def signature_headers(self, params: SchemeParams) -> tuple[str, ...]:
        """The one signature header."""
        return (self.header,)
