"""Mollie's classic webhooks: no signature at all. Pure.

A classic webhook is a form POST whose whole body is `id=tr_…` (docs.mollie.com/overview/
webhooks: "a single POST-parameter called id"); Mollie signs nothing and sends nothing
else worth keeping. `verify` accepts every request, and no header is required.

Why an unsigned request is safe here: it is never published. It only names an object,
and the gateway believes nothing it says beyond that name. The request is recorded and
answered; then the confirm stage (`gateway confirm`) fetches the payment from Mollie's
API over TLS, on a host of `[providers.NAME] api_hosts`, with the account's API key,
and publishes only the changes Mollie's answer holds
(`core.providers.mollie.answer.confirmed`). A forged id fetches nothing (the API answers
404 for a payment the account does not have, which the confirm stage counts and drops);
a genuine id sent by someone else only makes the gateway ask Mollie sooner, and what
Mollie answers is the same either way. A flood of forged ids costs fetches, paced by
`[confirm] rate_per_s`, never money. As Mollie's guide puts it, "fake calls to your
webhook will never result in orders being processed without being actually paid".

The request's document (`core.providers.mollie.document`) is `{"id": "tr_…", "type":
"payment.webhook"}`: its event id is the payment's id, so a repeat of the webhook is a
duplicate at the gate (it asks for another fetch, which is how a payment's later
changes are found).
"""

from __future__ import annotations

from gateway.core.signatures.base import (
    FieldRef,
    Headers,
    NoHeaders,
    SchemeParams,
    Verifier,
    sha256_of,
)

#: The document's fields (`core.providers.mollie.document`).
_ID_REF = FieldRef("json", "id")
_TYPE_REF = FieldRef("json", "type")
#: Mollie's ids: a prefix and an opaque alphanumeric token (`tr_7UhSN1zuXS`).
PAYMENT_PREFIX = "tr_"
#: How many characters of the UUID a stand-in payment id takes (`tr_` + 10, the length
#: of the ids in Mollie's own examples).
_NEW_ID_CHARS = 10


def _accept(headers: Headers, body: bytes, now_s: float) -> None:
    """Nothing to check: see the module's docstring."""


class MollieScheme(NoHeaders):
    """Mollie's classic webhook: unsigned, a form naming a payment (see the module's
    docstring for why that is safe)."""

    name = "mollie"

    def verify(self, params: SchemeParams, headers: Headers, body: bytes, now_s: float) -> None:
        """Accept: Mollie signs nothing, and the request is never published."""

    def verifier(self, params: SchemeParams) -> Verifier:
        """`verify`: nothing to prepare."""
        return _accept

    def sign(
        self,
        params: SchemeParams,
        body: bytes,
        now_s: int,
        *,
        event_id: str | None = None,
        event_type: str | None = None,
    ) -> dict[str, str]:
        """Only the form's content type, as Mollie sends it: there is nothing to sign,
        and the payment id is the body's (`id=tr_…`)."""
        return {"Content-Type": "application/x-www-form-urlencoded"}

    def new_event_id(self, uuid_text: str) -> str:
        """A payment id shaped like Mollie's: `tr_` and ten alphanumerics of the UUID."""
        return PAYMENT_PREFIX + uuid_text.replace("-", "")[:_NEW_ID_CHARS]

    def id_ref(self, params: SchemeParams) -> FieldRef:
        """The payment id the form names."""
        return _ID_REF

    def type_ref(self, params: SchemeParams) -> FieldRef:
        """The document's fixed `payment.webhook`."""
        return _TYPE_REF

    def authenticates_id(self, params: SchemeParams) -> bool:
        """False: nothing is signed. What makes that safe is not the gate but the fetch
        (see the module's docstring): the request itself is never published."""
        return False

    def replay_digest(self, params: SchemeParams, headers: Headers, body: bytes) -> bytes | None:
        """SHA-256 of the body, all there is. A replay is the same `id=tr_…`, so it is a
        duplicate by its id as well."""
        return sha256_of(body)


SCHEME = MollieScheme()
