"""GoCardless's webhooks: the `gocardless` provider. Pure. How a request is verified
and split into its events: `core.signatures.gocardless`.

A request carries several events (developer.gocardless.com/partners/
webhooks-for-partners: "A webhook can contain multiple events") signed together, and
is answered 498 ("Token Invalid", as GoCardless's guides ask) when its signature
fails. Each event is its own row under its own id (`EV…`), typed
`{resource_type}.{action}` (`payments.confirmed`), deduplicated, published and
forwarded like any other.

Its events carry no amount: a payment's, refund's or payout's event names its object
(`links.payment`, `PM…`) and says what happened to it; the amount and currency are on
the object, which only GoCardless's API returns. With an API key (`api_key_env`) the
events that move money wait for the confirm stage (`gateway confirm`), which fetches
the object and records the event again with its amount (`gocardless.answer`: ids,
types and body); those confirmed events settle here (`instruction`):

- `payments.confirmed` (collected from the customer's bank account): the capture of
  the payment's `amount`; the merchant is the payment's `metadata.merchant_id`;
- `payments.charged_back`: a chargeback of the payment's `amount`;
  `payments.chargeback_cancelled`: its reversal (both keyed by the payment: GoCardless
  has no chargeback object);
- `refunds.created`: a refund of the refund's `amount`, keyed by the refund;
  `refunds.failed` and `refunds.funds_returned` (the money came back): its reversal,
  once, whichever of the two arrives;
- `payouts.paid`: a payout of the payout's `amount`, keyed by the payout, for the
  merchant its `metadata.merchant_id` names.

Amounts are integers of minor units with ISO 4217 decimals (GoCardless's currencies
all have two). Every other event (mandates, subscriptions, a payment's other changes)
is published as it came, and moves nothing. Without an API key nothing waits and
nothing settles: the events are published as they came.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.core.bodies.fields import get_amount, get_currency, get_str, optional_str
from gateway.core.ordering.keys import parse_rules
from gateway.core.providers.base import Batch, Confirmation, Movements, Provider
from gateway.core.providers.gocardless.answer import auth, awaits, confirmed, locate
from gateway.core.settlement.instructions import SettlementInstruction, SettlementKind
from gateway.core.signatures.gocardless import SCHEME, split
from gateway.errors import PayloadInvalid

_K = SettlementKind

#: The most events one request may carry. GoCardless sends up to 250 [2nd: Hookdeck's
#: GoCardless guide]; a genuine request refused here would be retried and refused
#: until GoCardless gave up, so the bound is twice that. `[http] max_body_bytes`
#: bounds the request as well.
ITEMS_MAX = 500
#: The most bytes one event may hold as its own body: an event is under 2 KB (its
#: `metadata` at most 3 keys of 50 and values of 500 characters).
ITEM_BYTES_MAX = 65_536
#: What a request whose signature fails is answered ("498 Token Invalid").
REFUSED_STATUS = 498


#: A confirmed event's movement, by its type.
KINDS: Mapping[str, SettlementKind] = {
    "payments.confirmed": _K.CAPTURE,
    "payments.charged_back": _K.CHARGEBACK,
    "payments.chargeback_cancelled": _K.CHARGEBACK_REVERSAL,
    "refunds.created": _K.REFUND,
    "refunds.failed": _K.REFUND_REVERSAL,
    "refunds.funds_returned": _K.REFUND_REVERSAL,
    "payouts.paid": _K.PAYOUT,
}
#: A payment's chargeback and its reversal are keyed by the payment with this suffix.
_CHARGEBACK_SUFFIX = ":chargeback"


def _split(body: bytes) -> tuple[bytes, ...]:
    return split(body, ITEMS_MAX, ITEM_BYTES_MAX)


def instruction(event_type: str, doc: Any) -> SettlementInstruction | None:
    """A confirmed GoCardless event's instruction, or None when it moves no money: its
    type moves none, or it is a webhook event published as it came (no API key, so no
    fetch), which has no amount to move."""
    kind = KINDS.get(event_type)
    if kind is None or (isinstance(doc, Mapping) and "events" in doc):
        return None
    if not isinstance(doc, Mapping):
        raise PayloadInvalid("a GoCardless event's body is not an object")
    object_id = get_str(doc, "object_id")
    own_id: str | None
    if kind is _K.PAYOUT:
        settlement_id, own_id = object_id, object_id
    else:
        settlement_id = get_str(doc, "payment_id")
        own_id = {
            _K.CAPTURE: None,
            _K.CHARGEBACK: settlement_id + _CHARGEBACK_SUFFIX,
            _K.CHARGEBACK_REVERSAL: settlement_id + _CHARGEBACK_SUFFIX,
        }.get(kind, object_id)
    currency = get_currency(doc, "currency")
    return SettlementInstruction(
        settlement_id=settlement_id,
        kind=kind,
        merchant_id=optional_str(doc.get("metadata"), "merchant_id"),
        amount_minor=get_amount(doc, "amount"),
        currency=currency,
        refund_id=own_id,
        source_event_id=optional_str(doc, "event_id"),
    )


GOCARDLESS = Provider(
    name="gocardless",
    title="GoCardless",
    scheme=SCHEME,
    movements=Movements(
        instruction, {t: (k,) for t, k in KINDS.items()}, parse_rules(("/metadata/merchant_id",))
    ),
    # A payment's events (confirmed, paid out, charged back, ...) name it: a confirmed
    # event as `payment_id`, one published as it came in its links.
    order_keys=parse_rules(("/payment_id", "/events/0/links/payment")),
    refused_status=REFUSED_STATUS,
    batch=Batch(_split, ITEMS_MAX, ITEM_BYTES_MAX, signed_whole=True),
    confirmation=Confirmation(
        locate, confirmed, auth, awaits=awaits, optional=True, keeps_types=True
    ),
    backfill="Events API (`GET /events`); its money events wait for their fetch",
    cross_check="`gocardless_pro.webhooks.parse` (gocardless-pro-python) and the "
    "published `webhook_body.json` fixture with its signature",
)
