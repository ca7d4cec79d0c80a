"""Zarinpal's callback, and the order it carries signed by the merchant. Pure.

Zarinpal (and the Iranian gateways that share its flow) sends no signed webhook: the
payer's browser comes back to the merchant's `callback_url` with `?Authority=…&Status=OK`
(or `NOK`), and nothing in that request is signed. Only Zarinpal's `verify` API, called
by the merchant with its merchant id and the amount it expects, says whether the
payment is real (zarinpal.com/docs/paymentGateway/connectToGateway).

`verify` needs the order's amount, which the callback does not carry. So the merchant
puts its order in the `callback_url` it gives Zarinpal, signed with a secret it shares
with the gateway (`[providers.NAME] secrets`):

    https://gateway.example/callbacks/zarinpal?order=o_1&amount=150000&currency=IRT
        &merchant=m_1&sig=<hex HMAC-SHA256 of the order>

Zarinpal appends `Authority` and `Status` to it. What is signed is
`zarinpal-order\\n{order}\\n{amount}\\n{currency}\\n{merchant}` (no field may hold a
newline, so no two orders sign alike). The signature makes the order trustworthy
(nobody can have the gateway verify a payment for an amount the merchant never asked
for); the `Authority` stays unauthenticated, which is safe because it decides nothing:
the confirm stage verifies it with Zarinpal, and only Zarinpal's answer is published.
A forged Authority costs one paced verify call, and Zarinpal refuses it.

The same URL is in Zarinpal's list of payments paid and not verified (`unVerified`), so
a payment whose payer never came back is recovered with its order.
"""

from __future__ import annotations

import hashlib
import hmac
import re

from gateway.core.bodies.forms import FormInvalid, form_fields
from gateway.core.signatures.base import (
    FieldRef,
    Headers,
    NoHeaders,
    SchemeParams,
    Verifier,
    sha256_of,
)
from gateway.errors import SignatureMalformed, SignatureMismatch, SignatureMissing

#: The fields of the order the merchant signs, in the order they are signed.
ORDER_FIELDS = ("order", "amount", "currency", "merchant")
SIGNATURE_FIELD = "sig"
_DOMAIN = "zarinpal-order"
_HEX_SHA256 = re.compile(r"[0-9a-f]{64}", re.ASCII)
#: The document's fields (`core.providers.zarinpal.document`).
_ID_REF = FieldRef("json", "id")
_TYPE_REF = FieldRef("json", "type")


def order_message(fields: dict[str, str]) -> bytes:
    """What the merchant signs of its order; `SignatureMissing` for a field not there,
    `SignatureMalformed` for one holding a line break (two orders would sign alike)."""
    values = []
    for name in ORDER_FIELDS:
        value = fields.get(name)
        if value is None:
            raise SignatureMissing(f"the callback carries no signed order field {name!r}")
        if "\n" in value or "\r" in value:
            raise SignatureMalformed(f"the order field {name!r} holds a line break")
        values.append(value)
    return "\n".join((_DOMAIN, *values)).encode("utf-8")


def order_signature(secret: str, fields: dict[str, str]) -> str:
    """The hex HMAC-SHA256 of the order, as the merchant puts it in `sig`."""
    return hmac.new(secret.encode("utf-8"), order_message(fields), hashlib.sha256).hexdigest()


def _fields(body: bytes) -> dict[str, str]:
    try:
        return form_fields(body)
    except FormInvalid as exc:
        raise SignatureMalformed(f"the callback's query is not readable: {exc}") from None


def _verifier(keys: tuple[bytes, ...]) -> Verifier:
    def verify(headers: Headers, body: bytes, now_s: float) -> None:
        fields = _fields(body)
        given = fields.get(SIGNATURE_FIELD)
        if given is None:
            raise SignatureMissing("the callback carries no order signature (sig)")
        if not _HEX_SHA256.fullmatch(given):
            raise SignatureMalformed("the order signature (sig) is not 64 hex digits")
        message = order_message(fields)
        for key in keys:
            expected = hmac.new(key, message, hashlib.sha256).hexdigest()
            if hmac.compare_digest(expected, given):
                return
        raise SignatureMismatch("the order signature (sig) matches no configured secret")

    return verify


class ZarinpalScheme(NoHeaders):
    """The merchant's signature over the order in Zarinpal's callback URL (see the
    module's docstring)."""

    name = "zarinpal"

    def verify(self, params: SchemeParams, headers: Headers, body: bytes, now_s: float) -> None:
        """Return if the callback's order is signed with one of `params.secrets`."""
        self.verifier(params)(headers, body, now_s)

    def verifier(self, params: SchemeParams) -> Verifier:
        """`verify` with the secrets' keys prepared once."""
        return _verifier(tuple(secret.encode("utf-8") for secret in params.secrets))

    def sign(
        self,
        params: SchemeParams,
        body: bytes,
        now_s: int,
        *,
        event_id: str | None = None,
        event_type: str | None = None,
    ) -> dict[str, str]:
        """No header: the signature is in the query (`sign_callback`)."""
        return {}

    def new_event_id(self, uuid_text: str) -> str:
        """An Authority shaped like Zarinpal's: `A` and 35 characters."""
        return ("A" + uuid_text.replace("-", "") * 2)[:36]

    def id_ref(self, params: SchemeParams) -> FieldRef:
        """The Authority, from the document."""
        return _ID_REF

    def type_ref(self, params: SchemeParams) -> FieldRef:
        """`callback.ok` or `callback.nok`, from the document."""
        return _TYPE_REF

    def authenticates_id(self, params: SchemeParams) -> bool:
        """False: the Authority is not signed (see the module's docstring)."""
        return False

    def replay_digest(self, params: SchemeParams, headers: Headers, body: bytes) -> bytes | None:
        """SHA-256 of the query: a replayed callback is a duplicate by its Authority too."""
        return sha256_of(body)


SCHEME = ZarinpalScheme()
