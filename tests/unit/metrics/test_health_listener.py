"""The listener of `settle`, `forward` and `dlq run-jobs` over a real socket: `/livez`
answers from the event loop, `/readyz` with what the process's `Health` says (probes
bounded: a hung one counts as down), any other path the metrics; and the console's
`/livez` and `/readyz` in front of its app (finding 14)."""

from __future__ import annotations

import asyncio

import httpx
import orjson
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from gateway.console.probes import Probes
from gateway.core.health.readiness import Dependency
from gateway.metrics import ListenAddress, Metrics, metrics_listener
from gateway.wiring.health import Health
from tests.support.services import free_port


async def _yes() -> bool:
    return True


async def _hangs() -> bool:
    await asyncio.sleep(3600)
    return True


async def _raises() -> bool:
    raise OSError("connection refused by 10.0.0.7:5432")


async def test_the_listener_answers_livez_readyz_and_metrics() -> None:
    port = free_port()
    health = Health(timeout_s=0.2)
    async with (
        metrics_listener(Metrics(), ListenAddress("127.0.0.1", port, "x.metrics_port"), health),
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5) as client,
    ):
        starting = await client.get("/readyz")
        assert (starting.status_code, starting.json()) == (
            503,
            {"status": "not_ready", "reasons": ["starting"]},
        )
        health.watch(
            {Dependency.DATABASE: _yes, Dependency.NATS: _hangs, Dependency.LEDGER: _raises}
        )
        ready = await client.get("/readyz")
        assert ready.status_code == 503
        assert ready.json() == {
            "status": "not_ready",
            "database": True,
            "nats": False,
            "ledger": False,
            "reasons": ["nats_unreachable", "ledger_unreachable"],
        }
        assert "10.0.0.7" not in ready.text  # an error's text never reaches a probe
        live = await client.get("/livez")
        assert (live.status_code, live.json()) == (200, {"status": "alive"})
        metrics = await client.get("/metrics")
        assert metrics.status_code == 200
        assert "# TYPE gateway_webhooks_total counter" in metrics.text


async def test_concurrent_readyz_share_one_round_of_probes() -> None:
    """A flood of probes costs the dependency one probe at a time."""
    calls = 0
    gate = asyncio.Event()

    async def counted() -> bool:
        nonlocal calls
        calls += 1
        await gate.wait()
        return True

    health = Health(timeout_s=5)
    health.watch({Dependency.DATABASE: counted})
    waiting = [asyncio.ensure_future(health.ready()) for _ in range(20)]
    await asyncio.sleep(0)
    gate.set()
    answers = await asyncio.gather(*waiting)
    assert calls == 1
    assert {orjson.dumps(a) for a in answers} == {
        orjson.dumps((200, {"status": "ready", "database": True}))
    }


async def test_the_console_answers_probes_before_its_app() -> None:
    """No session, no token: the app behind (which would ask for them) never sees
    `/livez` or `/readyz`; every other path is the app's."""
    app = Starlette(routes=[Route("/console/", lambda r: PlainTextResponse("console"))])
    health = Health()
    health.watch({Dependency.DATABASE: _yes})
    transport = httpx.ASGITransport(app=Probes(app, health))
    async with httpx.AsyncClient(transport=transport, base_url="http://console") as client:
        ready = await client.get("/readyz")
        assert (ready.status_code, ready.json()) == (200, {"status": "ready", "database": True})
        assert ready.headers["cache-control"] == "no-store"
        assert (await client.get("/livez")).json() == {"status": "alive"}
        head = await client.head("/livez")
        assert (head.status_code, head.content) == (200, b"")
        posted = await client.post("/readyz")
        assert (posted.status_code, posted.headers["allow"]) == (405, "GET, HEAD")
        assert (await client.get("/console/")).text == "console"
