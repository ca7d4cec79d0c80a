"""A local stand-in of Mollie's payments API, for the confirm stage's tests: `GET
/v2/payments/{id}` with `embed=refunds,chargebacks`, answered in Mollie's shapes (the
`mollie-api-python` fixtures `tests/responses/payment_single.json`, `refunds_list.json`,
`payment_chargebacks_list.json`, and its error answers `error_unauthorized.json` and
`customer_doesnotexist.json`), as `application/hal+json` as Mollie answers.

A test sets payments up (`pay`, `refund`, `chargeback`: each call is a change Mollie
would then announce with a webhook), and faults on demand: the whole API `down` (503),
the next answers failing (`fail_next`), or any answer it builds for one payment
(`answer_with`: another payment's, a redirect, a slow or huge body). It sees what was
fetched (`requests`) and how many fetches overlapped at most (`in_flight_max`; hold
each request with `delay_s` to see them overlap).

The stand-in speaks plain http on 127.0.0.1, which the gateway refuses unless the
provider says `insecure_api_url = true` and lists the host in `api_hosts`:
`stand_in_keys`. It runs in the test's event loop; the gateway under test, a
subprocess, reaches it over http.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from tests.support import provider_apis
from tests.support.services import free_port

#: The key the stand-in takes (the test key of Mollie's documentation examples).
API_KEY = "test_dHar4XY7LxsDOtmnkVtjNVWXLSlXsM"
#: Mollie's API answers HAL.
MEDIA_TYPE = "application/hal+json"
#: The time of the first change; each later change is a second after the one before, so
#: a payment's changes are ordered as the test made them.
EPOCH = datetime(2026, 3, 20, 9, 13, 37, tzinfo=UTC)
#: The time each status stamps on a payment (kept once stamped).
_TIMES = {"authorized": "authorizedAt", "paid": "paidAt", "canceled": "canceledAt",
          "expired": "expiredAt", "failed": "failedAt"}  # fmt: skip
_DOCS = "https://docs.mollie.com/overview/handling-errors"

#: An answer a test builds for a payment: a response, or what makes one per request
#: (a streamed body can be sent once only).
Answer = Response | Callable[[], Response]


def stand_in_keys(url: str, env: str = "MOLLIE_API_KEY") -> dict[str, Any]:
    """The provider keys that point the gateway at a stand-in on 127.0.0.1 over http:
    `api_key_env` (set it to `API_KEY`), `api_url`, `insecure_api_url`, `api_hosts`."""
    return provider_apis.stand_in_keys(url, env)


def error(status: int, title: str, detail: str, headers: dict[str, str] | None = None) -> Response:
    """An error as Mollie writes one."""
    doc = {"status": status, "title": title, "detail": detail,
           "_links": {"documentation": {"href": _DOCS, "type": "text/html"}}}  # fmt: skip
    return Response(orjson.dumps(doc), status, headers, media_type=MEDIA_TYPE)


def _money(value: str, currency: str) -> dict[str, str]:
    return {"value": value, "currency": currency}


def _stamp(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%S+00:00")


@dataclass
class MollieApi:
    """The stand-in's state: the payments, the faults queued, what was fetched."""

    host: str = "127.0.0.1"
    #: Set: every request is answered 503, as Mollie in maintenance.
    down: bool = False
    #: Seconds each request is held before it is answered (to see fetches overlap).
    delay_s: float = 0.0
    #: The path of every request, with its query if it has one, in order.
    requests: list[str] = field(default_factory=list)
    #: The `Authorization` header of every request, in order (None: none sent).
    authorizations: list[str | None] = field(default_factory=list)
    #: The most requests under way at once so far.
    in_flight_max: int = 0
    payments: dict[str, dict[str, Any]] = field(default_factory=dict)
    refunds: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    chargebacks: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    _faults: list[Response] = field(default_factory=list)
    _answers: dict[str, Answer] = field(default_factory=dict)
    _in_flight: int = 0
    _changes: int = 0

    def __post_init__(self) -> None:
        self.port = free_port()
        self.url = f"http://{self.host}:{self.port}"
        app = Starlette(routes=[Route("/v2/payments/{payment_id}", self._payment)])
        self.server = uvicorn.Server(
            uvicorn.Config(app, host=self.host, port=self.port, log_config=None, lifespan="off")
        )

    # --- what a test sets up -----------------------------------------------------------

    def pay(
        self,
        payment_id: str,
        value: str = "10.00",
        currency: str = "EUR",
        status: str = "paid",
        *,
        metadata: Any = None,
    ) -> dict[str, Any]:
        """Create the payment, or move it to `status` (`open`, `pending`, `authorized`,
        `paid`, `canceled`, `expired`, `failed`), stamping the time of that status as
        Mollie does (`paidAt`, ...); a time stamped before stays. `metadata` replaces
        the payment's when given."""
        at = self._tick()
        payment = self.payments.setdefault(payment_id, {
            "resource": "payment", "id": payment_id, "mode": "test", "createdAt": _stamp(at),
            "amount": _money(value, currency), "description": f"Order {payment_id}",
            "method": "creditcard", "metadata": None, "status": "open", "isCancelable": False,
            "details": None, "profileId": "pfl_QkEhN94Ba", "sequenceType": "oneoff",
            "redirectUrl": "https://webshop.example.org/order/12345/",
            "webhookUrl": "https://webshop.example.org/payments/webhook/",
        })  # fmt: skip
        payment["amount"] = _money(value, currency)
        payment["status"] = status
        if metadata is not None:
            payment["metadata"] = metadata
        if status in _TIMES:
            payment.setdefault(_TIMES[status], _stamp(at))
        return payment

    def refund(
        self, payment_id: str, refund_id: str, value: str, status: str = "refunded"
    ) -> dict[str, Any]:
        """Refund part of the payment (in its currency), or move the refund to
        `status` (`queued`, `pending`, `processing`, `refunded`, `failed`, `canceled`)."""
        payment = self.payments[payment_id]
        found = self._find(self.refunds, payment_id, refund_id)
        if found is None:
            currency = payment["amount"]["currency"]
            found = {
                "resource": "refund", "id": refund_id, "mode": "test",
                "amount": _money(value, currency),
                "settlementAmount": _money(f"-{value}", currency),
                "description": f"Refund of {payment_id}", "metadata": None,
                "createdAt": _stamp(self._tick()), "paymentId": payment_id,
                "_links": self._links(f"{payment_id}/refunds/{refund_id}", payment_id),
            }  # fmt: skip
            self.refunds.setdefault(payment_id, []).append(found)
        found["status"] = status
        return found

    def chargeback(
        self, payment_id: str, chargeback_id: str, value: str, reversed: bool = False
    ) -> dict[str, Any]:
        """Charge part of the payment back (in its currency), or reverse the chargeback."""
        payment = self.payments[payment_id]
        found = self._find(self.chargebacks, payment_id, chargeback_id)
        if found is None:
            currency = payment["amount"]["currency"]
            found = {
                "resource": "chargeback", "id": chargeback_id, "amount": _money(value, currency),
                "settlementAmount": _money(f"-{value}", currency), "reason": None,
                "createdAt": _stamp(self._tick()), "reversedAt": None, "paymentId": payment_id,
                "_links": self._links(f"{payment_id}/chargebacks/{chargeback_id}", payment_id),
            }  # fmt: skip
            self.chargebacks.setdefault(payment_id, []).append(found)
        if reversed and found["reversedAt"] is None:
            found["reversedAt"] = _stamp(self._tick())
        return found

    def fail_next(self, n: int, status: int = 500, retry_after: float | None = None) -> None:
        """Answer the next `n` requests `status` (with `Retry-After` when given)."""
        headers = None if retry_after is None else {"Retry-After": f"{retry_after:g}"}
        fault = error(status, "Internal Server Error", "a stand-in fault", headers)
        self._faults.extend([fault] * n)

    def answer_with(self, payment_id: str, answer: Answer | None) -> None:
        """Answer every fetch of `payment_id` with `answer` (a response, or a function
        making one per request) until told None."""
        if answer is None:
            self._answers.pop(payment_id, None)
        else:
            self._answers[payment_id] = answer

    def payment_response(
        self, payment_id: str, embed: tuple[str, ...] = ("refunds", "chargebacks")
    ) -> Response:
        """The answer Mollie gives for `payment_id` now, with `embed`."""
        return Response(orjson.dumps(self.payment_doc(payment_id, embed)), 200,
                        media_type=MEDIA_TYPE)  # fmt: skip

    def payment_doc(
        self, payment_id: str, embed: tuple[str, ...] = ("refunds", "chargebacks")
    ) -> dict[str, Any]:
        """The payment as Mollie answers it, with the lists `embed` names (those that
        are not empty)."""
        doc = dict(self.payments[payment_id])
        lists = {"refunds": self.refunds, "chargebacks": self.chargebacks}
        embedded = {name: list(lists[name].get(payment_id, ())) for name in embed if name in lists}
        embedded = {name: items for name, items in embedded.items() if items}
        if embedded:
            doc["_embedded"] = embedded
        doc["_links"] = self._links(payment_id, None)
        return doc

    # --- the server ----------------------------------------------------------------------

    async def _payment(self, request: Request) -> Response:
        query = request.url.query
        self.requests.append(request.url.path + (f"?{query}" if query else ""))
        self.authorizations.append(request.headers.get("authorization"))
        self._in_flight += 1
        self.in_flight_max = max(self.in_flight_max, self._in_flight)
        try:
            if self.delay_s:
                await asyncio.sleep(self.delay_s)
            return self._answer(request)
        finally:
            self._in_flight -= 1

    def _answer(self, request: Request) -> Response:
        if self.down:
            return error(503, "Service Unavailable", "The API is down for maintenance.")
        if self._faults:
            return self._faults.pop(0)
        if request.headers.get("authorization") != f"Bearer {API_KEY}":
            return error(401, "Unauthorized Request",
                         "Missing authentication, or failed to authenticate")  # fmt: skip
        payment_id = request.path_params["payment_id"]
        built = self._answers.get(payment_id)
        if built is not None:
            return built if isinstance(built, Response) else built()
        if payment_id not in self.payments:
            return error(404, "Not Found", f"No payment exists with token {payment_id}.")
        wanted = request.query_params.get("embed", "")
        embed = tuple(name for name in wanted.split(",") if name)
        return self.payment_response(payment_id, embed)

    # --- helpers -------------------------------------------------------------------------

    def _tick(self) -> datetime:
        self._changes += 1
        return EPOCH + timedelta(seconds=self._changes)

    @staticmethod
    def _find(
        lists: dict[str, list[dict[str, Any]]], payment_id: str, item_id: str
    ) -> dict[str, Any] | None:
        return next((item for item in lists.get(payment_id, ()) if item["id"] == item_id), None)

    def _links(self, path: str, payment_id: str | None) -> dict[str, Any]:
        links = {"self": {"href": f"{self.url}/v2/payments/{path}", "type": MEDIA_TYPE}}
        if payment_id is not None:
            links["payment"] = {"href": f"{self.url}/v2/payments/{payment_id}", "type": MEDIA_TYPE}
        return links


def redirect(location: str, status: int = 302) -> Response:
    """A redirect, which the gateway must never follow with the API key."""
    return Response(b"", status, {"Location": location})


def huge(size_bytes: int, chunk_bytes: int = 65_536) -> Callable[[], Response]:
    """A 200 of at least `size_bytes` (blanks, in chunks) with no Content-Length, made
    anew for each request."""
    chunks = -(-size_bytes // chunk_bytes)

    async def blanks() -> AsyncIterator[bytes]:
        for _ in range(chunks):
            yield b" " * chunk_bytes

    return lambda: StreamingResponse(blanks(), media_type=MEDIA_TYPE)


def slow(body: bytes, delay_s: float, chunks: int = 10) -> Callable[[], Response]:
    """A 200 of `body` trickled in `chunks` pieces, `delay_s` apart, made anew for each
    request."""
    size = -(-len(body) // chunks)
    pieces = [body[i : i + size] for i in range(0, len(body), size)] or [b""]

    async def trickle() -> AsyncIterator[bytes]:
        for piece in pieces:
            await asyncio.sleep(delay_s)
            yield piece

    return lambda: StreamingResponse(trickle(), media_type=MEDIA_TYPE)


@contextlib.asynccontextmanager
async def running_mollie_api(**kwargs: Any) -> AsyncIterator[MollieApi]:
    """A stand-in serving in this event loop until the block ends."""
    api = MollieApi(**kwargs)
    async with provider_apis.serving(api.server):
        yield api
