"""GoCardless's webhooks: the `gocardless` provider. Pure. How a request is verified
and split into its events: `core.signatures.gocardless`.

A request carries several events (developer.gocardless.com/partners/
webhooks-for-partners: "A webhook can contain multiple events") signed together, and
is answered 498 ("Token Invalid", as GoCardless's guides ask) when its signature
fails. Each event is its own row under its own id (`EV…`), typed
`{resource_type}.{action}` (`payments.confirmed`), deduplicated, published and
forwarded like any other.

Its events are recorded and published but never settled: they carry no amount. A
payment's, refund's or payout's event names its object (`links.payment`, `PM…`) and
says what happened to it; the amount and currency are on the object, which only
GoCardless's API returns. So the provider declares no movements, and its events go to
the stream for whatever consumes them.
"""

from __future__ import annotations

from gateway.core.ordering.keys import parse_rules
from gateway.core.providers.base import Batch, Provider
from gateway.core.signatures.gocardless import SCHEME, split

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


def _split(body: bytes) -> tuple[bytes, ...]:
    return split(body, ITEMS_MAX, ITEM_BYTES_MAX)


GOCARDLESS = Provider(
    name="gocardless",
    title="GoCardless",
    scheme=SCHEME,
    # A payment's events (confirmed, paid out, charged back, ...) name it.
    order_keys=parse_rules(("/events/0/links/payment",)),
    refused_status=REFUSED_STATUS,
    batch=Batch(_split, ITEMS_MAX, ITEM_BYTES_MAX, signed_whole=True),
    cross_check="`gocardless_pro.webhooks.parse` (gocardless-pro-python) and the "
    "published `webhook_body.json` fixture with its signature",
)
