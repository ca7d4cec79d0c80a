"""A local stand-in of Stripe's v1 object API for the thin events' confirm stage: `GET
/v1/{resource}/{id}` (payment intents, charges, refunds, disputes, payouts) answered
with the object as a test set it up, Stripe's error shape otherwise (`{"error":
{"type": "invalid_request_error", "code": "resource_missing", ...}}`).

Objects live per account: the platform's (no `Stripe-Context`) and each connected
account's, as Stripe keeps them, so an event fetched without its context is not found.
A test sees every request's path and context (`requests`)."""

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

API_KEY = "rk_test_thin_51Hq3kLmN8pQ2rS4tU6v"


def stand_in_keys(url: str, env: str = "STRIPE_API_KEY") -> dict[str, Any]:
    """`api_key_env`, `api_url`, `insecure_api_url`, `api_hosts` for the stand-in."""
    return provider_apis.stand_in_keys(url, env)


def _error(status: int, code: str, message: str) -> Response:
    doc = {"error": {"type": "invalid_request_error", "code": code, "message": message}}
    return Response(orjson.dumps(doc), status, media_type="application/json")


@dataclass
class StripeObjects:
    """The objects by (account or None, path), and what was fetched."""

    host: str = "127.0.0.1"
    requests: list[tuple[str, str | None]] = field(default_factory=list)
    objects: dict[tuple[str | None, str], dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.port = free_port()
        self.url = f"http://{self.host}:{self.port}"
        app = Starlette(routes=[Route("/v1/{resource}/{object_id}", self._object)])
        self.server = uvicorn.Server(
            uvicorn.Config(app, host=self.host, port=self.port, log_config=None, lifespan="off")
        )

    def put(self, resource: str, obj: dict[str, Any], account: str | None = None) -> str:
        """Keep `obj` at `/v1/{resource}/{obj['id']}` of `account`; answers that path."""
        path = f"/v1/{resource}/{obj['id']}"
        self.objects[(account, path)] = obj
        return path

    async def _object(self, request: Request) -> Response:
        path, context = request.url.path, request.headers.get("stripe-context")
        self.requests.append((path, context))
        if request.headers.get("authorization") != f"Bearer {API_KEY}":
            return _error(401, "api_key_invalid", "Invalid API Key provided")
        found = self.objects.get((context, path))
        if found is None:
            return _error(404, "resource_missing", f"No such object: '{path}'")
        return Response(orjson.dumps(found), media_type="application/json")


@contextlib.asynccontextmanager
async def running_stripe_objects() -> AsyncIterator[StripeObjects]:
    """The stand-in, serving until the block ends."""
    api = StripeObjects()
    async with provider_apis.serving(api.server):
        yield api
