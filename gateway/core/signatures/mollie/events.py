"""Mollie's next-gen webhooks: `X-Mollie-Signature: sha256=<hex>`, the HMAC-SHA256 of the
raw body keyed with the webhook's signing secret as UTF-8 text. Pure.

The rule is Mollie's SDKs': mollie/mollie-api-php `src/Webhooks/SignatureValidator.php`
and mollie/mollie-api-py `mollie/utils/webhooks/signature_validator.py` compute the
lower-case hex HMAC of the body and compare it with each offered signature, the
`sha256=` prefix stripped when it is there (so a bare hex value verifies too), against
every configured secret: during a rotation (24 hours) Mollie may sign with the old and
the new secret and send both signatures. Here the header may hold several signatures
separated by commas or whitespace, which is what a proxy makes of a repeated header
(`, `); neither `sha256=` nor hex holds a separator, so the split is unambiguous.

No timestamp is signed, so there is no window: the event id (`event_…`) and type are
fields of the signed body, so a valid signature vouches for the id and a replay is a
duplicate at the gate (`authenticates_id`, no body digest needed).

Check order (`core.signatures`): the header is present (`SignatureMissing`); it is at
most `HEADER_CHARS_MAX` characters, holds 1 to `SIGNATURES_MAX` signatures and each is
32 bytes of hex (`SignatureMalformed`); some secret's HMAC equals some signature, all
pairs compared in constant time (`SignatureMismatch`). Where the SDKs differ: they
compare hex text, so an upper-case signature fails there and verifies here (the same
bytes, as in every scheme of this package); they take any number of signatures; and
they treat a request without the header as a classic webhook, which this scheme
refuses (classic ones go to `mollie`).
"""

from __future__ import annotations

import re

from gateway.core.signatures.base import (
    BodySigned,
    Encoding,
    FieldRef,
    Headers,
    SchemeParams,
    Verifier,
    decode_signature,
    encode_signature,
    hmac_sha256,
    matches,
    require_header,
    signing_secret,
    utf8_keys,
)
from gateway.errors import SignatureMalformed, SignatureMismatch

#: The header as Mollie spells it (for signing), and as the gateway reads it.
SENT_HEADER = "X-Mollie-Signature"
HEADER = SENT_HEADER.lower()
PREFIX = "sha256="
#: Mollie sends one signature, two while a secret is rotated; a few more leave room
#: for a proxy's repeats. More than this is refused unread, before any HMAC.
SIGNATURES_MAX = 8
#: The longest header of `SIGNATURES_MAX` prefixed signatures, each with a `, `.
HEADER_CHARS_MAX = SIGNATURES_MAX * (len(PREFIX) + 64 + 2)
#: Several signatures are separated by commas and/or whitespace.
_SEPARATORS = re.compile(r"[,\s]+")
#: The body's fields: the event's id (`event_GvJ8WHrp5isUdRub9CJyH`) and type.
_ID_REF = FieldRef("json", "id")
_TYPE_REF = FieldRef("json", "type")


def offered_signatures(text: str) -> list[bytes]:
    """The signatures a header value offers, decoded; `SignatureMalformed` unless it is
    1 to `SIGNATURES_MAX` of `[sha256=]<64 hex digits>`."""
    if len(text) > HEADER_CHARS_MAX:
        raise SignatureMalformed(f"{HEADER} is over {HEADER_CHARS_MAX} characters")
    tokens = [t for t in _SEPARATORS.split(text) if t]
    if not tokens:
        raise SignatureMalformed(f"{HEADER} has no signature")
    if len(tokens) > SIGNATURES_MAX:
        raise SignatureMalformed(f"{HEADER} has over {SIGNATURES_MAX} signatures")
    return [decode_signature(t.removeprefix(PREFIX), Encoding.HEX) for t in tokens]


class MollieEventsScheme(BodySigned):
    """Mollie's next-gen webhook: a hex HMAC-SHA256 of the body, `sha256=` optional."""

    name = "mollie_events"
    header = HEADER

    def verify(self, params: SchemeParams, headers: Headers, body: bytes, now_s: float) -> None:
        """Parse the header, then compare against every secret (no timestamp is signed)."""
        self.verifier(params)(headers, body, now_s)

    def verifier(self, params: SchemeParams) -> Verifier:
        """`verify` for one provider: its secrets' keys prepared once."""
        keys = utf8_keys(params.secrets)

        def verify(headers: Headers, body: bytes, now_s: float) -> None:
            offered = offered_signatures(require_header(headers, HEADER))
            if not matches(keys, offered, body):
                raise SignatureMismatch(f"no configured secret matches {HEADER}")

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
        """`X-Mollie-Signature: sha256=<hex>`, as Mollie sends it; the id and type are
        the body's."""
        mac = hmac_sha256(signing_secret(params).encode("utf-8"), body)
        return {SENT_HEADER: PREFIX + encode_signature(mac, Encoding.HEX)}

    def id_ref(self, params: SchemeParams) -> FieldRef:
        """The body's `id`."""
        return _ID_REF

    def type_ref(self, params: SchemeParams) -> FieldRef:
        """The body's `type`."""
        return _TYPE_REF


SCHEME = MollieEventsScheme()
