"""Generic HMAC (scheme name "hmac"): the hash, the key's encoding, the header, its
encoding and prefix, what is signed (the body, `{timestamp}.{body}` or `{url}{body}`)
and where the id and type are all come from `SchemeParams`. `PresetHmacScheme` is the
same verifier with a provider's choices fixed (Checkout.com, Paystack, Square): a
provider whose scheme is data, not code. Named so it does not shadow stdlib `hmac`."""

from __future__ import annotations

import re
from dataclasses import replace

from gateway.core.signatures.base import (
    FieldRef,
    Headers,
    HmacKey,
    ParamProblem,
    SchemeParams,
    SignedContent,
    Verifier,
    check_window,
    decode_signature,
    encode_signature,
    header_value,
    matches,
    parse_timestamp,
    require_header,
    sha256_of,
    signing_secret,
)
from gateway.errors import SignatureMalformed, SignatureMismatch

#: Several signatures in one header are separated by commas and/or whitespace.
_SEPARATORS = re.compile(r"[,\s]+")


def signed_content(params: SchemeParams) -> SignedContent:
    """What the signature covers: as configured, else `{timestamp}.{body}` when a
    timestamp header is set and the body alone otherwise (the settings before
    `signed` existed)."""
    if params.signed is not None:
        return params.signed
    timestamped = params.timestamp_header.strip()
    return SignedContent.TIMESTAMP_BODY if timestamped else SignedContent.BODY


def check_hmac_params(params: SchemeParams) -> None:
    """Raise ValueError naming the field if params cannot drive the generic scheme.

    Config validation calls this so a bad provider fails at start-up; `verify` calls it
    too, because a misconfiguration must never pass for a valid signature.
    """
    if not params.header.strip():
        raise ParamProblem("header", "hmac scheme needs a signature header")
    if _SEPARATORS.search(params.prefix):
        # The prefix is stripped per signature after splitting, so it cannot hold a separator.
        raise ParamProblem("prefix", "hmac prefix must not contain commas or whitespace")
    if params.event_id_from is None:
        raise ParamProblem("event_id_from", "hmac scheme needs event_id_from")
    if params.event_type_from is None:
        raise ParamProblem("event_type_from", "hmac scheme needs event_type_from")
    content = signed_content(params)
    if content is SignedContent.TIMESTAMP_BODY and not params.timestamp_header.strip():
        raise ParamProblem(
            "timestamp_header", "signing '{timestamp}.{body}' needs a timestamp_header"
        )
    if content is SignedContent.URL_BODY and not params.url:
        raise ParamProblem("notification_url", "signing '{url}{body}' needs the notification_url")
    for secret in params.secrets:
        params.key_encoding.key(secret)  # ValueError if it does not decode


class HmacScheme:
    """A configurable HMAC signature of the body, optionally timestamped or with a URL."""

    name: str = "hmac"

    def verify(self, params: SchemeParams, headers: Headers, body: bytes, now_s: float) -> None:
        """Read the headers, parse them, check the window (if timestamped), then compare."""
        self.verifier(params)(headers, body, now_s)

    def verifier(self, params: SchemeParams) -> Verifier:
        """`verify` for one provider: params checked, header names and keys prepared once."""
        check_hmac_params(params)  # a misconfiguration must never pass for a valid signature
        keys = tuple(HmacKey(params.key_encoding.key(s), params.algorithm) for s in params.secrets)
        header = params.header.strip().lower()
        content = signed_content(params)
        ts_header = params.timestamp_header.strip().lower()
        url = params.url.encode("utf-8")
        prefix, encoding, tolerance_s = params.prefix, params.encoding, params.tolerance_s
        length = params.algorithm.digest_size

        def verify(headers: Headers, body: bytes, now_s: float) -> None:
            sig_text = require_header(headers, header)
            ts_text = ""
            if content is SignedContent.TIMESTAMP_BODY:
                ts_text = require_header(headers, ts_header)
                timestamp = parse_timestamp(ts_text)
            offered: list[bytes] = []
            for token in _SEPARATORS.split(sig_text):
                if not token:
                    continue
                if not token.startswith(prefix):
                    raise SignatureMalformed(f"{header} value lacks the configured prefix")
                offered.append(decode_signature(token.removeprefix(prefix), encoding, length))
            if not offered:
                raise SignatureMalformed(f"{header} has no signature")
            if content is SignedContent.TIMESTAMP_BODY:
                check_window(timestamp, now_s, tolerance_s)
                signed: tuple[bytes, ...] = (ts_text.encode("ascii"), b".", body)
            elif content is SignedContent.URL_BODY:
                signed = (url, body)
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
        content = signed_content(params)
        parts: tuple[bytes, ...] = (body,)
        if content is SignedContent.TIMESTAMP_BODY:
            ts_text = str(now_s)
            headers[params.timestamp_header] = ts_text
            parts = (ts_text.encode("ascii"), b".", body)
        elif content is SignedContent.URL_BODY:
            parts = (params.url.encode("utf-8"), body)
        mac = HmacKey(params.key_encoding.key(secret), params.algorithm).digest(*parts)
        headers[params.header] = params.prefix + encode_signature(mac, params.encoding)
        id_ref, type_ref = self.id_ref(params), self.type_ref(params)
        if id_ref.source == "header":
            headers[id_ref.name] = header_value(event_id, self.name, "event_id")
        if type_ref.source == "header":
            headers[type_ref.name] = header_value(event_type, self.name, "event_type")
        return headers

    def required_headers(self, params: SchemeParams) -> tuple[str, ...]:
        """The configured signature header, and the timestamp header if one is signed;
        ValueError if params cannot drive the scheme."""
        check_hmac_params(params)
        names: tuple[str, ...] = (params.header.strip().lower(),)
        if signed_content(params) is SignedContent.TIMESTAMP_BODY:
            names += (params.timestamp_header.strip().lower(),)
        return names

    def new_event_id(self, uuid_text: str) -> str:
        """A plain UUID."""
        return uuid_text

    def id_ref(self, params: SchemeParams) -> FieldRef:
        """Where `event_id_from` says the event id is; ValueError if it is not set."""
        if params.event_id_from is None:
            raise ParamProblem("event_id_from", "hmac scheme needs event_id_from")
        return params.event_id_from

    def type_ref(self, params: SchemeParams) -> FieldRef:
        """Where `event_type_from` says the event type is; ValueError if it is not set."""
        if params.event_type_from is None:
            raise ParamProblem("event_type_from", "hmac scheme needs event_type_from")
        return params.event_type_from

    def authenticates_id(self, params: SchemeParams) -> bool:
        """Only when the id is read from the signed body (`json:`): an id header is never
        signed, with or without a timestamp header."""
        return self.id_ref(params).source == "json"

    def replay_digest(self, params: SchemeParams, headers: Headers, body: bytes) -> bytes | None:
        """SHA-256 of the signed message (`{ts}.{body}` or the body) for an id header.

        With a timestamp, the window bounds a replay to `tolerance_s` but does not stop
        one within it; hashing the timestamp too keeps two events with equal bodies
        sent at different seconds apart. The URL is the same for every request, so it
        adds nothing.
        """
        if self.authenticates_id(params):
            return None
        if signed_content(params) is SignedContent.TIMESTAMP_BODY:
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


class PresetHmacScheme(HmacScheme):
    """The generic scheme with one provider's choices fixed: a configuration supplies
    only its secrets (and, for a scheme that signs the URL, the URL given to the
    provider); everything else is `preset`'s."""

    def __init__(self, name: str, preset: SchemeParams) -> None:
        self.name = name
        self._preset = preset

    def params(self, params: SchemeParams) -> SchemeParams:
        """The preset with the configuration's secrets, window and URL."""
        return replace(self._preset, secrets=params.secrets, tolerance_s=params.tolerance_s,
                       url=params.url)  # fmt: skip

    def verifier(self, params: SchemeParams) -> Verifier:
        """The generic verifier over the preset."""
        return super().verifier(self.params(params))

    def sign(
        self,
        params: SchemeParams,
        body: bytes,
        now_s: int,
        *,
        event_id: str | None = None,
        event_type: str | None = None,
    ) -> dict[str, str]:
        """Signed as the provider signs, in its own header spelling."""
        return super().sign(
            self.params(params), body, now_s, event_id=event_id, event_type=event_type
        )

    def required_headers(self, params: SchemeParams) -> tuple[str, ...]:
        """The provider's signature header."""
        return super().required_headers(self.params(params))

    def id_ref(self, params: SchemeParams) -> FieldRef:
        """Where the provider puts its event id."""
        return super().id_ref(self._preset)

    def type_ref(self, params: SchemeParams) -> FieldRef:
        """Where the provider puts its event type."""
        return super().type_ref(self._preset)

    def replay_digest(self, params: SchemeParams, headers: Headers, body: bytes) -> bytes | None:
        """As the generic scheme's, over the preset."""
        return super().replay_digest(self._preset, headers, body)

    def stored_headers(self, params: SchemeParams) -> tuple[str, ...]:
        """As the generic scheme's, over the preset."""
        return super().stored_headers(self._preset)

    def signature_headers(self, params: SchemeParams) -> tuple[str, ...]:
        """The provider's signature header."""
        return super().signature_headers(self._preset)
