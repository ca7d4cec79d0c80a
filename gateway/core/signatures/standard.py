"""Standard Webhooks (Svix): `webhook-id`, `webhook-timestamp`, `webhook-signature`
over `{id}.{timestamp}.{body}`, keyed with the base64-decoded secret."""

from __future__ import annotations

import base64
import binascii

from gateway.core.signatures.base import (
    Encoding,
    FieldRef,
    Headers,
    HmacKey,
    SchemeParams,
    Verifier,
    check_window,
    decode_signature,
    encode_signature,
    header_value,
    hmac_sha256,
    matches,
    parse_timestamp,
    require_header,
    signing_secret,
)
from gateway.errors import SignatureMalformed, SignatureMismatch

ID_HEADER = "webhook-id"
TIMESTAMP_HEADER = "webhook-timestamp"
SIGNATURE_HEADER = "webhook-signature"
#: Prefix on secrets as Standard Webhooks providers display them; not part of the key.
WHSEC_PREFIX = "whsec_"
#: Prefix on the message ids `new_event_id` makes, as Standard Webhooks senders write them.
MSG_ID_PREFIX = "msg_"


def standard_key(secret: str) -> bytes:
    """The HMAC key of a Standard Webhooks secret; raise ValueError if it is not base64.

    Config validation calls this so a bad secret fails at start-up, not per request.
    The message never repeats the secret.
    """
    try:
        key = base64.b64decode(secret.removeprefix(WHSEC_PREFIX), validate=True)
    except binascii.Error as exc:
        raise ValueError("Standard Webhooks secret is not valid base64") from exc
    if not key:
        raise ValueError("Standard Webhooks secret is empty")
    return key


class StandardScheme:
    """The Standard Webhooks symmetric (v1) signature."""

    name: str = "standard"

    def verify(self, params: SchemeParams, headers: Headers, body: bytes, now_s: float) -> None:
        """Read all three headers, parse them, check the window, then compare."""
        self.verifier(params)(headers, body, now_s)

    def verifier(self, params: SchemeParams) -> Verifier:
        """`verify` for one provider: its secrets decoded and their keys prepared once."""
        keys = tuple(HmacKey(standard_key(s)) for s in params.secrets)
        tolerance_s = params.tolerance_s

        def verify(headers: Headers, body: bytes, now_s: float) -> None:
            msg_id = require_header(headers, ID_HEADER)
            ts_text = require_header(headers, TIMESTAMP_HEADER)
            sig_text = require_header(headers, SIGNATURE_HEADER)
            timestamp = parse_timestamp(ts_text)
            offered: list[bytes] = []
            for token in sig_text.split():
                version, sep, value = token.partition(",")
                if not sep:
                    raise SignatureMalformed(f"{SIGNATURE_HEADER} entry is not version,signature")
                # Other versions (v1a is the asymmetric ed25519 variant) are not ours to check.
                if version == "v1":
                    offered.append(decode_signature(value, Encoding.BASE64))
            if not offered:
                raise SignatureMalformed(f"{SIGNATURE_HEADER} has no v1 signature")
            check_window(timestamp, now_s, tolerance_s)
            if not matches(keys, offered, f"{msg_id}.{ts_text}.".encode(), body):
                raise SignatureMismatch(f"no configured secret matches {SIGNATURE_HEADER}")

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
        """The three headers; event_id (required) is the signed message id, and the type
        is the body's, so event_type is unused."""
        msg_id = header_value(event_id, self.name, "event_id")
        ts_text = str(now_s)
        message = f"{msg_id}.{ts_text}.".encode() + body
        mac = hmac_sha256(standard_key(signing_secret(params)), message)
        return {
            ID_HEADER: msg_id,
            TIMESTAMP_HEADER: ts_text,
            SIGNATURE_HEADER: "v1," + encode_signature(mac, Encoding.BASE64),
        }

    def required_headers(self, params: SchemeParams) -> tuple[str, ...]:
        """All three: the id and the timestamp are part of the signed message."""
        return (ID_HEADER, TIMESTAMP_HEADER, SIGNATURE_HEADER)

    def new_event_id(self, uuid_text: str) -> str:
        """Standard Webhooks message ids conventionally read `msg_` + an opaque token."""
        return MSG_ID_PREFIX + uuid_text.replace("-", "")

    def id_ref(self, params: SchemeParams) -> FieldRef:
        """The message id is the `webhook-id` header (it is also signed)."""
        return FieldRef("header", ID_HEADER)

    def type_ref(self, params: SchemeParams) -> FieldRef:
        """The event type is the top-level `type` of the JSON body."""
        return FieldRef("json", "type")

    def authenticates_id(self, params: SchemeParams) -> bool:
        """Always: the message id is part of the signed message."""
        return True

    def replay_digest(self, params: SchemeParams, headers: Headers, body: bytes) -> bytes | None:
        """None: another id would need another signature."""
        return None

    def stored_headers(self, params: SchemeParams) -> tuple[str, ...]:
        """The message id and its timestamp."""
        return (ID_HEADER, TIMESTAMP_HEADER)

    def signature_headers(self, params: SchemeParams) -> tuple[str, ...]:
        """`webhook-signature`."""
        return (SIGNATURE_HEADER,)
