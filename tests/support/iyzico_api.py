"""A local stand-in of iyzico's payment API, for the confirm stage's tests: `POST
/payment/detail` (iyzipay's "retrieve payment"), checked and answered as iyzico does.

Checked: the `IYZWSv2` Authorization is recomputed here from the stand-in's own apiKey
and secretKey with the standard library (`HMAC-SHA256(secretKey, randomKey + path +
body)` in hex, in `base64("apiKey:K&randomKey:R&signature:S")`, iyzipay-python's
`generate_v2_hash`), over the request's very bytes; its random key must be the one
`x-iyzi-rnd` carries. Nothing of the gateway's signing code is used, so a request the
stand-in accepts is one iyzico's own library would have signed alike.

Refused as iyzico refuses a request it cannot authenticate: `{"status": "failure",
"errorCode": "1000", "errorMessage": "Geçersiz imza", ...}`. With HTTP 200 by default:
iyzipay-python reads every answer whatever its status, iyzipay-java reads an error
stream from 400 up, and an integration that checked iyzico's sandbox recorded the v1
payment endpoints answering this refusal with 200 and the `/v2/subscription` ones with
401; `refusal_status=401` plays the other.

Answered in the shape of iyzipay's RetrievePayment (docs.iyzico.com/en/advanced/
retrieve-payment; iyzipay-php `tests/Iyzipay/Tests/mock/create-payment.json`): prices as
JSON numbers with eight decimals (`150.50000000`), the request's `conversationId`
echoed, and `signature`, the hex HMAC-SHA256 with the secretKey of `paymentId:currency:
basketId:conversationId:paidPrice:price`, prices without trailing zeros, computed here
(docs.iyzico.com/en/advanced/response-signature-validation).

A test sets payments up (`pay`, `post_auth`) and faults on demand: the whole API `down`
(503), answers signed with another key (`sign_wrongly`), another payment's answer
(`answer_as`), refusals as 401 (`refusal_status`). It sees every request
(`requests`: headers, exact body, and whether it was accepted).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import hmac
import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.support import provider_apis
from tests.support.services import free_port

#: The keys the stand-in takes, in the shape of iyzico's sandbox keys.
API_KEY = "sandbox-afXhZPW0MQlE4dCUUlHcEopnMBgXnAZI"
SECRET_KEY = "sandbox-wbwpzKIiplZxI3hh5ALI4FJyAcZKL6kq"
DETAIL_PATH = "/payment/detail"
#: The time every answer says it was made (`systemTime`, epoch milliseconds).
SYSTEM_TIME_MS = 1_796_000_000_000
#: iyzico writes its amounts with eight decimals.
_EIGHT = Decimal("0.00000001")
#: An invalid signature, as iyzico answers it (its message is Turkish whatever the locale).
INVALID_SIGNATURE = ("1000", "Geçersiz imza")


@dataclass
class Payment:
    """One iyzico payment, as `/payment/detail` tells it."""

    payment_id: str
    paid_price: Decimal  # what the card was charged, the instalment surcharge included
    price: Decimal  # the basket's total
    currency: str = "TRY"
    phase: str = "AUTH"  # AUTH (a sale), PRE_AUTH, POST_AUTH
    basket_id: str | None = None
    #: The merchant's id of the payment, which its webhook carries as
    #: `paymentConversationId`; an answer echoes the request's instead.
    conversation_id: str | None = None
    payment_status: str = "SUCCESS"
    fraud_status: int = 1
    installment: int = 1


@dataclass(frozen=True)
class DetailRequest:
    """One request the stand-in received: its headers (lower-cased names), its body as
    sent, and why it was refused (None: accepted)."""

    headers: Mapping[str, str]
    body: bytes
    refused: str | None

    @property
    def random_key(self) -> str | None:
        return self.headers.get("x-iyzi-rnd")


def hexmac(secret: str, message: bytes) -> str:
    return hmac.new(secret.encode("utf-8"), message, hashlib.sha256).hexdigest()


def plain(amount: Decimal) -> str:
    """A price as iyzico signs it: Java's `stripTrailingZeros().toPlainString()`."""
    return format(amount.normalize(), "f")


def answer_signature(secret: str, doc: Mapping[str, Any]) -> str:
    """The answer's `signature` over the documented fields, an absent one as ""."""
    parts = [str(doc.get(k) or "") for k in ("paymentId", "currency", "basketId",
                                              "conversationId")]  # fmt: skip
    parts += [plain(Decimal(str(doc[k]))) for k in ("paidPrice", "price")]
    return hexmac(secret, ":".join(parts).encode("utf-8"))


def authorization_problem(
    headers: Mapping[str, str], path: str, body: bytes, api_key: str, secret: str
) -> str | None:
    """Why a request's Authorization is not iyzico's `IYZWSv2` for this key pair, path
    and body; None when it is."""
    scheme, _, token = headers.get("authorization", "").partition(" ")
    if scheme != "IYZWSv2" or not token:
        return "no IYZWSv2 Authorization"
    try:
        text = base64.b64decode(token, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return "an Authorization that is not base64 of text"
    fields = dict(part.partition(":")[::2] for part in text.split("&"))
    if set(fields) != {"apiKey", "randomKey", "signature"}:
        return f"an Authorization naming {sorted(fields)}"
    if fields["apiKey"] != api_key:
        return "another apiKey"
    random_key = fields["randomKey"]
    if not random_key or headers.get("x-iyzi-rnd") != random_key:
        return "x-iyzi-rnd is not the Authorization's randomKey"
    expected = hexmac(secret, random_key.encode("utf-8") + path.encode("utf-8") + body)
    if not hmac.compare_digest(fields["signature"], expected):
        return "a signature the secretKey does not make over this body"
    return None


def _json(value: Any) -> str:
    """JSON as iyzico writes it: a Decimal as a number with its digits kept
    (`150.50000000`), which no JSON library writes from a float."""
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(k)}:{_json(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_json(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def _respond(doc: Mapping[str, Any], status: int = 200) -> Response:
    return Response(_json(doc).encode("utf-8"), status, media_type="application/json")


@dataclass
class IyzicoApi:
    """The stand-in's state: the payments, the faults set, what was asked."""

    api_key: str = API_KEY
    secret_key: str = SECRET_KEY
    #: The HTTP status of a refusal (its body is iyzico's failure either way).
    refusal_status: int = 200
    #: Set: every request is answered 503, as iyzico in maintenance.
    down: bool = False
    payments: dict[str, Payment] = field(default_factory=dict)
    requests: list[DetailRequest] = field(default_factory=list)
    #: Payments whose answers are signed with this key instead of the secretKey.
    _signed_with: dict[str, str] = field(default_factory=dict)
    #: Payments answered with another payment's answer.
    _answered_as: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        app = Starlette(routes=[Route(DETAIL_PATH, self._detail, methods=["POST"])])
        self.server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, lifespan="off")
        )

    # --- what a test sets up -------------------------------------------------------------

    def pay(
        self,
        payment_id: str,
        paid_price: str,
        price: str | None = None,
        currency: str = "TRY",
        phase: str = "AUTH",
        *,
        basket_id: str | None = "B67832",
        conversation_id: str | None = None,
        **changes: Any,
    ) -> Payment:
        """A payment approved and paid (or pre-authorised: `phase` `PRE_AUTH`) of
        `paid_price` (the basket's `price` when given, else the same)."""
        found = Payment(payment_id, Decimal(paid_price), Decimal(price or paid_price),
                        currency, phase, basket_id, conversation_id, **changes)  # fmt: skip
        self.payments[payment_id] = found
        return found

    def post_auth(self, payment_id: str) -> None:
        """The pre-authorised payment captured (iyzico's post-auth)."""
        self.payments[payment_id].phase = "POST_AUTH"

    def sign_wrongly(self, payment_id: str, key: str | None = "not-the-secret-key") -> None:
        """Sign the payment's answers with `key` (None: with the secretKey again)."""
        if key is None:
            self._signed_with.pop(payment_id, None)
        else:
            self._signed_with[payment_id] = key

    def answer_as(self, payment_id: str, other: str | None) -> None:
        """Answer the payment's fetches with `other`'s answer (None: its own again)."""
        if other is None:
            self._answered_as.pop(payment_id, None)
        else:
            self._answered_as[payment_id] = other

    def accepted(self) -> list[DetailRequest]:
        """The requests that passed the Authorization check, in order."""
        return [r for r in self.requests if r.refused is None]

    def answer_doc(self, payment_id: str, conversation_id: str | None) -> dict[str, Any]:
        """The payment as iyzico answers it, to a request of `conversation_id`."""
        p = self.payments[payment_id]
        # The merchant's instalment surcharge and iyzico's commission, as iyzico
        # computes them per item (the amounts are informational; only the signed fields
        # move money).
        surcharge = p.paid_price - p.price
        rate = (surcharge / p.price * 100) if p.price else Decimal(0)
        commission = (p.paid_price * Decimal("0.0295")).quantize(_EIGHT)
        doc: dict[str, Any] = {
            "status": "success", "locale": "en", "systemTime": SYSTEM_TIME_MS,
            "price": p.price.quantize(_EIGHT), "paidPrice": p.paid_price.quantize(_EIGHT),
            "installment": p.installment, "paymentId": p.payment_id,
            "fraudStatus": p.fraud_status, "merchantCommissionRate": rate.quantize(_EIGHT),
            "merchantCommissionRateAmount": surcharge.quantize(_EIGHT),
            "iyziCommissionRateAmount": commission, "iyziCommissionFee": Decimal("0.25000000"),
            "cardType": "CREDIT_CARD", "cardAssociation": "MASTER_CARD", "cardFamily": "Bonus",
            "binNumber": "554960", "lastFourDigits": "0008", "currency": p.currency,
            "itemTransactions": [{
                "itemId": "BI101", "paymentTransactionId": f"{p.payment_id}1",
                "transactionStatus": 2, "price": p.price.quantize(_EIGHT),
                "paidPrice": p.paid_price.quantize(_EIGHT),
                "merchantCommissionRate": rate.quantize(_EIGHT),
                "merchantCommissionRateAmount": surcharge.quantize(_EIGHT),
                "iyziCommissionRateAmount": commission,
                "iyziCommissionFee": Decimal("0.25000000"),
                "blockageRate": Decimal(0).quantize(_EIGHT),
                "subMerchantPayoutRate": Decimal("0E-8"),
                "merchantPayoutAmount": (p.paid_price - commission).quantize(_EIGHT),
                "convertedPayout": {"paidPrice": p.paid_price.quantize(_EIGHT),
                                    "currency": p.currency, "iyziConversionRate": 0},
            }],
            "authCode": "084526", "phase": p.phase, "hostReference": f"mock{p.payment_id}",
            "paymentStatus": p.payment_status,
        }  # fmt: skip
        if conversation_id is not None:  # echoed as the request sent it
            doc["conversationId"] = conversation_id
        if p.basket_id is not None:
            doc["basketId"] = p.basket_id
        key = self._signed_with.get(payment_id, self.secret_key)
        doc["signature"] = answer_signature(key, doc)
        return doc

    def answer_body(self, payment_id: str, conversation_id: str | None) -> bytes:
        """`answer_doc` as the stand-in sends it, byte for byte."""
        return _json(self.answer_doc(payment_id, conversation_id)).encode("utf-8")

    # --- the server ----------------------------------------------------------------------

    def _failure(self, code: str, message: str, conversation_id: str | None) -> Response:
        doc: dict[str, Any] = {"status": "failure", "errorCode": code, "errorMessage": message,
                               "locale": "tr", "systemTime": SYSTEM_TIME_MS}  # fmt: skip
        if conversation_id is not None:
            doc["conversationId"] = conversation_id
        return _respond(doc, self.refusal_status)

    async def _detail(self, request: Request) -> Response:
        body = await request.body()
        headers = {k.lower(): v for k, v in request.headers.items()}
        if self.down:
            self.requests.append(DetailRequest(headers, body, "down"))
            return Response(b"<html>Service Unavailable</html>", 503, media_type="text/html")
        refused = authorization_problem(headers, DETAIL_PATH, body, self.api_key,
                                        self.secret_key)  # fmt: skip
        self.requests.append(DetailRequest(headers, body, refused))
        try:
            query = json.loads(body)
        except ValueError:
            query = {}
        query = query if isinstance(query, dict) else {}
        conversation = query.get("conversationId")
        conversation = conversation if isinstance(conversation, str) else None
        if refused is not None:
            return self._failure(*INVALID_SIGNATURE, conversation)
        payment_id = str(query.get("paymentId", ""))
        payment_id = self._answered_as.get(payment_id, payment_id)
        if payment_id not in self.payments:
            # The stand-in's wording: iyzico's code for an unknown payment is not in the
            # sources this follows.
            return self._failure("5000", "payment not found", conversation)
        return Response(self.answer_body(payment_id, conversation),
                        media_type="application/json")  # fmt: skip


@contextlib.asynccontextmanager
async def running_iyzico_api(**kwargs: Any) -> AsyncIterator[IyzicoApi]:
    """A stand-in serving in this event loop until the block ends."""
    api = IyzicoApi(**kwargs)
    async with provider_apis.serving(api.server):
        yield api
