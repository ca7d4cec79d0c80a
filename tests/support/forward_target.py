"""A real HTTP service for `gateway forward` to deliver to: it records every request
(raw body and headers) and answers as the test scripts it."""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.support.services import free_port


@dataclass(frozen=True)
class Received:
    """One request as the target saw it."""

    at_s: float
    body: bytes
    headers: dict[str, str]
    status: int

    @property
    def webhook_id(self) -> str:
        return self.headers["webhook-id"]


#: Answers a request: (status, extra headers, body).
Script = Callable[["Received"], tuple[int, dict[str, str], bytes]]


def always(status: int = 200) -> Script:
    return lambda _: (status, {}, b"ok")


@dataclass
class Target:
    """The service: `url` to forward to, `received` in arrival order."""

    script: Script = field(default_factory=always)
    latency_s: tuple[float, float] = (0.0, 0.0)  # each answer waits uniformly within
    received: list[Received] = field(default_factory=list)
    port: int = field(default_factory=free_port)
    path: str = "/webhooks"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.path}"

    def app(self) -> Starlette:
        async def hook(request: Request) -> Response:
            body = await request.body()
            low, high = self.latency_s
            if high > 0:
                await asyncio.sleep(random.uniform(low, high))
            seen = Received(time.time(), body, dict(request.headers), 0)
            status, headers, answer = self.script(seen)
            self.received.append(Received(seen.at_s, seen.body, seen.headers, status))
            return Response(answer, status_code=status, headers=headers)

        return Starlette(routes=[Route(self.path, hook, methods=["POST"])])

    def delivered(self) -> list[Received]:
        """The requests answered 2xx."""
        return [r for r in self.received if 200 <= r.status < 300]


@contextlib.asynccontextmanager
async def serving(target: Target) -> AsyncIterator[Target]:
    """Serve `target` on its port for the block's lifetime."""
    server = uvicorn.Server(
        uvicorn.Config(
            target.app(),
            host="127.0.0.1",
            port=target.port,
            log_config=None,
            lifespan="off",
            access_log=False,
        )
    )
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    try:
        yield target
    finally:
        server.should_exit = True
        await task
