"""Run the real gateway in-process under uvicorn on a free port, for tests."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx
import uvicorn

from gateway import settings as settings_mod
from gateway.edge import edge_options
from gateway.ingest.parts import IngestParts
from gateway.wiring.ingest import create_app
from tests.support.services import REDIS_URL, free_port

SECRETS = {
    "stripe": "whsec_test_stripe_secret",
    "standard": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
    "github": "gh-test-secret",
    "shopify": "shpss_test_secret",
    "paddle": "pdl_ntfset_test_secret",
    "hmac": "generic-test-secret",
}
ROTATED = {name: f"{secret}_old" for name, secret in SECRETS.items()}
ROTATED["standard"] = "whsec_" + "b2xkLXN0YW5kYXJkLWtleS0xMjM0NTY3ODkwMTI="
BILLING_TOKEN = "billing-test-token"


def config(database_url: str, nats_url: str, **sections: Mapping[str, Any]) -> dict[str, Any]:
    """A config with every scheme configured (two secrets each: current and rotated)."""
    providers: dict[str, Any] = {
        name: {"scheme": name, "secrets": [SECRETS[name], ROTATED[name]]}
        for name in ("stripe", "standard", "github", "shopify", "paddle")
    }
    providers["hmac"] = {
        "scheme": "hmac",
        "secrets": [SECRETS["hmac"], ROTATED["hmac"]],
        "header": "X-Signature",
        "encoding": "hex",
        "prefix": "sha256=",
        "timestamp_header": "X-Timestamp",
        "event_id_from": "json:event_id",
        "event_type_from": "header:X-Event-Type",
    }
    doc: dict[str, Any] = {
        "database": {"url": database_url},
        "nats": {"url": nats_url},
        "redis": {"url": REDIS_URL},  # the rate cache (optional; tests of settling use it)
        "http": {"max_body_bytes": 65536},
        # Relay processes serve /metrics only where a test asks (a fixed port could be
        # taken by another test run on the machine).
        "outbox": {"relay_interval_s": 0.2, "relay_metrics_port": 0},
        "providers": providers,
        "services": {
            "billing": {"token": BILLING_TOKEN, "subjects": ["events.billing.>"]},
        },
    }
    for name, values in sections.items():
        doc[name] = {**doc.get(name, {}), **values}
    return doc


class RunningServer:
    """A gateway under uvicorn; `client` talks to it over real TCP."""

    def __init__(self, settings: settings_mod.Settings) -> None:
        self.settings = settings
        self.port = free_port()
        self.app = create_app(settings)
        self.server = uvicorn.Server(
            uvicorn.Config(
                self.app,
                host="127.0.0.1",
                port=self.port,
                log_config=None,
                lifespan="on",
                access_log=False,
                **edge_options(settings.http),  # the public port's limits, as in serve
            )
        )
        self.client = httpx.AsyncClient(base_url=f"http://127.0.0.1:{self.port}", timeout=30)
        self._task: asyncio.Task[Any] | None = None

    @property
    def parts(self) -> IngestParts:
        if self.app.parts is None:
            raise RuntimeError("the gateway is not running")
        return self.app.parts

    async def start(self) -> None:
        self._task = asyncio.create_task(self.server.serve())
        while not self.server.started:
            if self._task.done():
                self._task.result()
            await asyncio.sleep(0.01)

    async def stop(self) -> None:
        self.server.should_exit = True
        if self._task is not None:
            await self._task
        await self.client.aclose()


@contextlib.asynccontextmanager
async def running_server(doc: Mapping[str, Any]) -> AsyncIterator[RunningServer]:
    server = RunningServer(settings_mod.parse(doc, env={}))
    await server.start()
    try:
        yield server
    finally:
        await server.stop()
