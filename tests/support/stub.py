"""The currency-stub served for real (uvicorn on a free port) in the test's event loop."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import httpx
import uvicorn

from gateway.currency_stub import StubState, build_app
from tests.support.services import free_port


@dataclass
class Stub:
    """A running currency-stub: its URL, its live state, and a control client."""

    url: str
    state: StubState
    http: httpx.AsyncClient

    async def control(self, **body: Any) -> httpx.Response:
        return await self.http.post(f"{self.url}/control", json=body)


@contextlib.asynccontextmanager
async def running_stub(rates: Mapping[str, str | Decimal] | None = None) -> AsyncIterator[Stub]:
    """The stub quoting `rates` (default EUR/USD 1.08, GBP/USD 1.27)."""
    app = build_app(dict(rates or {"EUR/USD": "1.08", "GBP/USD": "1.27"}))
    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                            lifespan="off", timeout_graceful_shutdown=1)  # fmt: skip
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()  # surface a start-up failure
        await asyncio.sleep(0.01)
    async with httpx.AsyncClient() as http:
        yield Stub(url=f"http://127.0.0.1:{port}", state=app.state.stub, http=http)
    server.should_exit = True
    await asyncio.wait_for(task, timeout=5)
