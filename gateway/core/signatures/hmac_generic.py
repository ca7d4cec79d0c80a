"""Generic HMAC-SHA256 (scheme name "hmac"): header, encoding, prefix and an optional
timestamp header all come from `SchemeParams`. Named so it does not shadow stdlib `hmac`."""

from __future__ import annotations

import re

from gateway.core.signatures.base import (
    FieldRef,
    Headers,
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
    sha256_of,
    signing_secret,
    utf8_keys,
)
from gateway.errors import SignatureMalformed, SignatureMismatch

#: Several signatures in one header are separated by commas and/or whitespace.
_SEPARATORS = re.compile(r"[,\s]+")


def check_hmac_params(params: SchemeParams) -> None:
    """Raise ValueError naming the field if params cannot drive the generic scheme.

    Config validation calls this so a bad provider fails at start-up; `verify` calls it
    too, because a misconfiguration must never pass for a valid signature.
    """
    if not params.header.strip():
        raise ValueError("hmac scheme needs a signature header")
    if _SEPARATORS.search(params.prefix):
        # The prefix is stripped per signature after splitting, so it cannot hold a separator.
        raise ValueError("hmac prefix must not contain commas or whitespace")
    if params.event_id_from is None:
        raise ValueError("hmac scheme needs event_id_from")
    if params.event_type_from is None:
        raise ValueError("hmac scheme needs event_type_from")


class HmacScheme:
    """A configurable HMAC-SHA256 signature over the body, optionally timestamped."""

    name: str = "hmac"

    def verify(self, params: SchemeParams, headers: Headers, body: bytes, now_s: float) -> None:
        """Read the headers, parse them, check the window (if timestamped), then compare."""
        self.verifier(params)(headers, body, now_s)

    def verifier(self, params: SchemeParams) -> Verifier:
        """`verify` for one provider: params checked, header names and keys prepared once."""
        check_hmac_params(params)  # a misconfiguration must never pass for a valid signature
        keys = utf8_keys(params.secrets)
        header = params.header.strip().lower()
        ts_header = params.timestamp_header.strip().lower() if params.timestamp_header else ""
        prefix, encoding, tolerance_s = params.prefix, params.encoding, params.tolerance_s

        def verify(headers: Headers, body: bytes, now_s: float) -> None:
            sig_text = require_header(headers, header)
            ts_text = require_header(headers, ts_header) if ts_header else ""
            timestamp = parse_timestamp(ts_text) if ts_text else None
            offered: list[bytes] = []
            for token in _SEPARATORS.split(sig_text):
                if not token:
                    continue
                if not token.startswith(prefix):
                    raise SignatureMalformed(f"{header} value lacks the configured prefix")
                offered.append(decode_signature(token.removeprefix(prefix), encoding))
            if not offered:
                raise SignatureMalformed(f"{header} has no signature")
            if timestamp is not None:
                check_window(timestamp, now_s, tolerance_s)
                signed: tuple[bytes, ...] = (ts_text.encode("ascii"), b".", body)
            else:
                signed = (body,)
            if not matches(keys, offered, *signed):
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
        """The signature (and timestamp) headers named in params, plus the id and type
        where params read them from headers; header names are used as configured."""
        secret = signing_secret(params)
        check_hmac_params(params)
        headers: dict[str, str] = {}
        message = body
        if params.timestamp_header:
            ts_text = str(now_s)
            headers[params.timestamp_header] = ts_text
            message = ts_text.encode("ascii") + b"." + body
        mac = hmac_sha256(secret.encode("utf-8"), message)
        headers[params.header] = params.prefix + encode_signature(mac, params.encoding)
        id_ref, type_ref = self.id_ref(params), self.type_ref(params)
        if id_ref.source == "header":
            headers[id_ref.name] = header_value(event_id, self.name, "event_id")
        if type_ref.source == "header":
            headers[type_ref.name] = header_value(event_type, self.name, "event_type")
        return headers

    def required_headers(self, params: SchemeParams) -> tuple[str, ...]:
        """The configured signature header, and the timestamp header if one is set;
        ValueError if params cannot drive the scheme."""
        check_hmac_params(params)
        names: tuple[str, ...] = (params.header.strip().lower(),)
        if params.timestamp_header:
            names += (params.timestamp_header.strip().lower(),)
        return names

    def new_event_id(self, uuid_text: str) -> str:
        """A plain UUID."""
        return uuid_text

    def id_ref(self, params: SchemeParams) -> FieldRef:
        """Where `event_id_from` says the event id is; ValueError if it is not set."""
        if params.event_id_from is None:
            raise ValueError("hmac scheme needs event_id_from")
        return params.event_id_from

    def type_ref(self, params: SchemeParams) -> FieldRef:
        """Where `event_type_from` says the event type is; ValueError if it is not set."""
        if params.event_type_from is None:
            raise ValueError("hmac scheme needs event_type_from")
        return params.event_type_from

    def authenticates_id(self, params: SchemeParams) -> bool:
        """Only when the id is read from the signed body (`json:`): an id header is never
        signed, with or without a timestamp header."""
        return self.id_ref(params).source == "json"

    def replay_digest(self, params: SchemeParams, headers: Headers, body: bytes) -> bytes | None:
        """SHA-256 of the signed message (`{ts}.{body}` or the body) for an id header.

        With a timestamp, the window bounds a replay to `tolerance_s` but does not stop
        one within it; hashing the timestamp too keeps two events with equal bodies
        sent at different seconds apart.
        """
        if self.authenticates_id(params):
            return None
        if params.timestamp_header:
            ts_text = require_header(headers, params.timestamp_header.strip().lower())
            return sha256_of(ts_text.encode("ascii"), b".", body)
        return sha256_of(body)

    def stored_headers(self, params: SchemeParams) -> tuple[str, ...]:
        """The timestamp header and the headers the id and type are read from."""
        refs = (self.id_ref(params), self.type_ref(params))
        names = [ref.name for ref in refs if ref.source == "header"]
        if params.timestamp_header:
            names.append(params.timestamp_header.strip().lower())
        return tuple(names)

    def signature_headers(self, params: SchemeParams) -> tuple[str, ...]:
        """The configured signature header."""
        return (params.header.strip().lower(),)


HMAC = HmacScheme()
