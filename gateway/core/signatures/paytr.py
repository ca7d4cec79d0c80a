"""PayTR's callbacks, verified: a form whose `hash` is base64 of HMAC-SHA256, keyed with
the merchant key, of `merchant_oid + merchant_salt + status + total_amount`.

Pure. The rule is PayTR's own callback sample code (dev.paytr.com/en/iframe-api/
iframe-api-2-adim, "See the sample codes for the calculation"; the Direct API and
Havale/EFT pages send the same fields):
`base64_encode(hash_hmac('sha256', $post['merchant_oid'].$merchant_salt.$post['status']
.$post['total_amount'], $merchant_key, true))`. The values are hashed as they were
posted, never re-serialised (`total_amount` is the text `3456`, not a number written
back). A payment link's callback (dev.paytr.com/en/link-api/linkle-api-callback) signs
its `callback_id` in front of the same four, as PayTR's link sample and the
`paytr-python` 0.3.0 client (`parse_callback`) compute it [2nd: the link page itself only
points at its sample]; a form without `callback_id` is signed without it. Nothing
time-bound is signed, and nothing else: `currency`, `payment_amount`, `test_mode` and
`failed_reason_*` travel outside the hash.

A secret is the pair the Merchant Panel shows, `MERCHANT_KEY:MERCHANT_SALT`, written as
Braintree's `PUBLIC_KEY:PRIVATE_KEY` is (one secret string per credential pair, so
`secrets` and `secret_env` hold pairs, and several pairs are a rotation). Every pair is
tried and every comparison made, so the time taken does not tell which came closest.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable, Mapping
from urllib.parse import urlencode

from gateway.core.bodies.forms import FormInvalid, form_fields
from gateway.core.signatures.base import (
    Encoding,
    FieldRef,
    Headers,
    HmacKey,
    NoHeaders,
    ParamProblem,
    SchemeParams,
    Verifier,
    decode_signature,
    encode_signature,
    signing_secret,
)
from gateway.errors import SignatureMalformed, SignatureMismatch, SignatureMissing

#: The form's signature, and the fields it covers, in the order they are hashed (the
#: salt goes between the order number and the status).
HASH_FIELD = "hash"
SIGNED_FIELDS = ("merchant_oid", "status", "total_amount")
#: A payment link's callback signs this first, when the form carries it.
LINK_FIELD = "callback_id"
#: The id is the order and its outcome (`core.providers.paytr` says why both); the
#: type is the outcome, `success` or `failed`.
_ID_REF = FieldRef("json", "merchant_oid", also=("status",))
_TYPE_REF = FieldRef("json", "status")
_FORM = "application/x-www-form-urlencoded"
_SHAPE = "a paytr secret is 'MERCHANT_KEY:MERCHANT_SALT' (no blanks)"

#: One credential pair ready to hash with: the keyed HMAC, and the salt's bytes.
KeyPair = tuple[HmacKey, bytes]


def key_pairs(secrets: Iterable[str]) -> tuple[KeyPair, ...]:
    """Each `MERCHANT_KEY:MERCHANT_SALT` secret as (HMAC key, salt); `ParamProblem`
    naming `secrets`, never the secret, for one that is not such a pair. PayTR's keys
    and salts are letters and digits: a blank is a typing slip that would make every
    callback a mismatch, so it stops the start-up instead."""
    pairs = []
    for secret in secrets:
        key, sep, salt = secret.partition(":")
        if not sep or not key or not salt or any(c.isspace() for c in secret):
            raise ParamProblem("secrets", _SHAPE)
        pairs.append((HmacKey(key.encode("utf-8")), salt.encode("utf-8")))
    return tuple(pairs)


def _parts(fields: Mapping[str, str], salt: bytes) -> tuple[bytes, ...]:
    """What the hash covers, in order, as UTF-8 (PHP hashes the posted bytes)."""
    oid, status, total = (fields[name].encode("utf-8") for name in SIGNED_FIELDS)
    return (fields.get(LINK_FIELD, "").encode("utf-8"), oid, salt, status, total)


def hash_of(fields: Mapping[str, str], pair: KeyPair) -> bytes:
    """The raw HMAC-SHA256 PayTR sends (base64) in `hash` for these fields."""
    key, salt = pair
    return key.digest(*_parts(fields, salt))


class PayTRScheme(NoHeaders):
    """PayTR's form-borne HMAC-SHA256 (see the module's docstring)."""

    name = "paytr"

    def verify(self, params: SchemeParams, headers: Headers, body: bytes, now_s: float) -> None:
        """Verify the form's `hash` (no header, no timestamp)."""
        self.verifier(params)(headers, body, now_s)

    def verifier(self, params: SchemeParams) -> Verifier:
        """`verify` for one merchant: its pairs' HMAC keys prepared once. The checks, in
        the order of `core.signatures`: the form and its four fields are there
        (`SignatureMalformed` for a body that is no form, `SignatureMissing` for an
        absent or empty field), `hash` is base64 of 32 bytes (`SignatureMalformed`),
        then some pair produces it (`SignatureMismatch`)."""
        pairs = key_pairs(params.secrets)

        def verify(headers: Headers, body: bytes, now_s: float) -> None:
            try:
                fields = form_fields(body)
            except FormInvalid as exc:
                raise SignatureMalformed(str(exc)) from None
            missing = [n for n in (HASH_FIELD, *SIGNED_FIELDS) if not fields.get(n)]
            if missing:
                raise SignatureMissing(f"the form has no {', '.join(missing)}")
            # Decoded as PHP's `$_POST` decodes it for PayTR's sample: base64's `+`
            # comes as `%2B`; a bare `+` would read as a blank, which is malformed.
            offered = decode_signature(fields[HASH_FIELD], Encoding.BASE64)
            found = False
            for pair in pairs:  # no early exit: see the module's docstring
                found |= hmac.compare_digest(hash_of(fields, pair), offered)
            if not found:
                raise SignatureMismatch("no configured key and salt produce the form's hash")

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
        """Only the form's content type: PayTR signs inside the form, which
        `signed_form` builds. ValueError if the first secret is not a key and salt."""
        key_pairs((signing_secret(params),))
        return {"Content-Type": _FORM}

    def new_event_id(self, uuid_text: str) -> str:
        """An order number as PayTR takes one (letters and digits, at most 64): the
        UUID's hex. The id itself is the form's, never sent apart from it."""
        return uuid_text.replace("-", "")

    def id_ref(self, params: SchemeParams) -> FieldRef:
        """The order number and its outcome, `merchant_oid:status`."""
        return _ID_REF

    def type_ref(self, params: SchemeParams) -> FieldRef:
        """The outcome, `success` or `failed`."""
        return _TYPE_REF

    def authenticates_id(self, params: SchemeParams) -> bool:
        """Yes: both fields of the id are hashed."""
        return True

    def replay_digest(self, params: SchemeParams, headers: Headers, body: bytes) -> bytes | None:
        """None: the signature vouches for the id, so a replay is a duplicate by it."""
        return None


SCHEME = PayTRScheme()


def signed_form(fields: Mapping[str, str], secret: str) -> bytes:
    """The form PayTR posts for `fields`, with `hash` computed with `secret`
    (`MERCHANT_KEY:MERCHANT_SALT`) in place of any `hash` they hold; the other fields
    in their order. ValueError when a signed field is absent or empty, or the secret is
    not a pair."""
    missing = [name for name in SIGNED_FIELDS if not fields.get(name)]
    if missing:
        raise ValueError(f"a PayTR callback needs {', '.join(missing)} to be signed")
    (pair,) = key_pairs((secret,))
    signed = {name: value for name, value in fields.items() if name != HASH_FIELD}
    signed[HASH_FIELD] = encode_signature(hash_of(fields, pair), Encoding.BASE64)
    return urlencode(signed).encode("ascii")
