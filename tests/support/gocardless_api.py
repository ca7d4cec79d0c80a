"""A local stand-in of GoCardless's API for the confirm stage's tests: `GET
/payments/{id}`, `/refunds/{id}` and `/payouts/{id}`, each answered as GoCardless
answers one resource (`{"payments": {...}}`, the shapes of developer.gocardless.com's
API reference and of `gocardless-pro-python`'s `tests/fixtures/*.json`), and its
errors (`{"error": {"type": ..., "code": 404, "errors": [...]}}`).

A test sets the objects up (`payment`, `refund`, `payout`) and faults on demand: the
whole API `down` (503), or any answer it builds for one path (`answer_with`). It sees
every request's path and headers (`requests`), to check the key and API version sent.
The stand-in speaks plain http on 127.0.0.1: `stand_in_keys` points the gateway at it.

For backfill it also lists `events` (`GET /events`), newest first, by
`created_at[gte]`/`[lt]`, `resource_type`, `action` and the `after` cursor, `limit` capped
at `page_size`, answered `{"events": [...], "meta": {"cursors": {...}, "limit": n}}` as
GoCardless lists them; with faults queued one per listing request (`event_faults`:
"429" with `Retry-After`, "500", or any response a test builds), a cursor handed back for
ever (`after_loop`), and the listing's every request kept (`listings`, path and query).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.support import provider_apis
from tests.support.services import free_port

#: The access token the stand-in takes (GoCardless's sandbox tokens look alike).
API_KEY = "sandbox_Wk3eQ7pL9sXc2vB5nM8rT1yU4iO6aZ0d"
_CREATED = "2026-12-06T10:00:00.000Z"


def stand_in_keys(url: str, env: str = "GOCARDLESS_ACCESS_TOKEN") -> dict[str, Any]:
    """`api_key_env`, `api_url`, `insecure_api_url`, `api_hosts` for the stand-in."""
    return provider_apis.stand_in_keys(url, env)


def error(status: int, reason: str, message: str) -> Response:
    """An error as GoCardless writes one."""
    kind = "invalid_api_usage" if status < 500 else "gocardless"
    doc = {"error": {"message": message, "type": kind, "code": status,
                     "request_id": "0a1b2c3d-stand-in",
                     "documentation_url": "https://developer.gocardless.com/api-reference#"
                     + reason,
                     "errors": [{"reason": reason, "message": message}]}}  # fmt: skip
    return Response(orjson.dumps(doc), status, media_type="application/json")


@dataclass
class GoCardlessApi:
    """The stand-in's objects, the faults set, and what was fetched."""

    host: str = "127.0.0.1"
    #: Set: every request is answered 503.
    down: bool = False
    #: (path, headers) of every request, in order.
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    objects: dict[str, dict[str, Any]] = field(default_factory=dict)
    _answers: dict[str, Response] = field(default_factory=dict)
    #: The events `GET /events` lists, in any order.
    events: list[dict[str, Any]] = field(default_factory=list)
    #: The most events one listing page holds (small, so every test paginates).
    page_size: int = 2
    #: Faults answered to listing requests before any real answer, one per request.
    event_faults: list[str | Response] = field(default_factory=list)
    #: Set: every listing page is the first, and names this `after` cursor.
    after_loop: str | None = None
    #: `path?query` of every listing request, in order.
    listings: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.port = free_port()
        self.url = f"http://{self.host}:{self.port}"
        app = Starlette(
            routes=[Route("/events", self._events), Route("/{plural}/{object_id}", self._object)]
        )
        self.server = uvicorn.Server(
            uvicorn.Config(app, host=self.host, port=self.port, log_config=None, lifespan="off")
        )

    def payment(
        self, payment_id: str, amount: int, currency: str = "GBP", merchant: str | None = None
    ) -> None:
        """A payment of `amount` minor units; its merchant in `metadata.merchant_id`."""
        self.objects[f"/payments/{payment_id}"] = {
            "id": payment_id, "created_at": _CREATED, "charge_date": "2026-12-09",
            "amount": amount, "amount_refunded": 0, "currency": currency,
            "description": "Stand-in payment", "reference": None, "status": "confirmed",
            "metadata": {} if merchant is None else {"merchant_id": merchant},
            "links": {"mandate": "MD000STANDIN", "creditor": "CR000STANDIN"},
        }  # fmt: skip

    def refund(self, refund_id: str, payment_id: str, amount: int, currency: str = "GBP") -> None:
        """A refund of `amount` minor units of `payment_id`."""
        self.objects[f"/refunds/{refund_id}"] = {
            "id": refund_id, "created_at": _CREATED, "amount": amount, "currency": currency,
            "reference": "REFUND", "metadata": {}, "status": "created",
            "links": {"payment": payment_id, "mandate": "MD000STANDIN"},
        }  # fmt: skip

    def payout(
        self, payout_id: str, amount: int, currency: str = "GBP", merchant: str | None = None
    ) -> None:
        """A payout of `amount` minor units to the creditor of `merchant`."""
        self.objects[f"/payouts/{payout_id}"] = {
            "id": payout_id, "created_at": _CREATED, "amount": amount, "currency": currency,
            "deducted_fees": 20, "arrival_date": "2026-12-10", "payout_type": "merchant",
            "reference": "GC-STANDIN", "status": "paid",
            "metadata": {} if merchant is None else {"merchant_id": merchant},
            "links": {"creditor": "CR000STANDIN", "creditor_bank_account": "BA000STANDIN"},
        }  # fmt: skip

    def answer_with(self, path: str, response: Response) -> None:
        """Answer `path` with `response` from now on."""
        self._answers[path] = response

    def fetched(self) -> list[str]:
        """The paths requested, in order."""
        return [path for path, _ in self.requests]

    async def _object(self, request: Request) -> Response:
        path = request.url.path
        self.requests.append((path, dict(request.headers)))
        if self.down:
            return error(503, "service_unavailable", "The service is unavailable")
        if request.headers.get("authorization") != f"Bearer {API_KEY}":
            return error(401, "authentication_failed", "Invalid access token")
        if path in self._answers:
            return self._answers[path]
        found = self.objects.get(path)
        if found is None:
            return error(404, "resource_not_found", "Resource not found")
        plural = request.path_params["plural"]
        return Response(orjson.dumps({plural: found}), media_type="application/json")

    async def _events(self, request: Request) -> Response:
        """`GET /events`: a page of `events`, newest first, as GoCardless lists them."""
        self.requests.append((request.url.path, dict(request.headers)))
        self.listings.append(f"{request.url.path}?{request.url.query}")
        if self.event_faults:
            fault = self.event_faults.pop(0)
            if isinstance(fault, Response):
                return fault
            if fault == "429":
                limited = error(429, "rate_limit_exceeded", "Rate limit exceeded")
                limited.headers["Retry-After"] = "1"
                return limited
            return error(500, "internal_server_error", "Internal server error")
        if self.down:
            return error(503, "service_unavailable", "The service is unavailable")
        if request.headers.get("authorization") != f"Bearer {API_KEY}":
            return error(401, "authentication_failed", "Invalid access token")
        if request.headers.get("gocardless-version") is None:
            return error(400, "missing_version_header", "GoCardless-Version is required")
        q = request.query_params
        listed = sorted(self.events, key=lambda e: (_when(e["created_at"]), e["id"]), reverse=True)
        if "created_at[gte]" in q:
            listed = [e for e in listed if _when(e["created_at"]) >= _when(q["created_at[gte]"])]
        if "created_at[lt]" in q:
            listed = [e for e in listed if _when(e["created_at"]) < _when(q["created_at[lt]"])]
        for name in ("resource_type", "action"):
            if name in q:
                listed = [e for e in listed if e[name] == q[name]]
        if "after" in q and self.after_loop is None:
            ids = [e["id"] for e in listed]
            if q["after"] not in ids:
                return error(400, "invalid_cursor", "The cursor is not valid")
            listed = listed[ids.index(q["after"]) + 1 :]
        limit = min(int(q.get("limit", 50)), self.page_size)
        page = listed[:limit]
        after = page[-1]["id"] if len(listed) > len(page) else None
        if self.after_loop is not None:
            after = self.after_loop
        cursors = {"before": page[0]["id"] if page and "after" in q else None, "after": after}
        doc = {"events": page, "meta": {"cursors": cursors, "limit": limit}}
        return Response(orjson.dumps(doc), media_type="application/json")


def _when(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def event(
    n: int, created: datetime, resource: str = "mandates", action: str = "created", **links: str
) -> dict[str, Any]:
    """An event as GoCardless lists it and sends it (`EV…`, `created_at` in
    milliseconds, `links` naming its object)."""
    when = created.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    return {"id": f"EV{n:012d}", "created_at": when, "resource_type": resource,
            "action": action, "links": links or {"mandate": "MD000STANDIN"},
            "details": {"origin": "gocardless", "cause": f"{resource}_{action}",
                        "description": "Stand-in event."},
            "metadata": {}}  # fmt: skip


@contextlib.asynccontextmanager
async def running_gocardless_api() -> AsyncIterator[GoCardlessApi]:
    """The stand-in, serving until the block ends."""
    api = GoCardlessApi()
    async with provider_apis.serving(api.server):
        yield api
