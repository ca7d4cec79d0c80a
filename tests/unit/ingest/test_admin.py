"""The admin listener (`[http] admin_port`): `/metrics` and `/readyz` served on an
address of their own and no longer on the public port, through the real `GatewayApp`
lifespan with in-memory fakes and a real loopback socket."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator

import pytest

from gateway.settings import Settings
from tests.unit.ingest.test_endpoints import (
    STRIPE_BODY,
    Gateway,
    call,
    lifespan,
    make_settings,
    post,
    stripe,
)

#: `/readyz`'s durability where the database probe reads none (the fakes').
NOT_READ = {"state": "unknown", "synchronous_standbys": 0, "reason": "not_read"}


def free_port() -> int:
    """A port of this worker's own (`tests.support.services.free_port`): a port bound
    to 0 and closed could be handed to another xdist worker before the admin binds it."""
    from tests.support import services

    return services.free_port()


def with_admin(port: int) -> Settings:
    settings = make_settings()
    return dataclasses.replace(settings, http=dataclasses.replace(settings.http, admin_port=port))


async def fetch(port: int, method: str, path: str) -> tuple[int, dict[str, str], bytes]:
    """One request on its own connection, as a scraper sends it: status, headers, body."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"{method} {path} HTTP/1.1\r\nHost: admin\r\n\r\n".encode())
    raw = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    status_line, *lines = head.decode().split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    assert int(headers["content-length"]) == len(body)
    return int(status_line.split()[1]), headers, body


@pytest.fixture
async def admin_gw() -> AsyncIterator[tuple[Gateway, int]]:
    port = free_port()
    gateway = Gateway(with_admin(port))
    async with lifespan(gateway.app):
        yield gateway, port


async def test_metrics_are_served_on_the_admin_port_only(admin_gw: tuple[Gateway, int]) -> None:
    """The admin port renders the same metrics; the public port answers 404 for them."""
    gw, port = admin_gw
    assert (await post(gw, stripe(STRIPE_BODY))).status == 200
    status, headers, body = await fetch(port, "GET", "/metrics")
    assert status == 200
    assert headers["content-type"] == "text/plain; version=0.0.4"
    assert 'gateway_webhooks_total{outcome="accepted",provider="stripe"} 1' in body.decode()
    assert (await call(gw.app, "GET", "/metrics")).status == 404


@pytest.mark.parametrize(("database", "nats", "status"), [(True, True, 200), (True, False, 503)])
async def test_readyz_is_served_on_the_admin_port_only(
    admin_gw: tuple[Gateway, int], database: bool, nats: bool, status: int
) -> None:
    """`/readyz` on the admin port says what it says on the public one without it."""
    gw, port = admin_gw
    gw.database.up, gw.broker.up = database, nats
    got, _, body = await fetch(port, "GET", "/readyz?verbose=1")
    assert got == status
    expected = "ready" if status == 200 else "not_ready"
    doc = json.loads(body)
    assert doc == {"status": expected, "database": database, "nats": nats, "durability": NOT_READ}
    assert (await call(gw.app, "GET", "/readyz")).status == 404
    assert (await call(gw.app, "GET", "/healthz")).status == 200  # liveness stays public


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [("GET", "/webhooks/stripe", 404), ("GET", "/", 404), ("POST", "/metrics", 405)],
)
async def test_the_admin_port_serves_nothing_else(
    admin_gw: tuple[Gateway, int], method: str, path: str, status: int
) -> None:
    gw, port = admin_gw
    assert (await fetch(port, method, path))[0] == status
    assert gw.inbox.offered == []


async def test_the_admin_port_closes_with_the_gateway() -> None:
    """Nothing listens on the admin port once the lifespan has ended."""
    port = free_port()
    gw = Gateway(with_admin(port))
    async with lifespan(gw.app):
        assert (await fetch(port, "GET", "/metrics"))[0] == 200
    with pytest.raises(OSError):
        await asyncio.open_connection("127.0.0.1", port)


async def test_without_an_admin_port_nothing_more_listens() -> None:
    """Off by default: the public port keeps serving /metrics and /readyz."""
    gw = Gateway(make_settings())
    assert gw.settings.http.admin_port == 0
    async with lifespan(gw.app):
        assert (await call(gw.app, "GET", "/metrics")).status == 200
        assert (await call(gw.app, "GET", "/readyz")).status == 200


async def raw_exchange(port: int, data: bytes) -> bytes:
    """Send `data` as it is and read until the listener closes the connection."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(data)
        await writer.drain()
    except ConnectionError:
        pass  # closed while we were still sending: what an oversized head earns
    try:
        return await asyncio.wait_for(reader.read(), 5)
    except ConnectionError:
        return b""
    finally:
        writer.close()


async def test_a_head_over_the_reader_limit_is_closed_unanswered(
    admin_gw: tuple[Gateway, int],
) -> None:
    """A request head bigger than 64 KiB gets no answer, and the listener goes on."""
    _, port = admin_gw
    flood = b"GET /metrics HTTP/1.1\r\nX-Pad: " + b"A" * 200_000 + b"\r\n\r\n"
    assert await raw_exchange(port, flood) == b""
    status, _, _ = await fetch(port, "GET", "/metrics")
    assert status == 200


async def test_a_stalled_head_is_closed_after_the_head_timeout(
    admin_gw: tuple[Gateway, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client that never finishes its head is disconnected, unanswered."""
    monkeypatch.setattr("gateway.metrics.listener.HEAD_TIMEOUT_S", 0.2)
    _, port = admin_gw
    assert await raw_exchange(port, b"GET /metrics HTTP/1.1\r\nHost: a") == b""


async def test_a_malformed_head_gets_a_404(admin_gw: tuple[Gateway, int]) -> None:
    """A head that is not HTTP names no known path: 404, never a crash."""
    _, port = admin_gw
    answer = await raw_exchange(port, b"\x00\xff garbage\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 404 ")


async def test_connections_over_the_cap_are_closed_and_the_listener_recovers(
    admin_gw: tuple[Gateway, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the cap held by stalled clients a further connection is closed unanswered;
    once they leave, scrapes are served again."""
    monkeypatch.setattr("gateway.metrics.listener.MAX_CONNECTIONS", 3)
    _, port = admin_gw
    stalled = [await asyncio.open_connection("127.0.0.1", port) for _ in range(3)]
    for _, writer in stalled:
        writer.write(b"GET /metrics HTTP/1.1\r\nHost: a")
        await writer.drain()
    await asyncio.sleep(0.2)  # let the listener take all three
    assert await raw_exchange(port, b"GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n") == b""
    for _, writer in stalled:
        writer.close()
    await asyncio.sleep(0.2)
    status, _, _ = await fetch(port, "GET", "/metrics")
    assert status == 200
