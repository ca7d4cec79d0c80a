"""Local stand-ins of the providers' event APIs (Stripe `GET /v1/events`, GitHub hook
deliveries, Paddle `GET /events`, Square `POST /v2/events`) with their real payload
shapes, cursor pagination, and
faults on demand: `429` with `Retry-After`, `500`, bad credentials, or any answer a test
builds (a redirect, a page that is a list, an endless or trickled answer).

The stand-in speaks plain http on 127.0.0.1, which backfill refuses unless the provider
says `insecure_api_url = true` and lists the host in `api_hosts`: `stand_in_keys`."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from tests.support.services import free_port

API_KEY = "sk_test_backfill"
REPO = "acme/payments"
HOOK_ID = 42


def stand_in_keys(url: str, env: str = "PROVIDER_API_KEY") -> dict[str, Any]:
    """The provider keys that point backfill at a stand-in API on 127.0.0.1 over http."""
    return {
        "api_key_env": env,
        "api_url": url,
        "insecure_api_url": True,
        "api_hosts": ["127.0.0.1"],
    }


def _json(doc: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(doc), status, headers, media_type="application/json")


@dataclass
class GitHubDelivery:
    id: int
    guid: str
    event: str
    delivered_at: datetime
    headers: dict[str, str]
    body: bytes  # what the webhook carried, byte for byte
    redelivery: bool = False


@dataclass
class ProviderApis:
    """One server standing in for all four APIs; tests add events and queue faults."""

    page_size: int = 2  # small, so every test paginates
    stripe_events: list[dict[str, Any]] = field(default_factory=list)
    github: list[GitHubDelivery] = field(default_factory=list)
    paddle_events: list[dict[str, Any]] = field(default_factory=list)
    square_events: list[dict[str, Any]] = field(default_factory=list)
    #: The JSON body of every Square search, and its `Square-Version`, in order.
    square_searches: list[Any] = field(default_factory=list)
    square_versions: list[str | None] = field(default_factory=list)
    #: Faults answered before any real answer, one per request: "429", "500", "401",
    #: or a response a test built (answered as it is).
    faults: list[str | Response] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)  # path?query of every request
    #: The `Authorization` header of every request, in order (None: none sent).
    authorizations: list[str | None] = field(default_factory=list)
    #: Set: Stripe answers every page with one new event created then, and a fresh
    #: cursor, for ever.
    endless_at: datetime | None = None
    host: str = "127.0.0.1"
    #: (certificate, key) PEM files: serve https with them.
    tls: tuple[str, str] | None = None
    #: A fault answered to the Nth request (1-based) and every one after it.
    fail_from: tuple[int, str] | None = None
    #: Seconds each Stripe page takes to answer (a slow API, to kill a run mid-way).
    delay_s: float = 0.0

    def __post_init__(self) -> None:
        self.port = free_port()
        self.url = f"{'https' if self.tls else 'http'}://{self.host}:{self.port}"
        app = Starlette(
            routes=[
                Route("/v1/events", self._stripe),
                Route(f"/repos/{REPO}/hooks/{HOOK_ID}/deliveries", self._gh_list),
                Route(f"/repos/{REPO}/hooks/{HOOK_ID}/deliveries/{{id:int}}", self._gh_one),
                Route("/events", self._paddle),
                Route("/v2/events", self._square, methods=["POST"]),
            ]
        )
        self.server = uvicorn.Server(
            uvicorn.Config(
                app,
                host=self.host,
                port=self.port,
                log_config=None,
                lifespan="off",
                ssl_certfile=self.tls[0] if self.tls else None,
                ssl_keyfile=self.tls[1] if self.tls else None,
            )
        )

    def _gate(self, request: Request) -> Response | None:
        self.requests.append(f"{request.url.path}?{request.url.query}")
        self.authorizations.append(request.headers.get("authorization"))
        if self.fail_from is not None and len(self.requests) >= self.fail_from[0]:
            self.faults.append(self.fail_from[1])
        if self.faults:
            fault = self.faults.pop(0)
            if isinstance(fault, Response):
                return fault
            if fault == "429":
                return _json(
                    {"error": {"type": "rate_limit", "message": "slow down"}},
                    429,
                    {"Retry-After": "1"},
                )
            if fault == "500":
                return _json({"error": {"type": "api_error", "message": "boom"}}, 500)
            if fault == "401":
                return _json(
                    {"error": {"type": "invalid_request_error", "message": "bad key"}}, 401
                )
        if request.headers.get("authorization") != f"Bearer {API_KEY}":
            return _json({"error": {"message": "Invalid API Key provided"}}, 401)
        return None

    # --- Stripe: newest first, created[gte]/[lt], types[], starting_after, has_more ---

    async def _stripe(self, request: Request) -> Response:
        refused = self._gate(request)
        if refused is not None:
            return refused
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.endless_at is not None:
            n = len(self.requests)
            event = stripe_event(9000 + n, self.endless_at) | {"id": f"evt_endless_{n}"}
            return _json({"object": "list", "has_more": True, "data": [event]})
        q = request.query_params
        events = sorted(self.stripe_events, key=lambda e: (e["created"], e["id"]), reverse=True)
        if "created[gte]" in q:
            events = [e for e in events if e["created"] >= int(q["created[gte]"])]
        if "created[lt]" in q:
            events = [e for e in events if e["created"] < int(q["created[lt]"])]
        types = [v for k, v in q.multi_items() if k.startswith("types[")]
        if types:
            events = [e for e in events if e["type"] in types]
        if "starting_after" in q:
            ids = [e["id"] for e in events]
            events = events[ids.index(q["starting_after"]) + 1 :]
        limit = min(int(q.get("limit", 10)), self.page_size)
        return _json(
            {
                "object": "list",
                "url": "/v1/events",
                "has_more": len(events) > limit,
                "data": events[:limit],
            }
        )

    # --- GitHub: newest first, cursor in the Link header; a delivery's request ---

    async def _gh_list(self, request: Request) -> Response:
        refused = self._gate(request)
        if refused is not None:
            return refused
        items = sorted(self.github, key=lambda d: d.id, reverse=True)
        cursor = request.query_params.get("cursor")
        if cursor:
            items = [d for d in items if d.id < int(cursor)]
        page, rest = items[: self.page_size], items[self.page_size :]
        headers = {}
        if rest:
            query = urlencode({"per_page": 100, "cursor": page[-1].id})
            nxt = f"{self.url}{request.url.path}?{query}"
            headers["Link"] = f'<{nxt}>; rel="next"'
        return _json([self._gh_item(d) for d in page], headers=headers)

    @staticmethod
    def _gh_item(d: GitHubDelivery) -> dict[str, Any]:
        return {
            "id": d.id,
            "guid": d.guid,
            "delivered_at": d.delivered_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "redelivery": d.redelivery,
            "duration": 0.03,
            "status": "failed to connect",
            "status_code": 502,
            "event": d.event,
            "action": None,
            "installation_id": None,
            "repository_id": 1,
            "throttled_at": None,
        }

    async def _gh_one(self, request: Request) -> Response:
        refused = self._gate(request)
        if refused is not None:
            return refused
        wanted = int(request.path_params["id"])
        for d in self.github:
            if d.id == wanted:
                # The standard library keeps an integer wider than 64 bits, as GitHub does.
                doc = self._gh_item(d) | {
                    "url": f"{self.url}/repos/{REPO}/hooks/{HOOK_ID}",
                    "request": {"headers": d.headers, "payload": json.loads(d.body)},
                    "response": {"headers": {}, "payload": None},
                }
                return Response(json.dumps(doc), media_type="application/json")
        return _json({"message": "Not Found"}, 404)

    # --- Paddle: order_by id[DESC], after, event_type, meta.pagination ---

    async def _paddle(self, request: Request) -> Response:
        refused = self._gate(request)
        if refused is not None:
            return refused
        q = request.query_params
        events = sorted(self.paddle_events, key=lambda e: e["event_id"], reverse=True)
        if q.get("event_type"):
            wanted = q["event_type"].split(",")
            events = [e for e in events if e["event_type"] in wanted]
        if q.get("after"):
            events = [e for e in events if e["event_id"] < q["after"]]
        page = events[: self.page_size]
        more = len(events) > len(page)
        nxt = f"{self.url}/events?after={page[-1]['event_id']}" if more else None
        return _json(
            {
                "data": page,
                "meta": {
                    "request_id": "req_1",
                    "pagination": {
                        "per_page": self.page_size,
                        "next": nxt,
                        "has_more": more,
                        "estimated_total": len(events),
                    },
                },
            }
        )

    # --- Square: SearchEvents, created_at range, event_types, sort, an opaque cursor ---

    async def _square(self, request: Request) -> Response:
        refused = self._gate(request)
        if refused is not None:
            return refused
        body = json.loads(await request.body())
        self.square_searches.append(body)
        self.square_versions.append(request.headers.get("square-version"))
        query = body.get("query") or {}
        # A cursor is good for the query that gave it only ("you must use the original
        # query"): the stand-in's cursor names that query's digest and refuses another.
        digest = hashlib.sha256(json.dumps(query, sort_keys=True).encode()).hexdigest()[:16]
        chosen = query.get("filter") or {}
        created = chosen.get("created_at") or {}
        start, end = created.get("start_at"), created.get("end_at")
        events = sorted(
            self.square_events,
            key=lambda e: (_when(e["created_at"]), e["event_id"]),
            reverse=(query.get("sort") or {}).get("order", "ASC") == "DESC",
        )
        # [start_at, end_at): the stand-in's choice; Square does not say.
        if start:
            events = [e for e in events if _when(e["created_at"]) >= _when(start)]
        if end:
            events = [e for e in events if _when(e["created_at"]) < _when(end)]
        if chosen.get("event_types"):
            events = [e for e in events if e["type"] in chosen["event_types"]]
        if body.get("cursor"):
            cursor = json.loads(base64.urlsafe_b64decode(body["cursor"]))
            if cursor["query"] != digest:
                return _json(
                    {
                        "errors": [
                            {
                                "category": "INVALID_REQUEST_ERROR",
                                "code": "INVALID_CURSOR",
                                "detail": "the cursor belongs to another query",
                                "field": "cursor",
                            }
                        ]
                    },
                    400,
                )
            ids = [e["event_id"] for e in events]
            events = events[ids.index(cursor["after"]) + 1 :]
        page = events[: min(int(body.get("limit", 100)), self.page_size)]
        answer: dict[str, Any] = {}
        if page:  # Square leaves out what is empty
            answer["events"] = page
            answer["metadata"] = [
                {"event_id": e["event_id"], "api_version": "2026-08-19"} for e in page
            ]
        if len(events) > len(page):
            after = {"query": digest, "after": page[-1]["event_id"]}
            answer["cursor"] = base64.urlsafe_b64encode(json.dumps(after).encode()).decode()
        return _json(answer)


def _when(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def stripe_event(
    n: int, created: datetime, event_type: str = "payment_intent.succeeded", merchant: str = "m_1"
) -> dict[str, Any]:
    """An event object shaped like Stripe's own."""
    return {
        "id": f"evt_bf{n:04d}",
        "object": "event",
        "api_version": "2024-06-20",
        "created": int(created.timestamp()),
        "livemode": False,
        "pending_webhooks": 1,
        "request": {"id": None, "idempotency_key": None},
        "type": event_type,
        "data": {
            "object": {
                "id": f"pi_bf{n:04d}",
                "object": "payment_intent",
                "amount": 1000 + n,
                "amount_received": 1000 + n,
                "currency": "usd",
                "status": "succeeded",
                "metadata": {"merchant_id": merchant},
            }
        },
    }


def paddle_event(
    n: int, occurred: datetime, event_type: str = "transaction.completed"
) -> dict[str, Any]:
    return {
        "event_id": f"evt_01h{n:020d}",
        "event_type": event_type,
        "occurred_at": occurred.astimezone(UTC).isoformat().replace("+00:00", "Z"),
        "data": {
            "id": f"txn_{n}",
            "status": "completed",
            "currency_code": "USD",
            "details": {"totals": {"grand_total": "1000"}},
        },
    }


def square_event(
    n: int, created: datetime, event_type: str = "payment.updated", merchant: str = "m_1"
) -> dict[str, Any]:
    """An event as SearchEvents lists it (`Event`), its payment completed."""
    payment_id = f"sq_pay_{n:04d}"
    return {
        "merchant_id": merchant,
        "location_id": "L88917AVBK2S5",
        "type": event_type,
        "event_id": f"8d6d5c7b-3b8b-4c2f-9b0a-{n:012d}",
        "created_at": created.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z",
        "data": {
            "type": "payment",
            "id": payment_id,
            "object": {
                "payment": {
                    "id": payment_id,
                    "status": "COMPLETED",
                    "amount_money": {"amount": 1000 + n, "currency": "USD"},
                    "total_money": {"amount": 1000 + n, "currency": "USD"},
                    "location_id": "L88917AVBK2S5",
                }
            },
        },
    }


@contextlib.asynccontextmanager
async def running_apis(**kwargs: Any) -> AsyncIterator[ProviderApis]:
    apis = ProviderApis(**kwargs)
    async with serving(apis.server):
        yield apis


@contextlib.asynccontextmanager
async def serving(server: uvicorn.Server) -> AsyncIterator[None]:
    """A stand-in's server, serving in this event loop until the block ends."""
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():  # it could not bind: say why
            task.result()
        await asyncio.sleep(0.01)
    try:
        yield
    finally:
        server.should_exit = True
        await task


def raw(body: bytes, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """An answer of exactly these bytes (a malformed page, say)."""
    return Response(body, status, headers, media_type="application/json")


def redirect(location: str, status: int = 302) -> Response:
    return Response(b"", status, {"Location": location})


def streamed(
    chunks: int, chunk: bytes, delay_s: float = 0.0, sent: list[int] | None = None
) -> StreamingResponse:
    """An answer of `chunks` copies of `chunk`, `delay_s` apart, with no
    Content-Length; `sent` counts the bytes handed to the server so far."""

    async def body() -> AsyncIterator[bytes]:
        for _ in range(chunks):
            if delay_s:
                await asyncio.sleep(delay_s)
            if sent is not None:
                sent.append(len(chunk))
            yield chunk

    return StreamingResponse(body(), media_type="application/json")
