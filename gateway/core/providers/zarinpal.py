"""Zarinpal (Iran): a callback verified through its API, then settled in rials. Pure.

The flow (zarinpal.com/docs/paymentGateway/connectToGateway): the merchant asks
Zarinpal for a payment (`request`, with its amount and `callback_url`), sends the payer
to Zarinpal's page, and the payer's browser comes back to `callback_url` with
`?Authority=…&Status=OK|NOK`. Only the merchant's `verify` call (`POST
/pg/v4/payment/verify.json` with `merchant_id`, `amount`, `authority`) makes the payment
final: Zarinpal returns an unverified payment to the payer after a while (15 to 30
minutes), and `verify` refuses an amount that is not the payment's (`-50`).

Here (the callback's order is the merchant's, signed: `core.signatures.zarinpal`):
- `GET /callbacks/NAME` records the callback under its Authority and order
  (`AUTHORITY:order:ORDER`), so the same callback twice is a duplicate, and answers the
  browser with a redirect to the operator's `return_url`. The Authority is not signed:
  keyed with the order, a signed order sent with another payment's Authority cannot make
  that payment's own callback a duplicate. A `Status=NOK` callback is recorded as
  `AUTHORITY:order:ORDER:NOK` and published as it came: unauthenticated, it decides
  nothing (no verify, no money).
- Before a verify, Zarinpal's list of payments paid and not verified must hold the
  Authority with the callback's very order (`vouched`: the `callback_url` it keeps
  for the payment); not listed (never paid, forged, verified already), nothing more is
  asked; listed with another order, the callback is parked (`ConfirmationMismatch`).
- Then the confirm stage verifies (`verify_request`), within `VERIFY_DEADLINE_S` of the
  callback. Code 100 (verified now) and 101 (verified before) are both success; the
  payment is recorded as `AUTHORITY:verified`, type `payment.verified`, with the
  order's amount and Zarinpal's `ref_id`, and settles as a capture. `-50` (another
  amount) is parked as `VERIFY_AMOUNT_MISMATCH`, never verified; a payment not paid or
  not found (`-51` to `-55`) as `CONFIRMATION_NOT_FOUND`; any other code as
  `CONFIRMATION_MISMATCH`.
- Amounts are whole rials (`IRR`) or tomans (`IRT`, ten rials, not in ISO 4217): kept
  in the order's unit for `verify`, settled in rials (`core.money.held_as`).

No card data is kept: Zarinpal's `card_pan` and `card_hash` are left out of the event
and of the answer kept beside the callback (`kept_answer`).
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import orjson

from gateway.core.bodies.confirmed import confirmed_document
from gateway.core.bodies.fields import get_str, optional_str
from gateway.core.bodies.forms import FormInvalid, form_fields
from gateway.core.money import check_amount
from gateway.core.ordering.keys import parse_rules
from gateway.core.providers.base import (
    ApiCredentials,
    ApiRequest,
    Confirmation,
    Confirmed,
    Movements,
    Provider,
)
from gateway.core.settlement.instructions import SettlementInstruction, SettlementKind
from gateway.core.signatures.base import SchemeParams
from gateway.core.signatures.zarinpal import ORDER_FIELDS, SCHEME, SIGNATURE_FIELD, order_signature
from gateway.errors import (
    ConfirmationMismatch,
    ConfirmationNotFound,
    FieldTypeInvalid,
    PayloadInvalid,
    VerifyAmountMismatch,
)

OK_TYPE = "callback.ok"
NOK_TYPE = "callback.nok"
VERIFIED_TYPE = "payment.verified"
VERIFY_PATH = "/pg/v4/payment/verify.json"
UNVERIFIED_PATH = "/pg/v4/payment/unVerified.json"
INQUIRY_PATH = "/pg/v4/payment/inquiry.json"
#: Seconds after a callback within which its payment must be verified: Zarinpal
#: returns an unverified payment to the payer after 15 to 30 minutes, so a verify tried
#: later would fail anyway, and the money would be gone.
VERIFY_DEADLINE_S = 15 * 60
#: The most bytes a callback's query may have: eight short fields (the route refuses a
#: longer one before reading it: `ingest.callbacks.QUERY_BYTES_MAX`).
CALLBACK_BYTES_MAX = 2_048
CONFIRMED_BYTES_MAX = 4_096
#: Zarinpal's verify codes: verified now, verified before.
_VERIFIED = frozenset({100, 101})
_AMOUNT_MISMATCH = -50
#: Session not paid, not this merchant's, authority invalid, no such payment.
_NOT_PAID = frozenset({-51, -52, -53, -54, -55})
_CURRENCIES = frozenset({"IRR", "IRT"})
_AUTHORITY = re.compile(r"[A-Za-z0-9]{8,64}", re.ASCII)
#: An order id: no `:`, so the event ids built from it (`A:order:o_1:NOK`) read one way.
_ORDER = re.compile(r"[A-Za-z0-9_.-]{1,64}", re.ASCII)
_MERCHANT = re.compile(r"[A-Za-z0-9_.:-]{1,64}", re.ASCII)
_WHOLE = re.compile(r"[1-9][0-9]{0,17}", re.ASCII)
_JSON = {"Content-Type": "application/json"}
_CALLBACK_FIELDS = frozenset({*ORDER_FIELDS, SIGNATURE_FIELD, "Authority", "Status"})


def document(body: bytes) -> dict[str, Any]:
    """A `zarinpal` row's body read: a callback's query as `{"id", "type", "authority",
    "order", "amount", "currency", "merchant"}`, or a verified payment's JSON as it is.
    `PayloadInvalid` for anything else (a JSON body holding `id` or `type` is refused,
    so no request can take a verified payment's id)."""
    if body[:1] == b"{":
        return confirmed_document(body, CONFIRMED_BYTES_MAX, "Zarinpal")
    return _callback(body)


def _callback(body: bytes) -> dict[str, Any]:
    if len(body) > CALLBACK_BYTES_MAX:
        raise PayloadInvalid(f"the callback is {len(body)} bytes (at most {CALLBACK_BYTES_MAX})")
    try:
        fields = form_fields(body)
    except FormInvalid as exc:
        raise PayloadInvalid(str(exc)) from None
    unknown = sorted(set(fields) - _CALLBACK_FIELDS)
    if unknown:
        raise PayloadInvalid(f"the callback holds fields Zarinpal never sends: {unknown[:4]}")
    authority = fields.get("Authority", "")
    if not _AUTHORITY.fullmatch(authority):
        raise PayloadInvalid("the callback's Authority is not 8 to 64 letters or digits")
    status = fields.get("Status")
    if status not in ("OK", "NOK"):
        raise PayloadInvalid("the callback's Status is neither OK nor NOK")
    if not _ORDER.fullmatch(fields.get("order", "")):
        raise PayloadInvalid("the order's id is not 1 to 64 of [A-Za-z0-9_.-]")
    if not _MERCHANT.fullmatch(fields.get("merchant", "")):
        raise PayloadInvalid("the order's merchant is not 1 to 64 of [A-Za-z0-9_.:-]")
    if not _WHOLE.fullmatch(fields.get("amount", "")):
        raise PayloadInvalid("the order's amount is not a whole number of its currency")
    if fields.get("currency") not in _CURRENCIES:
        raise PayloadInvalid("the order's currency is neither IRR nor IRT")
    ok = status == "OK"
    # Keyed by the Authority and the order together: the Authority is not signed, so a
    # signed order sent with someone else's Authority must not make that payment's own
    # callback a duplicate (`vouched` then refuses the pairing).
    key = f"{authority}:order:{fields['order']}"
    return {
        "id": key if ok else f"{key}:NOK",
        "type": OK_TYPE if ok else NOK_TYPE,
        "authority": authority,
        "order": fields["order"],
        "amount": int(fields["amount"]),
        "currency": fields["currency"],
        "merchant": fields["merchant"],
        "sig": fields.get(SIGNATURE_FIELD, ""),
    }


def unverified_request(doc: Any, credentials: ApiCredentials) -> ApiRequest:
    """Zarinpal's list of payments paid and not verified (`unVerified.json`), asked
    before a callback's verify (`vouched`)."""
    return ApiRequest("POST", UNVERIFIED_PATH, orjson.dumps({"merchant_id": credentials.key}),
                      _JSON)  # fmt: skip


def vouched(doc: Any, answer: Any) -> bool:
    """Whether Zarinpal's list of payments paid and not verified holds the callback's
    Authority with the order it carries (the `callback_url` Zarinpal keeps for the
    payment: the order the merchant signed when it asked for it). Not listed: nothing
    to verify (never paid, a forged Authority, or verified already: a reload).
    `ConfirmationMismatch` when the Authority was paid for another order: a signed order
    sent with someone else's payment, which must not take it."""
    listed = {e.get("authority"): e for e in unverified_entries(answer) if isinstance(e, dict)}
    entry = listed.get(doc["authority"])
    if entry is None:
        return False
    url = entry.get("callback_url")
    query = urlsplit(url).query if isinstance(url, str) else ""
    try:
        registered = form_fields(query.encode())
    except FormInvalid:
        registered = {}
    wanted = {name: str(doc[name]) for name in ORDER_FIELDS}
    if {name: registered.get(name) for name in ORDER_FIELDS} != wanted or not hmac.compare_digest(
        registered.get(SIGNATURE_FIELD, ""), doc.get("sig", "")
    ):
        raise ConfirmationMismatch(
            f"Authority {doc['authority']} was paid for another order than {doc['order']}"
        )
    return True


def unverified_entries(answer: Any) -> list[Any]:
    """The `authorities` of an `unVerified.json` answer; `PayloadInvalid` for a refusal
    or another shape."""
    data = answer.get("data") if isinstance(answer, Mapping) else None
    if not isinstance(data, Mapping) or data.get("code") != 100:
        raise PayloadInvalid(
            f"Zarinpal refused its list of unverified payments: code {code_of(answer)!r}"
        )
    entries = data.get("authorities")
    if not isinstance(entries, list):
        raise PayloadInvalid("Zarinpal's list of unverified payments is not a list")
    return entries


def code_of(answer: Any) -> int | None:
    """A Zarinpal answer's code: a refusal's `errors.code`, else `data.code`; None."""
    for part in ("errors", "data"):
        found = answer.get(part) if isinstance(answer, Mapping) else None
        code = found.get("code") if isinstance(found, Mapping) else None
        if isinstance(code, int) and not isinstance(code, bool):
            return code
    return None


def kept_answer(content: bytes) -> bytes:
    """A verify answer as kept beside the callback: without Zarinpal's masked card
    number and card hash (a hash of the whole card number is card data too)."""
    try:
        doc = orjson.loads(content)
    except orjson.JSONDecodeError:
        return content
    data = doc.get("data") if isinstance(doc, dict) else None
    if isinstance(data, dict):
        for name in ("card_pan", "card_hash"):
            data.pop(name, None)
    return orjson.dumps(doc)


def verify_request(doc: Any, credentials: ApiCredentials) -> ApiRequest:
    """The verify call for a recorded OK callback: the order's amount, in its unit, and
    the merchant id (the provider's API key)."""
    if not isinstance(doc, Mapping) or doc.get("type") != OK_TYPE:
        raise PayloadInvalid("not a Zarinpal OK callback: nothing to verify")
    body = {"merchant_id": credentials.key, "amount": doc["amount"],
            "authority": doc["authority"]}  # fmt: skip
    return ApiRequest("POST", VERIFY_PATH, orjson.dumps(body), _JSON)


def inquiry_request(doc: Any, credentials: ApiCredentials) -> ApiRequest:
    """Where a payment stands (`inquiry.json`): asked when its verify's deadline passed.
    Zarinpal's docs warn never to take it for a verify: it decides nothing here."""
    body = {"merchant_id": credentials.key, "authority": doc["authority"]}
    return ApiRequest("POST", INQUIRY_PATH, orjson.dumps(body), _JSON)


def inquiry_status(answer: Any) -> str:
    """The inquiry's status (`VERIFIED`, `PAID`, `IN_BANK`, `FAILED`, `REVERSED`), or
    why there is none."""
    data = answer.get("data") if isinstance(answer, Mapping) else None
    status = data.get("status") if isinstance(data, Mapping) else None
    if isinstance(status, str) and status.isascii() and status.isalpha() and len(status) <= 16:
        return status
    code = code_of(answer)
    return "unknown" if code is None else f"unknown (code {code})"


def locate(doc: Any) -> str:
    """The verify path (the request itself is `verify_request`'s)."""
    return verify_request(doc, ApiCredentials("", (), "")).path


def confirmed(doc: Any, answer: Any) -> tuple[Confirmed, ...]:
    """The verified payment, from verify's answer; its code's error otherwise."""
    code = code_of(answer)
    data = answer.get("data") if isinstance(answer, Mapping) else None
    if code in _VERIFIED and isinstance(data, Mapping) and data.get("code") == code:
        return (_verified(doc, data),)
    said = f"Zarinpal answered code {code!r} for Authority {doc.get('authority')}"
    if code == _AMOUNT_MISMATCH:
        raise VerifyAmountMismatch(f"{said}: the payment is not {doc['amount']} "
                                   f"{doc['currency']}; not verified")  # fmt: skip
    if code in _NOT_PAID:
        raise ConfirmationNotFound(f"{said}: no such payment paid to this merchant")
    if code is None:
        raise PayloadInvalid("the verify answer carries no code")
    raise ConfirmationMismatch(f"{said}: not verified")


def _verified(doc: Mapping[str, Any], data: Mapping[str, Any]) -> Confirmed:
    ref_id = data.get("ref_id")
    if not isinstance(ref_id, int) or isinstance(ref_id, bool):
        raise PayloadInvalid("the verify answer's ref_id is not a number")
    body = {
        "authority": doc["authority"], "order": doc["order"], "merchant": doc["merchant"],
        "amount": doc["amount"], "currency": doc["currency"], "ref_id": ref_id,
        "code": data["code"],
    }  # fmt: skip
    return Confirmed(f"{doc['authority']}:verified", VERIFIED_TYPE, orjson.dumps(body))


def auth(key: str) -> Mapping[str, str]:
    """None: the merchant id travels in each verify's body."""
    return {"Accept": "application/json"}


def instruction(event_type: str, doc: Any) -> SettlementInstruction | None:
    """A verified payment's capture; None for a callback (it moves nothing by itself)."""
    if event_type != VERIFIED_TYPE:
        return None
    if not isinstance(doc, Mapping):
        raise PayloadInvalid("a verified Zarinpal payment's body is not an object")
    amount = doc.get("amount")
    if not isinstance(amount, int) or isinstance(amount, bool):
        raise FieldTypeInvalid("amount", "a whole number of rials or tomans")
    currency = get_str(doc, "currency")
    if currency not in _CURRENCIES:
        raise FieldTypeInvalid("currency", "IRR or IRT")
    # Whole units to hundredths (the exponent both share); IRT becomes IRR in the
    # instruction itself.
    return SettlementInstruction(
        settlement_id=get_str(doc, "authority"),
        kind=SettlementKind.CAPTURE,
        merchant_id=optional_str(doc, "merchant"),
        amount_minor=check_amount(amount * 100, "amount"),
        currency=currency,
        refund_id=None,
        source_event_id=None,
    )


def sign_callback(params: SchemeParams, body: bytes) -> bytes:
    """The callback's query with the order signed by `params.secrets[0]` (`sig`
    appended), as the merchant's `callback_url` carries it."""
    if not params.secrets:
        raise ValueError("signing a Zarinpal order needs a secret")
    try:
        fields = form_fields(body)
    except FormInvalid as exc:
        raise ValueError(str(exc)) from None
    sig = order_signature(params.secrets[0], fields)
    return body + (b"&" if body else b"") + f"{SIGNATURE_FIELD}={sig}".encode()


ZARINPAL = Provider(
    name="zarinpal",
    title="Zarinpal",
    scheme=SCHEME,
    movements=Movements(
        instruction, {VERIFIED_TYPE: (SettlementKind.CAPTURE,)}, parse_rules(("/merchant",))
    ),
    order_keys=parse_rules(("/authority",)),
    document=document,
    sign_body=sign_callback,
    callback=True,
    confirmation=Confirmation(
        locate,
        confirmed,
        auth,
        awaits=lambda event_type: event_type == OK_TYPE,
        request=verify_request,
        inquiry=inquiry_request,
        inquiry_status=inquiry_status,
        reads_refusals=True,
        deadline_s=VERIFY_DEADLINE_S,
        vouch=unverified_request,
        vouched=vouched,
        kept=kept_answer,
    ),
    backfill="`POST /pg/v4/payment/unVerified.json`: payments paid and not verified",
    cross_check="none: Zarinpal signs nothing; the merchant's order signature is the "
    "gateway's own (HMAC-SHA256), and each callback is verified by Zarinpal's `verify`",
)
