"""iyzico's webhooks: the `iyzico` provider. Pure. How a request is verified:
`core.signatures.iyzico`; what is fetched and what the answer confirms:
`iyzico.answer`.

A webhook is a JSON object, one a request, in one of three formats (direct API
payments, the hosted checkout form and Pay with iyzico, subscriptions), signed by
`X-IYZ-SIGNATURE-V3`. Its id is `iyziReferenceCode` ("A unique reference code for the
notification"), its type `iyziEventType` (`API_AUTH`, `THREE_DS_AUTH`,
`CHECKOUT_FORM_AUTH`, `subscription.order.success`, ...), its order key the payment
(docs.iyzico.com/en/advanced/webhook). iyzico wants any 2xx; it sends the first
notification 10 to 15 seconds after the payment and retries every 15 minutes, 3 times.

It carries no amount. With an API key (`api_key_env`, the merchant's apiKey; the
secretKey is the provider's secret) a payment's webhook waits for the confirm stage,
which fetches the payment and records what its signed answer confirms as events of
their own (`iyzico.answer`); those settle here (`instruction`):

- `payment.paid`: the capture of the payment's `paidPrice`, keyed by the payment;
- `payment.authorized`: the authorisation (pre-auth) of its `paidPrice`, keyed by the
  payment; the capture of a post-auth takes it.

Amounts are decimals of the currency's major unit (`1.1`, `0.33000000`), read exactly
with the ISO 4217 decimals (TRY, USD, EUR, GBP: two): more decimals than the currency
has is refused, never rounded. The merchant is the webhook's `merchantId`, iyzico's id
of the account, carried into the confirmed events; it is not among the fields a
payment's webhook signs, so set `[providers.NAME] merchant_id` (the account's merchant,
whatever a webhook names), `iyzico_merchant_id` (which refuses a webhook naming another
account), or point `merchant` at `/basket_id` or `/conversation_id`, which the answer's
signature does cover.

A subscription's webhook names no payment: it is published as it came and moves
nothing, and so is every webhook without an API key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.core.bodies.fields import get_currency, get_decimal_amount, get_str, optional_str
from gateway.core.ordering.keys import parse_rules
from gateway.core.providers.base import Confirmation, Movements, Provider
from gateway.core.providers.iyzico.answer import (
    AUTHORIZED,
    PAID,
    auth,
    awaits,
    confirmer,
    detail_request,
    kept_answer,
    locate,
    unkeyed,
)
from gateway.core.settlement.instructions import SettlementInstruction, SettlementKind
from gateway.core.signatures.iyzico import SCHEME
from gateway.errors import PayloadInvalid

_K = SettlementKind
#: A confirmed event's movement, by its type.
KINDS: Mapping[str, SettlementKind] = {PAID: _K.CAPTURE, AUTHORIZED: _K.AUTHORISATION}


def instruction(event_type: str, doc: Any) -> SettlementInstruction | None:
    """A confirmed iyzico event's instruction, or None when its type moves no money (a
    webhook published as it came: its type is iyzico's, never one of `KINDS`)."""
    kind = KINDS.get(event_type)
    if kind is None:
        return None
    if not isinstance(doc, Mapping):
        raise PayloadInvalid("an iyzico event's body is not an object")
    payment = get_str(doc, "payment_id")
    currency = get_currency(doc, "currency")
    return SettlementInstruction(
        settlement_id=payment,
        kind=kind,
        merchant_id=optional_str(doc, "merchant_id"),
        amount_minor=get_decimal_amount(doc, "amount", currency),
        currency=currency,
        # An authorisation is keyed by its payment; a capture has no id of its own.
        refund_id=payment if kind is _K.AUTHORISATION else None,
        source_event_id=optional_str(doc, "event_id"),
    )


IYZICO = Provider(
    name="iyzico",
    title="iyzico",
    scheme=SCHEME,
    movements=Movements(
        instruction, {t: (k,) for t, k in KINDS.items()}, parse_rules(("/merchant_id",))
    ),
    # A webhook names its payment as `paymentId` (direct) or `iyziPaymentId` (HPP), a
    # confirmed event as `payment_id`; a subscription's events, by the subscription.
    order_keys=parse_rules(
        ("/payment_id", "/paymentId", "/iyziPaymentId", "/subscriptionReferenceCode")
    ),
    # The fetch is `POST /payment/detail`, its body signed per request with a fresh
    # random key (`detail_request`); the answer is read by `confirmer(secrets)`, which
    # checks its own signature with the provider's secretKeys (`unkeyed`, never used,
    # confirms nothing without them).
    confirmation=Confirmation(
        locate,
        unkeyed,
        auth,
        awaits=awaits,
        optional=True,
        request=detail_request,
        keyed=confirmer,
        kept=kept_answer,
    ),
    cross_check="the worked V3 examples of iyzipay-php `samples/"
    "webhook_Signature_Validation.php`; `iyzipay.IyzipayResource.generate_v2_hash` and "
    "`calculate_hmac_sha256_signature` (iyzipay 1.0.46) for the API's Authorization and "
    "its answers' signature",
    backfill="",
)
