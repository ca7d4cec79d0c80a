"""PayTR (Turkey): its payment callbacks as events and money movements. Pure.

PayTR posts each payment's result to the Callback URL (Merchant Panel > SETTINGS) as a
form: `merchant_oid` (the order number the merchant chose, letters and digits, at most
64), `status` (`success` or `failed`), `total_amount` (an integer, the amount times 100:
34.56 is `3456`), `hash` (`core.signatures.paytr`), and outside the hash
`failed_reason_code`, `failed_reason_msg`, `test_mode`, `payment_type`, `currency` and
`payment_amount`. The form is read strictly (`document`): UTF-8, each field once, at
most `BODY_BYTES_MAX` bytes; other fields are kept as they came.

- The event id is `merchant_oid:status`, both signed. PayTR sends a result again every
  minute until it is answered `OK`, and "multiple notifications for the same payment
  transaction can be received": each repeat is the same order and outcome, so a
  duplicate. The status is part of the id because one order can have two outcomes:
  a `failed` result then a `success` one (a Havale/EFT transfer found after the page
  was reported failed, a customer paying on a second try). Keyed by the order alone,
  the later success would be a duplicate of the failure and its money never settled;
  keyed by both, each outcome is recorded once. The type is the status, the order key
  the order number.
- `success` is the capture of `total_amount`, keyed by the order. `total_amount` is
  "the total amount collected from the user" and "may be more than the payment_amount
  ... in cases such as installment payments": the instalment difference the customer
  paid is part of what PayTR collected for the order, and what PayTR keeps of it (its
  commission) is its own business, as every provider's fees are here. It is also the
  amount the hash covers; `payment_amount` is not signed, so it never moves money.
  A success whose `test_mode` is `1` ("in test mode or while running a test in live
  mode") moves nothing: PayTR never pays a test out, and a ledger crediting it would
  pay out money nobody paid.
- `failed` moves nothing (its `total_amount` is 0).
- The currency is `currency`: `TL` (or `TRY`, which step 1 accepts) is TRY, and so is a
  blank or absent one (step 1: "Boş ise TL kabul edilir", blank is taken as TL); any
  other is an ISO 4217 code. PayTR multiplies every amount by 100, which is the minor
  unit of the currencies it lists (TL, USD, EUR, GBP, RUB); an amount in a currency
  whose minor unit is not the hundredth is refused, never scaled by a guess.
- The merchant: a callback names none (a PayTR account is one store, and its key and
  salt are what verify it). So a success names its merchant only through
  `[providers.NAME] merchant_id` (the store's merchant) or `merchant`; without either,
  it is parked `MISSING_FIELD` (`merchant_id`), as any capture without a merchant is,
  and replayed once the setting names one. A
  payment link's callback carries `merchant_id`, PayTR's store number, which
  `merchant = ["/merchant_id"]` reads; it is outside the hash.
- Refunds: PayTR documents no refund notification. Its Refund API is a request the
  merchant makes and is answered at once in JSON; so a refund reaches the ledger as an
  internal service's `payment.refunded` naming the order (`settlement_id`) or an
  operator's `gateway ledger adjust`, never from here. PayTR's other callbacks (platform
  transfer results, returned payments) go to other URLs under other hashes, and are not
  read here.

Sources: dev.paytr.com/en/iframe-api/iframe-api-2-adim (the fields, the `OK` answer,
the sample code's hash), dev.paytr.com/en/direkt-api/direkt-api-2-adim (`total_amount`
0 on failure), dev.paytr.com/en/havale-eft-iframe-api/havale-eft-iframe-api-2-adim
(plain text `OK` and nothing else, a retry a minute later, repeats told apart by
`merchant_oid`), dev.paytr.com/iframe-api/iframe-api-1-adim (`currency`, the order
number's shape), dev.paytr.com/en/link-api/linkle-api-callback (`callback_id`,
`merchant_id`), dev.paytr.com/en/iade-api (the Refund API). [2nd] the same rule in
xerenahmed/paytr (`paytr.go`, `HandlePayment.Valid`) and in `paytr-python` 0.3.0
(`callback.parse_callback`, which also skips crediting a `test_mode` callback).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.core.bodies.fields import get_currency, get_digits_amount, get_str
from gateway.core.bodies.forms import FormInvalid, form_fields
from gateway.core.money import minor_exponent
from gateway.core.ordering.keys import parse_rules
from gateway.core.providers.base import Answer, Movements, Provider
from gateway.core.settlement.instructions import SettlementInstruction, SettlementKind
from gateway.core.signatures.base import SchemeParams, signing_secret
from gateway.core.signatures.paytr import SCHEME, signed_form
from gateway.errors import PayloadInvalid, ProviderAmountInvalid

_K = SettlementKind
#: The most bytes a callback may have: its fields are short (an order number of at most
#: 64 characters, a reason message of a sentence), so 4 KiB is many times one.
BODY_BYTES_MAX = 4_096
#: PayTR's amounts are hundredths of the currency ("multiplied by 100").
_PAYTR_DECIMALS = 2
#: The codes PayTR writes for the Turkish lira.
_LIRA = frozenset({"TL", "TRY"})

MOVEMENT_TYPES: Mapping[str, tuple[SettlementKind, ...]] = {"success": (_K.CAPTURE,)}


def document(body: bytes) -> dict[str, str]:
    """The callback's fields by name; `PayloadInvalid` for a body over
    `BODY_BYTES_MAX`, or one that is not UTF-8 form data of distinct fields (a field
    given twice is how a second value hides behind the one the hash covered)."""
    if len(body) > BODY_BYTES_MAX:
        raise PayloadInvalid(f"the form is {len(body)} bytes (at most {BODY_BYTES_MAX})")
    try:
        return form_fields(body)
    except FormInvalid as exc:
        raise PayloadInvalid(str(exc)) from None


def instruction(event_type: str, doc: Any) -> SettlementInstruction | None:
    """A PayTR callback's instruction, or None when it moves no money."""
    if event_type != "success":
        return None  # `failed` moved nothing, and PayTR has no other outcome
    if not isinstance(doc, Mapping):
        raise PayloadInvalid("a PayTR callback is not a form")
    if doc.get("test_mode") == "1":
        return None  # a test payment: see the module's docstring
    order = get_str(doc, "merchant_oid")
    currency = currency_of(doc)
    return SettlementInstruction(
        settlement_id=order,
        kind=_K.CAPTURE,
        merchant_id=None,  # the callback names none: `[providers.NAME] merchant_id`
        amount_minor=amount_of(doc, currency),
        currency=currency,
        refund_id=None,
        source_event_id=f"{order}:success",
    )


def currency_of(doc: Mapping[str, Any]) -> str:
    """The callback's currency as an ISO 4217 code: `TL`, `TRY`, blank or absent are
    TRY; another is read as a currency code (`FieldTypeInvalid` if it is none)."""
    written = doc.get("currency")
    if written is None or written == "" or written in _LIRA:
        return "TRY"
    return get_currency(doc, "currency")


def amount_of(doc: Mapping[str, Any], currency: str) -> int:
    """`total_amount`, a string of digits in hundredths, in ISO minor units of
    `currency`: the same number when its minor unit is the hundredth;
    `ProviderAmountInvalid` otherwise (JPY has none, KWD thousandths: PayTR lists
    neither, and a scale guessed wrong would settle 100 times the money). Exact:
    digits only, 1 to `core.money.AMOUNT_MAX` (`check_amount`), never rounded."""
    amount = get_digits_amount(doc, "total_amount")
    exponent = minor_exponent(currency)
    if exponent != _PAYTR_DECIMALS:
        raise ProviderAmountInvalid(
            f"total_amount is {amount} {currency}: PayTR writes amounts times 100, and "
            f"{currency} has {exponent} decimals, so it is not read"
        )
    return amount


def _sign_body(params: SchemeParams, body: bytes) -> bytes:
    """`gateway sign`'s body for PayTR: the callback's form (without `hash`, or with
    one to replace), signed with the first secret's key and salt."""
    try:
        fields = form_fields(body)
    except FormInvalid as exc:
        raise ValueError(f"the body is not a PayTR callback's form: {exc}") from None
    return signed_form(fields, signing_secret(params))


PAYTR = Provider(
    name="paytr",
    title="PayTR",
    scheme=SCHEME,
    movements=Movements(instruction, MOVEMENT_TYPES),
    order_keys=parse_rules(("/merchant_oid",)),
    # "The RESPONSE ... should be plain text OK": anything else, even a 200, is sent
    # again a minute later. A duplicate and a parked callback get it too, so PayTR
    # stops; the content type is the default plain text.
    answer=Answer(body=b"OK"),
    # A bad hash is answered 401, not `OK`: PayTR then retries every minute, which is
    # what a genuine callback refused for a wrong key or salt needs (it is recorded once
    # the setting is fixed), and a forgery gains nothing from it.
    refused_status=401,
    document=document,
    sign_body=_sign_body,
    cross_check="no official library: the hash is recomputed from the rule in PayTR's "
    "callback sample code (dev.paytr.com iFrame API step 2)",
)
