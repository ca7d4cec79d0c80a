"""Braintree's webhooks, verified: a form of `bt_signature` and `bt_payload`, where
`bt_payload` is base64 of the notification's XML and `bt_signature` is one or more
`public_key|hex(HMAC-SHA1(SHA1(private_key), bt_payload))` pairs joined with `&`.

Pure. Built as the `braintree` library verifies (`WebhookNotificationGateway.parse`,
`util/crypto.py`, 4.x): the pair whose public key is the merchant's is checked, over
the payload as sent and again with a newline appended (the library's allowance for the
final newline of base64 text lost on the way); nothing time-bound is signed. A secret
here is the API key pair `PUBLIC_KEY:PRIVATE_KEY`, as the Control Panel shows them:
several pairs are a rotation, each checked against the signature offered for its own
public key.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Iterable
from urllib.parse import urlencode

from gateway.core.bodies.forms import FormInvalid, form_fields
from gateway.core.signatures.base import (
    FieldRef,
    Headers,
    NoHeaders,
    ParamProblem,
    SchemeParams,
    Verifier,
    signing_secret,
)
from gateway.errors import SignatureMalformed, SignatureMismatch, SignatureMissing

#: The document's fields (`core.providers.braintree.payload`): the derived id, the kind.
_ID_REF = FieldRef("json", "event_id")
_TYPE_REF = FieldRef("json", "kind")
#: An HMAC-SHA1 in hex.
_SHA1_HEX_CHARS = 40
#: More pairs than Braintree sends (one per API key of the merchant).
PAIRS_MAX = 16


def key_pairs(secrets: Iterable[str]) -> tuple[tuple[str, bytes], ...]:
    """Each `PUBLIC_KEY:PRIVATE_KEY` secret as (public key, HMAC key): the HMAC key is
    the SHA-1 of the private key, as the library keys it. `ParamProblem` naming
    `secrets` for a secret that is not such a pair."""
    pairs = []
    for secret in secrets:
        public, sep, private = secret.partition(":")
        if not sep or not public.strip() or not private.strip() or "|" in public:
            raise ParamProblem("secrets", "a braintree secret is 'PUBLIC_KEY:PRIVATE_KEY'")
        # SHA-1 is Braintree's choice, not ours: its HMAC key is the private key's SHA-1.
        key = hashlib.sha1(private.strip().encode("utf-8")).digest()  # noqa: S324
        pairs.append((public.strip(), key))
    return tuple(pairs)


def signature_of(hmac_key: bytes, payload: bytes) -> str:
    """The hex HMAC-SHA1 Braintree sends for `payload` under one key."""
    return hmac.new(hmac_key, payload, hashlib.sha1).hexdigest()


def offered_pairs(signature: str) -> dict[str, list[str]]:
    """`bt_signature`'s signatures by public key; items without `|` are skipped, as the
    library skips them. `SignatureMalformed` for more than `PAIRS_MAX` items."""
    items = signature.split("&")
    if len(items) > PAIRS_MAX:
        raise SignatureMalformed(f"bt_signature has {len(items)} pairs (at most {PAIRS_MAX})")
    offered: dict[str, list[str]] = {}
    for item in items:
        public, sep, value = item.partition("|")
        if sep:
            offered.setdefault(public, []).append(value.strip().lower())
    return offered


class BraintreeScheme(NoHeaders):
    """Braintree's form-borne HMAC-SHA1 (see the module's docstring)."""

    name = "braintree"

    def verify(self, params: SchemeParams, headers: Headers, body: bytes, now_s: float) -> None:
        """Verify the form's signature (no header, no timestamp)."""
        self.verifier(params)(headers, body, now_s)

    def verifier(self, params: SchemeParams) -> Verifier:
        """`verify` for one merchant: its key pairs' HMAC keys derived once."""
        keys = key_pairs(params.secrets)

        def verify(headers: Headers, body: bytes, now_s: float) -> None:
            try:
                fields = form_fields(body)
            except FormInvalid as exc:
                raise SignatureMalformed(str(exc)) from None
            signature, payload = fields.get("bt_signature"), fields.get("bt_payload")
            if not signature or not payload:
                raise SignatureMissing("the form needs bt_signature and bt_payload")
            offered = offered_pairs(signature)
            raw = payload.encode("utf-8")
            found = False
            for public, hmac_key in keys:
                # Only hex of the right length can match (and `compare_digest` refuses
                # non-ASCII text): the others are skipped, which reveals no secret.
                candidates = [
                    c for c in offered.get(public, ()) if len(c) == _SHA1_HEX_CHARS and c.isascii()
                ]
                if not candidates:
                    continue
                # Two HMACs per key whatever the number of pairs offered for it: the
                # payload may be a whole body long.
                expected = (signature_of(hmac_key, raw), signature_of(hmac_key, raw + b"\n"))
                for candidate in candidates:
                    for one in expected:
                        found |= hmac.compare_digest(one, candidate)
            if not found:
                raise SignatureMismatch("no configured key pair matches bt_signature")

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
        """Only the form's content type: Braintree signs inside the form, which
        `signed_form` builds. ValueError if the first secret is not a key pair."""
        key_pairs((signing_secret(params),))
        return {"Content-Type": "application/x-www-form-urlencoded"}

    def new_event_id(self, uuid_text: str) -> str:
        """Braintree sends no id; the gateway derives one from the payload."""
        return uuid_text

    def id_ref(self, params: SchemeParams) -> FieldRef:
        """The id derived from the signed payload (`braintree.payload.derived_id`)."""
        return _ID_REF

    def type_ref(self, params: SchemeParams) -> FieldRef:
        """The notification's `kind`."""
        return _TYPE_REF

    def authenticates_id(self, params: SchemeParams) -> bool:
        """Yes: the id is made of the signed payload's fields."""
        return True

    def replay_digest(self, params: SchemeParams, headers: Headers, body: bytes) -> bytes | None:
        """None: the signature vouches for the id."""
        return None


def signed_form(xml: bytes, secret: str) -> bytes:
    """The form Braintree posts for the notification `xml`, signed with the key pair
    `secret` (`PUBLIC_KEY:PRIVATE_KEY`): the payload base64 with a newline every 76
    characters, as the library's `sample_notification` writes it."""
    ((public, hmac_key),) = key_pairs((secret,))
    payload = base64.encodebytes(xml)
    signature = f"{public}|{signature_of(hmac_key, payload)}"
    return urlencode({"bt_signature": signature, "bt_payload": payload.decode("ascii")}).encode()
