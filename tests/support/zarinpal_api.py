"""A local stand-in of Zarinpal's payment API, for the confirm stage's tests: `POST
/pg/v4/payment/verify.json`, `unVerified.json` and `inquiry.json`, answered in the
shapes of zarinpal.com/docs/paymentGateway/connectToGateway: success as
`{"data": {"code": 100, "ref_id": …, "card_pan": …}, "errors": []}`, a refusal as
`{"data": [], "errors": {"code": -5x, "message": …}}` (with the HTTP status
`refusal_status`, 200 or a 4xx, since integrations see both).

A test makes payments (`pay`: paid, waiting for its verify), fails the next answers
(`fail_next`) or the whole API (`down`), and reads what was asked (`verifies`: the JSON
body of every verify, in order). A payment verified answers 101 the next time, as
Zarinpal does; one verified for another amount answers -50 and stays unverified.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.support import provider_apis
from tests.support.services import free_port

#: The merchant id the stand-in takes (Zarinpal's are UUIDs).
MERCHANT_ID = "1344b5d4-0048-11e8-94db-005056a205be"
_PAN = "502229******5995"


@dataclass
class Payment:
    amount: int
    callback_url: str
    status: str = "PAID"  # PAID, VERIFIED, FAILED, REVERSED
    ref_id: int = 0


@dataclass
class ZarinpalApi:
    """The stand-in's state: payments by Authority, faults queued, verifies seen."""

    refusal_status: int = 200
    payments: dict[str, Payment] = field(default_factory=dict)
    verifies: list[dict[str, Any]] = field(default_factory=list)
    fail_statuses: list[int] = field(default_factory=list)
    down: bool = False
    verify_down: bool = False  # verify answers 503, the other calls answer
    unverified_asked: int = 0  # how many times the list of unverified payments was asked
    _next_ref: int = 201

    def __post_init__(self) -> None:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        base = "/pg/v4/payment/"
        routes = [
            Route(base + "verify.json", self._verify, methods=["POST"]),
            Route(base + "unVerified.json", self._unverified, methods=["POST"]),
            Route(base + "inquiry.json", self._inquiry, methods=["POST"]),
        ]
        app = Starlette(routes=routes)
        config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                lifespan="off")  # fmt: skip
        self.server = uvicorn.Server(config)

    def pay(self, authority: str, amount: int, callback_url: str = "") -> None:
        """A payment paid at Zarinpal, waiting for its verify."""
        self.payments[authority] = Payment(amount, callback_url)

    def fail_next(self, n: int, status: int = 503) -> None:
        self.fail_statuses.extend([status] * n)

    def verified(self, authority: str) -> bool:
        return self.payments[authority].status == "VERIFIED"

    # --- the server ----------------------------------------------------------------------

    def _refusal(self, code: int, message: str) -> Response:
        doc = {"data": [], "errors": {"code": code, "message": message, "validations": []}}
        return Response(orjson.dumps(doc), self.refusal_status, media_type="application/json")

    def _fault(self) -> Response | None:
        if self.down:
            return Response(b"", 503)
        if self.fail_statuses:
            return Response(b"", self.fail_statuses.pop(0))
        return None

    async def _verify(self, request: Request) -> Response:
        body = orjson.loads(await request.body())
        self.verifies.append(body)
        fault = Response(b"", 503) if self.verify_down else self._fault()
        if fault is not None:
            return fault
        if body.get("merchant_id") != MERCHANT_ID:
            return self._refusal(-11, "merchant not found")
        payment = self.payments.get(body.get("authority"))
        if payment is None:
            return self._refusal(-54, "Invalid authority.")
        if payment.status not in ("PAID", "VERIFIED"):
            return self._refusal(-51, "Session is not valid, session is not active paid try.")
        if body.get("amount") != payment.amount:
            return self._refusal(-50, "Session is not valid, amounts values is not the same.")
        code = 101 if payment.status == "VERIFIED" else 100
        if code == 100:
            payment.status, payment.ref_id = "VERIFIED", self._next_ref
            self._next_ref += 1
        data = {"code": code, "message": "Verified" if code == 100 else "Verified before",
                "card_hash": "1EBE3EBEBE35C7EC0F8D6EE4F2F859107A87822CA179BC9528767EA7B5489B69",
                "card_pan": _PAN, "ref_id": payment.ref_id, "fee_type": "Merchant",
                "fee": 0}  # fmt: skip
        return Response(orjson.dumps({"data": data, "errors": []}), media_type="application/json")

    async def _unverified(self, request: Request) -> Response:
        body = orjson.loads(await request.body())
        self.unverified_asked += 1
        fault = self._fault()
        if fault is not None:
            return fault
        if body.get("merchant_id") != MERCHANT_ID:
            return self._refusal(-11, "merchant not found")
        listed = [{"authority": a, "amount": p.amount, "callback_url": p.callback_url,
                   "referer": "", "date": "2026-12-07 10:00:00"}
                  for a, p in self.payments.items() if p.status == "PAID"]  # fmt: skip
        doc = {"data": {"code": 100, "message": "Success", "authorities": listed}, "errors": []}
        return Response(orjson.dumps(doc), media_type="application/json")

    async def _inquiry(self, request: Request) -> Response:
        body = orjson.loads(await request.body())
        fault = self._fault()
        if fault is not None:
            return fault
        payment = self.payments.get(body.get("authority"))
        if payment is None:
            return self._refusal(-54, "Invalid authority.")
        doc = {"data": {"code": 100, "message": "Success", "status": payment.status}, "errors": []}
        return Response(orjson.dumps(doc), media_type="application/json")


@contextlib.asynccontextmanager
async def running_zarinpal_api(**kwargs: Any) -> AsyncIterator[ZarinpalApi]:
    api = ZarinpalApi(**kwargs)
    async with provider_apis.serving(api.server):
        yield api
