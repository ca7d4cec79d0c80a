"""iyzico's signatures: its webhooks' `X-IYZ-SIGNATURE-V3`, the `signature` of its API's
payment answers, and the `IYZWSv2` Authorization of its API's requests. Pure.

**Webhooks.** The header is the hex HMAC-SHA256, keyed with the merchant's secretKey, of
a few of the body's fields concatenated with no separator, never of the body itself
(docs.iyzico.com/en/advanced/webhook; V1 and V2 are retired, and iyzico sends V3 only
once asked to, at entegrasyon@iyzico.com). Which fields depends on the format, told by
the fields the body carries:

- subscription (it carries `subscriptionReferenceCode`): `merchantId + secretKey +
  eventType + subscriptionReferenceCode + orderReferenceCode + customerReferenceCode`;
- HPP, the checkout form and Pay with iyzico (it carries `token`): `secretKey +
  iyziEventType + iyziPaymentId + token + paymentConversationId + status`;
- direct, non-3DS and 3DS API payments (otherwise): `secretKey + iyziEventType +
  paymentId + paymentConversationId + status`.

The direct and HPP orders are iyzico's worked examples (iyzico/iyzipay-php
`samples/webhook_Signature_Validation.php`), which the tests recompute; the
subscription order is the documentation's, its `eventType` the body's `iyziEventType`.
A number (`"paymentId":22484059`) is signed as its digits, an absent field as nothing
(as the PHP sample concatenates one). A subscription body may lack `merchantId`: the
provider's `iyzico_merchant_id` (`SchemeParams.extra`) gives it, and when set, a webhook of any
format naming another merchant is refused.

With no separator, a signature cannot tell where one field ends and the next begins
(payment `1234` of conversation `5` signs as `123` of `45`). Nothing rests on that: a
webhook only names a payment, which is fetched, and only the fetched answer, signed
itself, moves money (`core.providers.iyzico`). Nothing time-bound is signed (no
window), nor is the id (`iyziReferenceCode`): one holding ":" is refused, because the
events a fetch confirms have ids that do (`12345:paid`) and no webhook may take theirs.

**Answers.** A payment answer's `signature` is the hex HMAC-SHA256 of `paymentId,
currency, basketId, conversationId, paidPrice, price` joined with ":", prices without
trailing zeros (docs.iyzico.com/en/advanced/response-signature-validation; iyzipay-java
`ResponseSignatureGenerator`: `stripTrailingZeros().toPlainString()`, null as "").

**Requests.** `Authorization: IYZWSv2 base64("apiKey:K&randomKey:R&signature:S")`, S the
hex HMAC-SHA256 of `R + path + body` (iyzipay-python `generate_v2_hash`; the same in
the Java, PHP and Node libraries, whose test vectors the tests recompute).
"""

from __future__ import annotations

import base64
import enum
import hmac
import re
from collections.abc import Mapping, Sequence
from decimal import Decimal
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
    hmac_sha256,
    require_header,
    sha256_of,
    signing_secret,
)
from gateway.errors import ConfirmationMismatch, SignatureMalformed, SignatureMismatch

#: The header as iyzico spells it (for signing), and as the gateway reads it.
SENT_HEADER = "X-IYZ-SIGNATURE-V3"
HEADER = SENT_HEADER.lower()
#: `SchemeParams.extra`'s key of the merchant's iyzico id (its MID).
MERCHANT_ID = "merchant_id"
_ID_REF = FieldRef("json", "iyziReferenceCode")
_TYPE_REF = FieldRef("json", "iyziEventType", fallback=FieldRef("json", "eventType"))


class Format(enum.StrEnum):
    """A webhook's format, which says which fields its signature covers."""

    DIRECT = "direct"
    HPP = "hpp"
    SUBSCRIPTION = "subscription"


#: After the secretKey, the fields each format signs; the first two must be present.
SIGNED: Mapping[Format, tuple[str, ...]] = {
    Format.DIRECT: ("iyziEventType", "paymentId", "paymentConversationId", "status"),
    Format.HPP: ("iyziEventType", "iyziPaymentId", "token", "paymentConversationId", "status"),
    Format.SUBSCRIPTION: ("iyziEventType", "subscriptionReferenceCode", "orderReferenceCode",
                          "customerReferenceCode"),
}  # fmt: skip


def _text(doc: Mapping[str, Any], key: str) -> str:
    """A signed field as iyzico concatenates it: a string as it is, an integer's digits,
    nothing when absent; `SignatureMalformed` for anything else."""
    value = doc.get(key)
    if value is None and key == "iyziEventType":
        value = doc.get("eventType")  # the documentation's name of the subscriptions' one
    if value is None:
        return ""
    if type(value) is int:
        return str(value)
    if not isinstance(value, str):
        raise SignatureMalformed(f"the body's {key} is neither a string nor an integer")
    return value


def signed_fields(doc: Any, merchant_id: str = "") -> tuple[Format, str, tuple[str, ...]]:
    """The body's format, what its signature puts before the secretKey (the merchant's id
    for a subscription, else nothing) and the fields it puts after it.
    `SignatureMalformed` for a body that is not an iyzico webhook; `SignatureMismatch`
    for one naming another merchant than `merchant_id` (the configured one, if any)."""
    if not isinstance(doc, Mapping):
        raise SignatureMalformed("the body is not a JSON object")
    if doc.get("subscriptionReferenceCode") is not None:
        found = Format.SUBSCRIPTION
    else:
        found = Format.HPP if doc.get("token") is not None else Format.DIRECT
    fields = tuple(_text(doc, key) for key in SIGNED[found])
    if not fields[0] or not fields[1]:
        raise SignatureMalformed(f"a {found.value} webhook without {SIGNED[found][1]} or its type")
    sent = _text(doc, "merchantId")
    if merchant_id and sent and sent != merchant_id:
        raise SignatureMismatch("the webhook names another merchantId than the configured one")
    lead = ""
    if found is Format.SUBSCRIPTION:
        lead = sent or merchant_id
        if not lead:
            raise SignatureMalformed("a subscription webhook without merchantId; set merchant_id")
    reference = doc.get("iyziReferenceCode")
    if isinstance(reference, str) and ":" in reference:
        raise SignatureMalformed("iyziReferenceCode holds ':', which iyzico's never do")
    return found, lead, fields


def _read(body: bytes, merchant_id: str) -> tuple[Format, str, tuple[str, ...]]:
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise SignatureMalformed("the body is not JSON") from None
    return signed_fields(doc, merchant_id)


def webhook_signature(secret: str, lead: str, fields: Sequence[str]) -> str:
    """The V3 header's value for the fields `signed_fields` read, keyed with `secret`."""
    message = (lead + secret + "".join(fields)).encode("utf-8")
    return hmac_sha256(secret.encode("utf-8"), message).hex()


class IyzicoScheme:
    """`X-IYZ-SIGNATURE-V3`: a hex HMAC-SHA256 of some of the body's fields."""

    name = "iyzico"

    def verify(self, params: SchemeParams, headers: Headers, body: bytes, now_s: float) -> None:
        """The header is present (`SignatureMissing`) and 32 bytes of hex, the body an
        iyzico webhook (`SignatureMalformed`); some secret signs it (`SignatureMismatch`)."""
        self.verifier(params)(headers, body, now_s)

    def verifier(self, params: SchemeParams) -> Verifier:
        """`verify` with each secret's key prepared once."""
        keys = tuple((s.encode("utf-8"), HmacKey(s.encode("utf-8"))) for s in params.secrets)
        merchant_id = params.extra.get(MERCHANT_ID, "")

        def verify(headers: Headers, body: bytes, now_s: float) -> None:
            offered = decode_signature(require_header(headers, HEADER), Encoding.HEX)
            _, lead, fields = _read(body, merchant_id)
            head, tail = lead.encode("utf-8"), "".join(fields).encode("utf-8")
            # The secret is part of the message, so each key signs its own: every one
            # is compared, in constant time and without an early exit.
            found = False
            for secret, key in keys:
                found |= hmac.compare_digest(key.digest(head, secret, tail), offered)
            if not found:
                raise SignatureMismatch(f"no configured secretKey matches {HEADER}")

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
        """The header for `body` (its id and type are its own fields); ValueError for a
        body that is not an iyzico webhook."""
        try:
            _, lead, fields = _read(body, params.extra.get(MERCHANT_ID, ""))
        except (SignatureMalformed, SignatureMismatch) as exc:
            raise ValueError(str(exc)) from None
        return {SENT_HEADER: webhook_signature(signing_secret(params), lead, fields)}

    def new_event_id(self, uuid_text: str) -> str:
        """The UUID as given: iyzico's reference codes are UUIDs."""
        return uuid_text

    def required_headers(self, params: SchemeParams) -> tuple[str, ...]:
        return (HEADER,)

    def id_ref(self, params: SchemeParams) -> FieldRef:
        """The body's `iyziReferenceCode`, one per notification."""
        return _ID_REF

    def type_ref(self, params: SchemeParams) -> FieldRef:
        """The body's `iyziEventType` (`API_AUTH`, `CHECKOUT_FORM_AUTH`, ...)."""
        return _TYPE_REF

    def authenticates_id(self, params: SchemeParams) -> bool:
        """False: `iyziReferenceCode` is not among the signed fields."""
        return False

    def replay_digest(self, params: SchemeParams, headers: Headers, body: bytes) -> bytes | None:
        """SHA-256 of the signed fields (never the secret), the format leading."""
        found, lead, fields = _read(body, params.extra.get(MERCHANT_ID, ""))
        return sha256_of(*(p.encode("utf-8") + b"\0" for p in (found.value, lead, *fields)))

    def stored_headers(self, params: SchemeParams) -> tuple[str, ...]:
        """None: the id and type are the body's."""
        return ()

    def signature_headers(self, params: SchemeParams) -> tuple[str, ...]:
        return (HEADER,)


SCHEME = IyzicoScheme()

# --- the API: its answers' signatures and its requests' Authorization --------------------

#: The fields a payment answer's `signature` covers, in order (`/payment/detail` and
#: every payment endpoint, per the response-signature page).
ANSWER_SIGNED = ("paymentId", "currency", "basketId", "conversationId", "paidPrice", "price")
_PRICES = frozenset({"paidPrice", "price"})
#: A price given as a string: digits, a point, digits; an exponent as JSON allows.
_PRICE_TEXT = re.compile(r"-?[0-9]{1,30}(?:\.[0-9]{1,30})?(?:[eE][-+]?[0-9]{1,2})?", re.ASCII)
#: A double holds any decimal of at most 15 significant digits exactly enough that its
#: shortest repr gives it back; past that, a price read as a float is not trusted.
FLOAT_DIGITS_MAX = 15
_RANDOM_KEY = re.compile(r"[A-Za-z0-9_.-]{1,64}", re.ASCII)


def exact_decimal(value: Any) -> Decimal:
    """An amount as the answer holds it (a `Decimal` when parsed with `parse_float=
    Decimal`, an int, a float, or a decimal string), exactly; ValueError when it is
    none of those, not finite, or a float that may have lost digits."""
    if isinstance(value, Decimal):
        found = value
    elif type(value) is int:
        found = Decimal(value)
    elif isinstance(value, float):
        found = Decimal(repr(value))  # the shortest text that reads back as this float
        if len(found.as_tuple().digits) > FLOAT_DIGITS_MAX:
            raise ValueError(f"{value!r} has more than {FLOAT_DIGITS_MAX} significant digits")
    elif isinstance(value, str) and _PRICE_TEXT.fullmatch(value):
        found = Decimal(value)
    else:
        raise ValueError(f"a {type(value).__name__} is not an amount")
    if not found.is_finite() or not -30 <= found.adjusted() <= 30:
        raise ValueError("an amount that is not a finite number of at most 30 digits")
    return found


def price_text(value: Any) -> str:
    """A price as iyzico signs it: plain digits without trailing zeros (`1.10` is `1.1`,
    `1.00000000` is `1`, `1E+2` is `100`); ValueError as `exact_decimal`."""
    text = format(exact_decimal(value), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def response_signature(secret: str, answer: Mapping[str, Any]) -> str:
    """The `signature` iyzico writes in a payment answer, keyed with `secret`; ValueError
    for a price that is not a number."""
    parts = []
    for key in ANSWER_SIGNED:
        value = answer.get(key)
        if value is None:
            parts.append("")
        elif key in _PRICES:
            parts.append(price_text(value))
        elif isinstance(value, str) or type(value) is int:
            parts.append(str(value))
        else:
            raise ValueError(f"the answer's {key} is neither a string nor an integer")
    return hmac_sha256(secret.encode("utf-8"), ":".join(parts).encode("utf-8")).hex()


def check_answer_signature(secrets: Sequence[str], answer: Mapping[str, Any]) -> None:
    """Return if some secret signs `answer`; `ConfirmationMismatch` when none does or it
    carries no signature: an answer iyzico did not sign is not this payment's
    confirmation. ValueError (from `price_text`) for a price that is not a number."""
    offered = answer.get("signature")
    try:
        raw = decode_signature(offered if isinstance(offered, str) else "", Encoding.HEX)
    except SignatureMalformed:
        problem = "iyzico's answer carries no signature of 64 hex digits"
        raise ConfirmationMismatch(problem) from None
    found = False
    for secret in secrets:
        expected = bytes.fromhex(response_signature(secret, answer))
        found |= hmac.compare_digest(expected, raw)
    if not found:
        raise ConfirmationMismatch("iyzico's answer is signed with no configured secretKey")


def authorization(
    api_key: str, secret_key: str, random_key: str, path: str, body: bytes
) -> dict[str, str]:
    """The headers that authenticate one API request: `Authorization: IYZWSv2 ...` over
    `random_key + path + body` (the path as signed, without a query here: the Python and
    PHP libraries drop it), and `x-iyzi-rnd` (sent by the Python and Node libraries).
    `random_key` must be fresh for each request (the libraries send 8 alphanumerics or a
    UUID); ValueError for an empty key or a random key of other characters."""
    if not api_key or not secret_key or not _RANDOM_KEY.fullmatch(random_key):
        raise ValueError("an API key, a secret key and a random key of 1 to 64 [A-Za-z0-9_.-]")
    message = random_key.encode("ascii") + path.encode("utf-8") + body
    signature = hmac_sha256(secret_key.encode("utf-8"), message).hex()
    token = f"apiKey:{api_key}&randomKey:{random_key}&signature:{signature}"
    encoded = base64.b64encode(token.encode("utf-8")).decode("ascii")
    return {"Authorization": f"IYZWSv2 {encoded}", "x-iyzi-rnd": random_key}
