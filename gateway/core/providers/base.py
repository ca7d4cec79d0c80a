"""What a provider is: one value per provider (`Provider`), declared in its own module
of this package and named in the registry (`gateway.core.providers.PROVIDERS`).

Pure. Everything the gateway knows about a sender lives in its `Provider`: how a
request is verified and signed, where the id, type and order key are, how a body that
carries several events splits into them, what the sender must be answered, the
amounts' minor-unit exceptions, and which event types are which money movement.
The ingest path, the settlement worker, the console, backfill, forwarding,
`gateway sign` and the docs all read the same value.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from gateway.core.money import ProviderUnits
from gateway.core.ordering.keys import KeyRule
from gateway.core.settlement.instructions import SettlementInstruction, SettlementKind
from gateway.core.signatures.base import CertifiedVerifier, Headers, Scheme, SchemeParams

#: A mapping: (event type, parsed body) to its money movement, or None when the event
#: moves no money; raises the permanent errors of a body it cannot read.
Extract = Callable[[str, Any], "SettlementInstruction | None"]
#: A body that is not JSON (Braintree's form) read into the document its id, type,
#: order keys and movements are read from; raises `PayloadInvalid` for a body it
#: cannot read.
Decode = Callable[[bytes], Any]
#: A batch's splitter: the request body to one body per item, or `BatchTooLarge`.
Split = Callable[[bytes], "tuple[bytes, ...]"]
#: A scheme that signs inside the body (Adyen): (params, body) to the body signed with
#: `params.secrets[0]`.
SignBody = Callable[[SchemeParams, bytes], bytes]


@dataclass(frozen=True)
class Movements:
    """Which of a provider's events move money, and how (`core.settlement.instructions`)."""

    instruction: Extract
    #: Each event type that can move money and the movements it can be (for the docs,
    #: the console and `may_move_money`); a type listed may still move nothing for a
    #: given body (a failed authorisation, a refund still pending).
    types: Mapping[str, tuple[SettlementKind, ...]]
    #: Where its events name their merchant when `[providers.NAME] merchant` does not
    #: say (`core.ordering.keys` rules: first match wins).
    merchant: tuple[KeyRule, ...] = ()


@dataclass(frozen=True)
class Answer:
    """What an accepted request is answered besides its status: a provider that
    expects a particular body (Adyen's `[accepted]`) gets it; the others get the
    gateway's JSON outcome."""

    body: bytes | None = None  # None: `{"status": ..., "event_id": ...}`
    content_type: bytes = b"text/plain; charset=utf-8"


@dataclass(frozen=True)
class Batch:
    """A provider that sends several events in one request (`Provider.batch`)."""

    split: Split
    #: The most items one request may carry, and the most bytes one item may hold:
    #: a request over either is refused whole (413) before anything is recorded.
    items_max: int
    item_bytes_max: int
    #: The signature covers the whole request, not each item (GoCardless): it is
    #: checked once before the split, and a bad one refuses every item; else each item
    #: is verified on its own after it (Adyen).
    signed_whole: bool = False


@dataclass(frozen=True)
class CertificateSource:
    """A provider that signs with a certificate its requests point to (PayPal): the
    ingest path fetches and checks the certificate (an adapter, cached) before it
    verifies, so verifying stays pure."""

    #: (params, headers) to the certificate's URL; `SignatureError` unless it may be
    #: fetched (off the provider's hosts, not https).
    locate: Callable[[SchemeParams, Headers], str]
    #: (params) to the verification given the certificate.
    verifier: Callable[[SchemeParams], CertifiedVerifier]


@dataclass(frozen=True)
class Confirmed:
    """One event a confirmation found in the provider's answer: recorded through the
    idempotency gate under its own id (so a change already seen is a duplicate),
    published, settled and forwarded like any other event of the provider."""

    event_id: str
    event_type: str
    #: A JSON object: what settlement (`Movements.instruction`) and forwarding read.
    body: bytes


@dataclass(frozen=True)
class ApiRequest:
    """A fetch that is not a GET of a path (Zarinpal's verify: a POST of the order's
    amount; iyzico's payment detail, signed per request): what the confirm stage sends
    to the provider's API."""

    method: str
    path: str  # on the API's host, query included
    #: The request's JSON body, as sent (iyzico signs these very bytes); None: none.
    content: bytes | None = None
    #: Headers of this request besides the client's own (`Confirmation.auth`).
    headers: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True)
class ApiCredentials:
    """What a provider's request builder may sign with: its API key, its webhook
    secrets (iyzico signs its API requests with the secretKey that signs its webhooks),
    and a fresh random nonce per request (iyzico's random key). Never printed."""

    key: str = field(repr=False)
    secrets: tuple[str, ...] = field(repr=False)
    nonce: str = field(repr=False)


#: Reads a fetch's answer: (the recorded request's document, the answer parsed) to the
#: events it confirms (`Confirmation.confirmed`).
ReadAnswer = Callable[[Any, Any], "tuple[Confirmed, ...]"]


@dataclass(frozen=True)
class Confirmation:
    """A provider whose webhook only names an object (Mollie's classic `id=tr_…`): the
    gateway records the request, answers it, and then fetches the object from the
    provider's API (the `confirm` stage, `gateway confirm`); only what that answer
    holds is published. The request itself is never published."""

    #: (the recorded request's document) to the API path to GET, query included
    #: (`/v2/payments/tr_x?embed=refunds,chargebacks`); `PayloadInvalid` when it names
    #: nothing that may be fetched.
    locate: Callable[[Any], str]
    #: (the recorded request's document, the API's answer parsed) to the events the
    #: answer confirms, in the order they happened; `ConfirmationMismatch` when the
    #: answer is about another object, `PayloadInvalid` when it cannot be read.
    confirmed: ReadAnswer
    #: (API key) to the headers that carry it.
    auth: Callable[[str], Mapping[str, str]]
    #: (a webhook event's type) to whether its fetch is owed: an event of another type
    #: is published as it came (GoCardless's mandate events name no money). None: all.
    awaits: Callable[[str], bool] | None = None
    #: Whether a provider without an API key (`api_key_env`) takes its webhooks as they
    #: come, unconfirmed (GoCardless: published, never settled), rather than refusing
    #: the configuration (Mollie: a classic webhook says nothing by itself).
    optional: bool = False
    #: (the recorded request's document) to headers its fetch sends besides `auth`'s
    #: (Stripe's `Stripe-Context` for a connected account). None: none.
    headers: Callable[[Any], Mapping[str, str]] | None = None
    #: Whether the confirmed events keep their webhook's type (GoCardless:
    #: `payments.confirmed` either way), so `event_types` filters the webhooks too.
    keeps_types: bool = False
    #: (the recorded request's document, credentials) to the request a fetch makes,
    #: for an API that is not read by a GET of `locate`'s path (Zarinpal's verify is a
    #: POST carrying the merchant id and the amount). None: GET `locate(doc)`.
    request: Callable[[Any, ApiCredentials], ApiRequest] | None = None
    #: (the provider's webhook secrets) to the answer's reader, for a provider whose
    #: answers are signed with them (iyzico): used instead of `confirmed`. None: none.
    keyed: Callable[[tuple[str, ...]], ReadAnswer] | None = None
    #: Whether a refusal (a 4xx other than the transient and not-found ones) is read by
    #: `confirmed`, which names its class: Zarinpal says in the answer's body why it
    #: refuses a verify (an amount that is not the order's, a payment never paid).
    reads_refusals: bool = False
    #: Seconds after the webhook's arrival within which its fetch must succeed (Zarinpal
    #: reverses a payment not verified in time); after them the fetch is parked as
    #: `VERIFY_DEADLINE_PASSED` instead of tried again. None: no deadline.
    deadline_s: float | None = None
    #: (the recorded request's document, credentials) to the request asking the
    #: provider where a payment stands, and (its answer) to that status in words: what
    #: a fetch parked at its deadline says (Zarinpal's `inquiry`). None: nothing asked.
    inquiry: Callable[[Any, ApiCredentials], ApiRequest] | None = None
    inquiry_status: Callable[[Any], str] | None = None
    #: (the recorded request's document, credentials) to a request whose answer must
    #: vouch for the webhook before it is fetched, and (the document, that answer
    #: parsed) to whether it does: True, fetch; False, nothing to fetch (confirmed with
    #: nothing, no dead letter); `PayloadInvalid` (a `ConfirmationMismatch`), parked.
    #: Zarinpal's list of payments paid and not verified binds an unsigned Authority to
    #: the order the merchant signed. None: every webhook is fetched.
    vouch: Callable[[Any, ApiCredentials], ApiRequest] | None = None
    vouched: Callable[[Any, Any], bool] | None = None
    #: (an answer's bytes) to what of it is kept beside the webhook (`confirmations.
    #: answer`): a provider whose answers carry card data drops it. None: all of it.
    kept: Callable[[bytes], bytes] | None = None

    def owed(self, event_type: str | None) -> bool:
        """Whether a webhook event of `event_type` waits for its fetch."""
        return self.awaits is None or (event_type is not None and self.awaits(event_type))


@dataclass(frozen=True)
class Provider:
    """One sender's scheme and everything else the gateway knows about it."""

    #: The scheme's name, as `[providers.NAME] scheme` names it.
    name: str
    #: The provider as people write it ("Checkout.com"), for the docs and the console.
    title: str
    scheme: Scheme
    #: None: its events never settle (GitHub, Shopify, ...).
    movements: Movements | None = None
    #: The currencies whose integer amounts it writes unlike ISO 4217 (`core.money`).
    units: Mapping[str, ProviderUnits] = field(default_factory=lambda: MappingProxyType({}))
    #: Where its events' order keys are when `[providers.NAME] order_key` does not say.
    order_keys: tuple[KeyRule, ...] = ()
    answer: Answer = Answer()
    #: The status a request whose signature fails is answered with (missing, malformed
    #: or mismatched): 401, or the one the provider asks for (GoCardless: 498).
    refused_status: int = 401
    batch: Batch | None = None
    #: The API that lists its past events for `gateway backfill`, in words; "" none.
    backfill: str = ""
    #: What its verifier is held to in the tests: the official library's function, or
    #: the page whose published vectors the tests recompute.
    cross_check: str = ""
    #: `gateway forward --resign-as NAME` can sign deliveries as this provider does.
    resign: bool = False
    #: Where the signature lives in the body rather than a header (Adyen): how a body
    #: is signed, for `gateway sign` and the tests; None for header signatures.
    sign_body: SignBody | None = None
    #: How its body is read when it is not JSON (`Decode`); None: the body is JSON.
    document: Decode | None = None
    #: Where its signing certificate comes from, for a scheme whose `verifier` cannot
    #: verify alone (`CertificateSource`); None for the others.
    certificate: CertificateSource | None = None
    #: How its webhooks are confirmed by a fetch from its API (`Confirmation`); None:
    #: its webhooks carry the event itself.
    confirmation: Confirmation | None = None
    #: Its requests are a payer's browser coming back (`GET /callbacks/NAME`, the
    #: request's query as its body), answered with a redirect to `return_url`
    #: (Zarinpal); else webhooks POSTed to `/webhooks/NAME`.
    callback: bool = False
