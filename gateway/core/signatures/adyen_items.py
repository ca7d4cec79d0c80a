"""Adyen's Standard webhooks (classic notifications), verified: each item signs
itself, and a body of several items splits into one body per item. Pure.

A body is `{"live": "false", "notificationItems": [{"NotificationRequestItem": {...}}]}`
and `additionalData.hmacSignature` of each item is the base64 HMAC-SHA256, keyed with
the hex-decoded key the Customer Area shows, of `pspReference:originalReference:
merchantAccountCode:merchantReference:value:currency:eventCode:success` built as
Adyen's library builds it (`Adyen.util.generate_notification_sig`, 16.0.0): no escaping
(its `colon_notification.json` signs `:slashes are fun` as is), "" for an absent field,
Python's `str` for any other value, and no signature at all for an item without
`amount.value` and `amount.currency`. Nothing time-bound is signed. JSON deliveries
carry one item, SOAP up to six; the library checks the first only
(adyen-python-api-library PR #305, closed unmerged); `verify` checks each one and
`split` makes one body per item.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from gateway.core.signatures.base import (
    Encoding,
    FieldRef,
    Headers,
    HmacKey,
    SchemeParams,
    Verifier,
    decode_signature,
    matches,
    signing_secret,
)
from gateway.errors import (
    BatchTooLarge,
    SignatureMalformed,
    SignatureMismatch,
    SignatureMissing,
)

# --- the signature -----------------------------------------------------------------

#: The signed fields before and after `amount.value:amount.currency`.
_HEAD = ("pspReference", "originalReference", "merchantAccountCode", "merchantReference")
_TAIL = ("eventCode", "success")
_ITEM = "/notificationItems/0/NotificationRequestItem"
_ID_REF = FieldRef("json", f"{_ITEM}/pspReference", also=(f"{_ITEM}/eventCode", f"{_ITEM}/success"))
_TYPE_REF = FieldRef("json", f"{_ITEM}/eventCode")
_PSP_CHARS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def signed_message(item: Mapping[str, Any]) -> bytes:
    """What an item's signature covers, built as `generate_notification_sig` builds it;
    ValueError if the item has no `amount` object with `value` and `currency`."""
    amount = item.get("amount")
    if not isinstance(amount, Mapping) or "value" not in amount or "currency" not in amount:
        raise ValueError("a notification item without amount.value and amount.currency")
    parts = (*(item.get(k, "") for k in _HEAD), amount["value"], amount["currency"],
             *(item.get(k, "") for k in _TAIL))  # fmt: skip
    return ":".join(map(str, parts)).encode("utf-8")


def item_signature(item: Mapping[str, Any], hex_key: str) -> str:
    """The `hmacSignature` Adyen writes in `item` under `hex_key` (ValueError if not hex)."""
    return base64.b64encode(_hex_keys((hex_key,))[0].digest(signed_message(item))).decode()


def signed_body(body: bytes, hex_key: str) -> bytes:
    """`body` re-serialised with every item's `additionalData.hmacSignature` set, as
    Adyen signs a delivery (for tests, `gateway sign adyen` and forwarding): the
    signature lives in the body, so `AdyenScheme.sign` has no header to give. ValueError
    if the key is not hex or the body is not Adyen's shape."""
    doc, items = _read(body)
    for item in items:
        extra = item.setdefault("additionalData", {})
        if not isinstance(extra, dict):
            raise ValueError("a notification item's additionalData is not an object")
        extra["hmacSignature"] = item_signature(item, hex_key)
    return orjson.dumps(doc)


def _hex_keys(secrets: Sequence[str]) -> tuple[HmacKey, ...]:
    """The HMAC keys, hex-decoded once; ValueError naming which secret (never its text)."""
    keys = []
    for position, secret in enumerate(secrets, 1):
        try:
            raw = binascii.unhexlify(secret.strip())  # outer blanks: a copy-paste artefact
        except ValueError:  # binascii.Error is one; so is a non-ASCII str
            raw = b""
        if not raw:
            raise ValueError(
                f"adyen secret {position} of {len(secrets)} is not an HMAC key in hex "
                "(the Customer Area shows 64 hex digits)"
            )
        keys.append(HmacKey(raw))
    return tuple(keys)


def _read(body: bytes) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The parsed body and its items; ValueError saying why it is not Adyen's shape."""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise ValueError("body is not JSON") from None
    wrappers = doc.get("notificationItems") if isinstance(doc, dict) else None
    if not isinstance(wrappers, list) or not wrappers:
        raise ValueError("body has no notificationItems list with an item")
    items: list[dict[str, Any]] = []
    for index, wrapper in enumerate(wrappers):
        item = wrapper.get("NotificationRequestItem") if isinstance(wrapper, dict) else None
        if not isinstance(item, dict):
            raise ValueError(f"notificationItems[{index}] has no NotificationRequestItem object")
        items.append(item)
    return doc, items


def _offered(item: Mapping[str, Any], index: int) -> tuple[bytes, bytes]:
    """An item's offered signature, decoded, and what it must sign."""
    where = f"notificationItems[{index}]"
    extra = item.get("additionalData")
    if extra is not None and not isinstance(extra, dict):
        raise SignatureMalformed(f"{where}.additionalData is not an object")
    signature = (extra or {}).get("hmacSignature")
    if signature is None or signature == "":
        raise SignatureMissing(f"{where} has no additionalData.hmacSignature")
    if not isinstance(signature, str):
        raise SignatureMalformed(f"{where} hmacSignature is not a string")
    try:
        offered, message = decode_signature(signature, Encoding.BASE64), signed_message(item)
    except (SignatureMalformed, ValueError) as exc:  # undecodable, or nothing to sign
        raise SignatureMalformed(f"{where}: {exc}") from None
    if message.count(b":") != len(_HEAD) + len(_TAIL) + 1 + _colons(item):
        # The eight fields are joined with ":" and nothing escaped, so a ":" moved from
        # one field to its neighbour signs the same text: a genuine item's signature
        # would vouch for another reading of it (another id, payment or merchant).
        # Adyen's references, account codes, currencies and codes hold no ":"; only
        # `merchantReference`, the merchant's own text, may, and it alone can.
        raise SignatureMalformed(f"{where}: a field other than merchantReference holds ':'")
    return offered, message


def _colons(item: Mapping[str, Any]) -> int:
    """The colons of `merchantReference`, the one signed field that may hold some."""
    return str(item.get("merchantReference", "")).count(":")


class AdyenScheme:
    """Adyen's Standard webhooks: every item's HMAC, in the body, keyed with a hex key."""

    name = "adyen"

    def verify(self, params: SchemeParams, headers: Headers, body: bytes, now_s: float) -> None:
        """Check every item: first each is parsed and its signature decoded
        (`SignatureMissing`, `SignatureMalformed`), then each is compared against every
        key (`SignatureMismatch` naming the first item no key signs)."""
        self.verifier(params)(headers, body, now_s)

    def verifier(self, params: SchemeParams) -> Verifier:
        """`verify` with the keys hex-decoded once; ValueError if a secret is not hex."""
        keys = _hex_keys(params.secrets)

        def verify(headers: Headers, body: bytes, now_s: float) -> None:
            try:
                items = _read(body)[1]
            except ValueError as exc:
                raise SignatureMalformed(str(exc)) from None
            checks = [_offered(item, index) for index, item in enumerate(items)]
            # Every item against every key (`matches`: constant time, no early exit).
            failed = [i for i, (sig, msg) in enumerate(checks) if not matches(keys, [sig], msg)]
            if failed:
                raise SignatureMismatch(
                    f"no configured key signs notificationItems[{failed[0]}] "
                    f"({len(failed)} of {len(items)} items unsigned)"
                )

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
        """No headers: Adyen signs inside the body, which a sender signs with
        `signed_body(body, params.secrets[0])`. ValueError if that secret is not hex."""
        _hex_keys((signing_secret(params),))
        return {}

    def new_event_id(self, uuid_text: str) -> str:
        """A 16-character upper-case alphanumeric reference shaped like a `pspReference`
        (`QFQTPCQ8HXSKGK82`), derived from the UUID's text."""
        number = int.from_bytes(hashlib.sha256(uuid_text.encode()).digest()[:11], "big")
        chars = []
        for _ in range(16):  # 36**16 < 2**88: 11 bytes fill every place
            number, digit = divmod(number, 36)
            chars.append(_PSP_CHARS[digit])
        return "".join(chars)

    def required_headers(self, params: SchemeParams) -> tuple[str, ...]:
        """None: the signatures are in the body."""
        return ()

    def id_ref(self, params: SchemeParams) -> FieldRef:
        """`pspReference:eventCode:success` of the (single) item: a payment's reference
        repeats across its events, and the same code may arrive refused, then accepted."""
        return _ID_REF

    def type_ref(self, params: SchemeParams) -> FieldRef:
        """The item's `eventCode`."""
        return _TYPE_REF

    def authenticates_id(self, params: SchemeParams) -> bool:
        """True: the id's three fields are all in the signed string."""
        return True

    def replay_digest(self, params: SchemeParams, headers: Headers, body: bytes) -> bytes | None:
        """None: the id is signed, so a replay is a duplicate by its id."""
        return None

    def stored_headers(self, params: SchemeParams) -> tuple[str, ...]:
        """None: Adyen's id, type and signature are all in the body."""
        return ()

    def signature_headers(self, params: SchemeParams) -> tuple[str, ...]:
        """None: the signatures are in the body."""
        return ()


SCHEME = AdyenScheme()

# --- batches --------------------------------------------------------------------------


def split(body: bytes, items_max: int, item_bytes_max: int) -> tuple[bytes, ...]:
    """One body per notification item: a body of one item as it came, byte for byte;
    each item of several as `{"live": ..., "notificationItems": [item]}` (`live` kept
    when the body has it). A body not of Adyen's shape comes back whole, for
    verification to refuse. `BatchTooLarge` for more than `items_max` items, or, of
    several, an item whose own body is longer than `item_bytes_max` bytes.

    An item of several is re-serialised: its signed fields are strings and an integer,
    which orjson writes back as read, but an unsigned float or an integer beyond 64 bits
    may be written differently from how it came."""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        return (body,)
    items = doc.get("notificationItems") if isinstance(doc, dict) else None
    if not isinstance(items, list) or not items:
        return (body,)
    if len(items) > items_max:
        raise BatchTooLarge(f"{len(items)} notification items in one request; at most {items_max}")
    head = {"live": doc["live"]} if "live" in doc else {}
    bodies: tuple[bytes, ...] = (body,)
    if len(items) > 1:
        bodies = tuple(orjson.dumps({**head, "notificationItems": [item]}) for item in items)
    for index, one in enumerate(bodies if len(items) > 1 else ()):
        # One item as it came is bounded by `[http] max_body_bytes` already.
        if len(one) > item_bytes_max:
            raise BatchTooLarge(
                f"notificationItems[{index}] is {len(one)} bytes as its own body; "
                f"at most {item_bytes_max}"
            )
    return bodies
