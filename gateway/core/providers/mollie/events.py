"""Mollie's next-gen webhooks, signed: the `mollie_events` provider. Pure. The signature:
`core.signatures.mollie.events`.

Beside the classic `mollie` provider (an unsigned `id=tr_…` form, confirmed by a fetch),
Mollie's next-gen webhooks (docs.mollie.com/guides/webhooks) post a signed JSON event,
one a request:

    {"resource": "event", "id": "event_GvJ8WHrp5isUdRub9CJyH",
     "type": "payment-link.paid", "entityId": "pl_qng5gbbv8NAZ5gpM5ZYgx",
     "createdAt": "2024-12-16T15:57:04.0Z", "_embedded": {…}, "_links": {…}}

`_embedded` holds the entity itself (a "full" payload; `_embedded.entity` in
mollie-api-py's `EntityWebhookEvent`, under its resource's name in mollie-api-php's
`tests/Fixtures/Webhooks/payloads/payment-link-paid.full.json`); a "simple" payload has
none. The event id is the body's `id`, its type the body's `type`, and a
webhook's events are ordered by the entity they are about (`entityId`).

The types: mollie-api-php `src/Webhooks/WebhookEventType.php` lists
`payment-link.paid`, `balance-transaction.created`, `sales-invoice.created`,
`.issued`, `.canceled`, `.paid` and `profile.created`, `.verified`, `.blocked`,
`.deleted`; its event classes (`src/Webhooks/Events/`) add `payout.*`, `dispute.*`,
`business-account-transfer.*`, `connect-balance-transfer.*`,
`unmatched-credit-transfer.*` and `file.*`, and mollie-api-py's
`EntityWebhookEventWebhookEventTypes` lists `payment.*`, `refund.*`, `chargeback.*` and
`capture.*` too. Every one is recorded, published and forwarded as it came.

**None of them settles** (`movements` is None). A payment's money, its refunds and its
chargebacks already settle through the classic `mollie` provider's confirm stage, from
what Mollie's API answers about the payment (`tr_…`); a paid payment link is paid by
such a payment, so settling `payment-link.paid` (or a next-gen `payment.paid`) here as
well would move that money twice. Balance transactions, payouts and invoices are not a
merchant's payments at all.
"""

from __future__ import annotations

from gateway.core.ordering.keys import parse_rules
from gateway.core.providers.base import Provider
from gateway.core.signatures.mollie.events import SCHEME

MOLLIE_EVENTS = Provider(
    name="mollie_events",
    title="Mollie (next-gen webhooks)",
    scheme=SCHEME,
    # No movements: see the module's docstring (the classic `mollie` provider settles).
    order_keys=parse_rules(("/entityId",)),
    cross_check="`mollie.utils.webhooks.SignatureValidator` (mollie-api-py) and the "
    "inputs of mollie-api-php's `SignatureValidatorTest`",
)
