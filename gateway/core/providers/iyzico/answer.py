"""iyzico's payment fetched to confirm a webhook: the request (`request_body`,
`request_headers`) and its answer read into the events it confirms (`confirmed`). Pure.

A webhook names a payment (`paymentId`, or `iyziPaymentId` for the checkout form) and
carries no amount, so the confirm stage asks `POST /payment/detail` (the libraries'
"retrieve payment": iyzipay-python `Payment.retrieve`, iyzipay-java `Payment.retrieve`)
with `{"locale":"en","conversationId":...,"paymentId":"..."}`, signed per request with
the `IYZWSv2` Authorization (`core.signatures.iyzico.authorization`). Its answer is the
payment (docs.iyzico.com/en/advanced/retrieve-payment; the shape of iyzipay-php's
`tests/Iyzipay/Tests/mock/create-payment.json`), and it is believed only once its own
`signature` checks out with one of the provider's secretKeys.

What the answer confirms, each under an id of its own, so that every later answer about
the payment names the same ids and the gate makes them duplicates:

- `paymentStatus` `SUCCESS`, `fraudStatus` 1 (approved), `phase` `AUTH` (a sale):
  `{paymentId}:paid`, `payment.paid`, the capture of `paidPrice`;
- the same in `phase` `PRE_AUTH`: `{paymentId}:authorized`, `payment.authorized`, the
  authorisation of `paidPrice`; in `POST_AUTH` (captured since): both.

Nothing else moves money yet: a failed payment, a 3DS one still waiting
(`INIT_THREEDS`, `CALLBACK_THREEDS`, ...), and one whose fraud check is pending (0,
iyzico notifies again once decided) or declined (-1) confirm nothing. A phase or a fraud
status iyzico adds later is refused (parked), not guessed at.

Why `paidPrice`: it is what the card was charged ("Final amount (including installment
fee) that will be charged to customer's card. Merchants should store this value",
retrieve-payment docs), and what refunds are measured against. `price` is the basket's
total before the instalment surcharge or a discount (`merchantCommissionRateAmount` is
`paidPrice - price`, "informational"); the surcharge is the merchant's, charged to
cover iyzico's instalment commission, which like every processing fee is iyzico's to
deduct at payout, not a movement here. `price` is kept in the body (`basket_price`).

Refunds and cancels are not in this answer: neither the API's payment (iyzipay-java
`PaymentResource`, `PaymentItem`) nor its items list them. Only the reporting API
(`GET /v2/reporting/payment/details`: `payments[].cancels[]`,
`itemTransactions[].refunds[]`, iyzipay-java `PaymentDetail`, `PaymentTxDetail`) does,
unsigned; and iyzico sends no webhook for a refund it was asked for.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson

from gateway.core.bodies.fields import get_currency, get_decimal_amount
from gateway.core.providers.base import ApiCredentials, ApiRequest, Confirmed
from gateway.core.signatures.iyzico import (
    authorization,
    check_answer_signature,
    price_text,
    signed_fields,
)
from gateway.errors import ConfirmationMismatch, PayloadInvalid, SignatureMalformed

#: Where a payment is fetched from, by `POST` (`Confirmation.locate`'s path).
DETAIL_PATH = "/payment/detail"
#: iyzico's payment ids are decimal numbers (`22484059`); a JSON number or its digits.
PAYMENT_ID = re.compile(r"[0-9]{1,20}", re.ASCII)
#: The language of iyzico's error messages in an answer: the operators'.
LOCALE = "en"
#: The confirmed events, by the phase of a payment approved and paid.
PAID, AUTHORIZED = "payment.paid", "payment.authorized"
PHASES: Mapping[str, tuple[str, ...]] = {
    "AUTH": (PAID,),
    "PRE_AUTH": (AUTHORIZED,),
    "POST_AUTH": (AUTHORIZED, PAID),
}
_SUFFIXES = {PAID: "paid", AUTHORIZED: "authorized"}
#: `fraudStatus`: 1 approved, 0 under review, -1 declined (retrieve-payment docs).
APPROVED, FRAUD_STATUSES = 1, frozenset({-1, 0, 1})
#: The longest text carried from an answer or a webhook into a confirmed event.
_TEXT_MAX = 255


def payment_id_of(doc: Any) -> str:
    """The payment a webhook names: `paymentId` (direct) or `iyziPaymentId` (HPP);
    `PayloadInvalid` for a subscription's, which names none, or anything not an id."""
    try:
        found = signed_fields(doc)[0]
    except SignatureMalformed as exc:
        raise PayloadInvalid(f"not an iyzico webhook: {exc}") from None
    key = {"direct": "paymentId", "hpp": "iyziPaymentId"}.get(found.value)
    value = doc.get(key) if key is not None else None
    text = str(value) if type(value) is int or isinstance(value, str) else ""
    if not PAYMENT_ID.fullmatch(text):
        raise PayloadInvalid(f"a {found.value} webhook names no iyzico payment id to fetch")
    return text


def awaits(event_type: str) -> bool:
    """Whether a webhook of `event_type` waits for its payment's fetch: every payment
    webhook does (its status is in the body, and the answer says what moved); a
    subscription's (`subscription.order.success`, ...) names no payment."""
    return not event_type.startswith("subscription.")


def locate(doc: Any) -> str:
    """The path fetched for a webhook: `DETAIL_PATH`, once it names a payment. The
    request is a `POST` of `request_body(doc)`, with `request_headers`."""
    payment_id_of(doc)
    return DETAIL_PATH


def request_body(doc: Any) -> bytes:
    """The JSON a payment's fetch posts: the payment id, and the webhook's
    `paymentConversationId` as the request's `conversationId` (iyzico echoes it), so a
    retried fetch posts the same bytes. These are the bytes signed: send them as they are."""
    payment_id = payment_id_of(doc)
    query: dict[str, str] = {"locale": LOCALE}
    conversation = doc.get("paymentConversationId")
    if isinstance(conversation, str) and 0 < len(conversation) <= _TEXT_MAX:
        query["conversationId"] = conversation
    query["paymentId"] = payment_id
    return orjson.dumps(query)


def auth(key: str) -> Mapping[str, str]:
    """What every request carries whatever its body: iyzico's Authorization signs the
    body with a fresh random key, so it is made per request (`request_headers`)."""
    return {"Accept": "application/json"}


def detail_request(doc: Any, credentials: ApiCredentials) -> ApiRequest:
    """The payment's fetch: `POST DETAIL_PATH` of `request_body(doc)`, signed with the
    API key, the first secretKey and the request's fresh nonce (`request_headers`)."""
    if not credentials.secrets:
        raise PayloadInvalid("an iyzico fetch is signed with its secretKey: none configured")
    body = request_body(doc)
    headers = request_headers(credentials.key, credentials.secrets[0], credentials.nonce, body)
    return ApiRequest("POST", DETAIL_PATH, body, headers)


def request_headers(api_key: str, secret_key: str, random_key: str, body: bytes) -> dict[str, str]:
    """The headers of one fetch of `body` (`request_body`): the `IYZWSv2` Authorization
    and `x-iyzi-rnd` for `random_key` (fresh per request), and its content type."""
    headers = authorization(api_key, secret_key, random_key, DETAIL_PATH, body)
    return {**headers, "Content-Type": "application/json", "Accept": "application/json"}


def confirmed(doc: Any, answer: Any, secrets: Sequence[str]) -> tuple[Confirmed, ...]:
    """The events of the payment `doc` names that `answer` (iyzico's, parsed) confirms,
    in the order they happened; none while it has moved nothing. `ConfirmationMismatch`
    for an answer about another payment or signed with none of `secrets`,
    `PayloadInvalid` for a failure answer or one that cannot be read exactly."""
    wanted = payment_id_of(doc)
    if not isinstance(answer, Mapping):
        raise PayloadInvalid("iyzico's answer is not a JSON object")
    if answer.get("status") != "success":
        code, message = (str(answer.get(k))[:80] for k in ("errorCode", "errorMessage"))
        raise PayloadInvalid(f"iyzico answered failure: errorCode {code}: {message}")
    found = answer.get("paymentId")
    if str(found) != wanted or not (type(found) is int or isinstance(found, str)):
        raise ConfirmationMismatch(f"asked for payment {wanted}, iyzico answered {found!r:.80}")
    try:
        check_answer_signature(secrets, answer)
    except ValueError as exc:
        raise PayloadInvalid(f"iyzico's payment {wanted}: {exc}") from None
    if answer.get("paymentStatus") != "SUCCESS" or _fraud_status(answer) != APPROVED:
        return ()
    phase = answer.get("phase")
    kinds = PHASES.get(phase) if isinstance(phase, str) else None
    if kinds is None:
        raise PayloadInvalid(f"iyzico's payment {wanted} is in phase {phase!r:.40}")
    try:
        amount, basket = price_text(answer.get("paidPrice")), price_text(answer.get("price"))
    except ValueError as exc:
        raise PayloadInvalid(f"iyzico's payment {wanted}: {exc}") from None
    currency = get_currency(answer, "currency")
    get_decimal_amount({"paidPrice": amount}, "paidPrice", currency)  # exact, or refused
    body = {"payment_id": wanted, "amount": amount, "currency": currency,
            "basket_price": basket, "installment": _installment(answer),
            "basket_id": _optional_text(answer, "basketId"),
            "conversation_id": _optional_text(answer, "conversationId"),
            "merchant_id": _optional_text(doc, "merchantId"), "phase": phase}  # fmt: skip
    items = []
    for event_type in kinds:
        event_id = f"{wanted}:{_SUFFIXES[event_type]}"
        shown = {"event_id": event_id, "event_type": event_type, **body}
        items.append(Confirmed(event_id, event_type, orjson.dumps(shown)))
    return tuple(items)


def confirmer(secrets: Sequence[str]) -> Callable[[Any, Any], tuple[Confirmed, ...]]:
    """`confirmed` with the provider's secretKeys (`SchemeParams.secrets`) bound: what
    its `Confirmation.confirmed` is once the confirm stage knows them."""
    bound = tuple(secrets)

    def confirm(doc: Any, answer: Any) -> tuple[Confirmed, ...]:
        return confirmed(doc, answer, bound)

    return confirm


def unkeyed(doc: Any, answer: Any) -> tuple[Confirmed, ...]:
    """The registry's `Confirmation.confirmed`: an answer is only read with the keys that
    check its signature (`confirmer`), so one read without them confirms nothing."""
    raise PayloadInvalid("an iyzico answer is read with its secretKeys: confirmer(secrets)")


def _fraud_status(answer: Mapping[str, Any]) -> int:
    found = answer.get("fraudStatus")
    if type(found) is not int or found not in FRAUD_STATUSES:
        raise PayloadInvalid(f"iyzico's fraudStatus {found!r:.20} is none of -1, 0, 1")
    return found


def _installment(answer: Mapping[str, Any]) -> int | None:
    found = answer.get("installment")
    return found if type(found) is int and 0 < found < 100 else None


def _optional_text(obj: Mapping[str, Any], key: str) -> str | None:
    """A short string or integer as text (iyzico writes `merchantId` as a number), else None."""
    found = obj.get(key)
    if type(found) is int:
        found = str(found)
    return found if isinstance(found, str) and 0 < len(found) <= _TEXT_MAX else None


#: The card fields of a payment's detail: never kept beside the webhook.
_CARD_FIELDS = ("binNumber", "lastFourDigits", "cardToken", "cardUserKey")


def kept_answer(content: bytes) -> bytes:
    """A payment's detail as kept beside the webhook: without its card's BIN, last four
    digits and card tokens."""
    try:
        doc = orjson.loads(content)
    except orjson.JSONDecodeError:
        return content
    if isinstance(doc, dict):
        for name in _CARD_FIELDS:
            doc.pop(name, None)
    return orjson.dumps(doc)
