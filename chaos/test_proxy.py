"""The fault proxy itself: each toxic does what Toxiproxy's does, per direction, and the
HTTP API drives it the way a Toxiproxy client would."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import httpx
import pytest

from chaos.api import ToxiproxyClient, serving
from chaos.proxy import FaultProxy


class Echo:
    """An upstream that echoes what it gets and remembers each recv()."""

    def __init__(self) -> None:
        self.received: list[tuple[float, bytes]] = []
        self.server: asyncio.Server | None = None
        self.port = 0
        self.connections: list[asyncio.StreamWriter] = []

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    async def _serve(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        self.connections.append(w)
        try:
            while data := await r.read(65536):
                self.received.append((time.monotonic(), data))
                w.write(data)
                await w.drain()
        except OSError:
            pass
        finally:
            w.close()

    def drop_connections(self) -> None:
        """Reset every connection, as a killed server's kernel would."""
        for w in self.connections:
            w.transport.abort()

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()


@pytest.fixture
async def echo() -> AsyncIterator[Echo]:
    server = Echo()
    await server.start()
    yield server
    await server.close()


@pytest.fixture
async def proxy(echo: Echo) -> AsyncIterator[FaultProxy]:
    p = FaultProxy("127.0.0.1", echo.port, name="echo")
    await p.start()
    yield p
    await p.close()


async def connect(proxy: FaultProxy) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", proxy.listen_port)


async def round_trip(proxy: FaultProxy, data: bytes = b"ping") -> tuple[float, bytes]:
    r, w = await connect(proxy)
    started = time.monotonic()
    w.write(data)
    await w.drain()
    got = await asyncio.wait_for(r.readexactly(len(data)), 10)
    w.close()
    return time.monotonic() - started, got


async def test_latency_with_jitter_delays_each_direction_it_is_set_on(proxy: FaultProxy):
    """Latency set downstream delays answers by latency ± jitter; removed, it is gone."""
    # The delays are long so that the bounds on either side stay far apart on a busy
    # machine: a bare round trip has been seen to take 0.2 s under a loaded CI run.
    with proxy.toxic("latency", "downstream", latency=1000, jitter=50):
        elapsed, got = await round_trip(proxy)
    assert got == b"ping" and 0.94 <= elapsed < 3.0
    elapsed, _ = await round_trip(proxy)
    assert elapsed < 0.5
    with proxy.toxic("latency", "upstream", latency=600):
        elapsed, _ = await round_trip(proxy)
    assert 0.59 <= elapsed < 2.5


async def test_latency_applies_to_an_open_connection_and_pipelines(proxy: FaultProxy):
    """A toxic added to an open connection acts at once; chunks behind each other are not
    delayed twice."""
    r, w = await connect(proxy)
    proxy.add_toxic("latency", "downstream", latency=500)
    started = time.monotonic()
    for i in range(5):
        w.write(b"x%d" % i)
        await w.drain()
        await asyncio.sleep(0.02)
    got = await asyncio.wait_for(r.readexactly(10), 5)
    assert got == b"x0x1x2x3x4"
    assert time.monotonic() - started < 1.6  # 2.5 s (5 x 500 ms) if chunks were serialised
    w.close()


async def test_timeout_is_a_black_hole_then_closes(proxy: FaultProxy, echo: Echo):
    r, w = await connect(proxy)
    proxy.add_toxic("timeout", "upstream", timeout=400)
    w.write(b"lost")
    await w.drain()
    started = time.monotonic()
    assert await asyncio.wait_for(r.read(), 5) == b""  # closed, nothing came back
    assert 0.35 <= time.monotonic() - started < 1.5
    assert echo.received == []


async def test_timeout_zero_holds_until_removed(proxy: FaultProxy):
    r, w = await connect(proxy)
    proxy.add_toxic("timeout", "downstream", timeout=0)
    w.write(b"held")
    await w.drain()
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(r.read(1), 0.5)
    proxy.remove_toxic("timeout_downstream")
    w.write(b"next")
    await w.drain()
    assert await asyncio.wait_for(r.readexactly(4), 2) == b"next"  # the held data was dropped


async def test_reset_peer_resets_the_connection(proxy: FaultProxy):
    proxy.add_toxic("reset_peer", "upstream", timeout=100)
    r, w = await connect(proxy)
    w.write(b"hello")
    await w.drain()
    with pytest.raises((ConnectionResetError, asyncio.IncompleteReadError)):
        await asyncio.wait_for(r.readexactly(5), 5)


async def test_slicer_trickles_the_data_in_small_delayed_pieces(proxy: FaultProxy, echo: Echo):
    proxy.add_toxic("slicer", "upstream", average_size=10, size_variation=2, delay=50_000)
    elapsed, got = await round_trip(proxy, b"a" * 100)
    assert got == b"a" * 100
    assert len(echo.received) >= 7 and 0.3 <= elapsed < 2.0


async def test_limit_data_closes_after_the_limit(proxy: FaultProxy):
    proxy.add_toxic("limit_data", "downstream", bytes=10)
    r, w = await connect(proxy)
    w.write(b"0123456789abcdefghij")
    await w.drain()
    assert await asyncio.wait_for(r.read(), 5) == b"0123456789"


async def test_bandwidth_limits_throughput(proxy: FaultProxy):
    proxy.add_toxic("bandwidth", "downstream", rate=100)  # KB/s
    elapsed, _ = await round_trip(proxy, b"z" * 40_000)
    assert 0.3 <= elapsed < 2.0


async def test_toxicity_zero_leaves_connections_alone(proxy: FaultProxy):
    proxy.add_toxic("latency", "downstream", latency=5000, toxicity=0.0)
    elapsed, _ = await round_trip(proxy)
    assert elapsed < 2.5  # 5 s if the toxic had applied


async def test_disabled_cuts_open_connections_and_refuses_new_ones(proxy: FaultProxy):
    r, w = await connect(proxy)
    await proxy.set_enabled(False)
    with pytest.raises((ConnectionResetError, asyncio.IncompleteReadError, BrokenPipeError)):
        w.write(b"x")
        await w.drain()
        await asyncio.wait_for(r.readexactly(1), 2)
    r2, _ = await connect(proxy)
    assert await asyncio.wait_for(r2.read(), 2) == b""
    await proxy.set_enabled(True)
    assert (await round_trip(proxy))[1] == b"ping"


async def test_http_api_speaks_toxiproxys_routes(echo: Echo):
    async with serving() as (url, registry):
        client = ToxiproxyClient(url)
        created = await client.create_proxy("echo", f"127.0.0.1:{echo.port}")
        port = int(created["listen"].rpartition(":")[2])
        toxic = await client.add_toxic("echo", "latency", "downstream", latency=200, jitter=0)
        assert toxic == {
            "name": "latency_downstream",
            "type": "latency",
            "stream": "downstream",
            "toxicity": 1.0,
            "attributes": {"latency": 200.0, "jitter": 0.0},
        }
        listed = await client.proxies()
        assert listed["echo"]["toxics"] == [toxic] and listed["echo"]["enabled"] is True
        elapsed, _ = await round_trip(registry.get("echo"))
        assert elapsed >= 0.19
        await client.remove_toxic("echo", "latency_downstream")
        assert (await client.set_enabled("echo", False))["enabled"] is False
        r, _ = await asyncio.open_connection("127.0.0.1", port)
        assert await asyncio.wait_for(r.read(), 2) == b""
        await client.reset()
        assert (await client.proxies())["echo"]["enabled"] is True
        async with httpx.AsyncClient(base_url=url) as http:
            assert (await http.get("/proxies/nope")).json() == {
                "error": "proxy not found",
                "status": 404,
            }
            bad = await http.post("/proxies/echo/toxics", json={"type": "nope"})
            assert bad.status_code == 400
            twice = {"type": "latency", "attributes": {"latency": 1}}
            assert (await http.post("/proxies/echo/toxics", json=twice)).status_code == 200
            assert (await http.post("/proxies/echo/toxics", json=twice)).status_code == 409
            assert (await http.delete("/proxies/echo")).status_code == 204
        await client.aclose()


async def assert_silent(r: asyncio.StreamReader, for_s: float = 0.5) -> None:
    """Nothing arrives, and the connection is neither closed nor reset."""
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(r.read(1), for_s)


async def test_blackhole_swallows_open_links_even_when_the_upstream_dies(
    proxy: FaultProxy, echo: Echo
):
    """An open connection stops passing bytes either way, and the upstream's end (a dead
    server's RST) does not reach the client: it hears nothing at all."""
    r, w = await connect(proxy)
    w.write(b"ping")
    await w.drain()
    assert await asyncio.wait_for(r.readexactly(4), 2) == b"ping"
    await proxy.set_blackhole(True)
    assert proxy.to_json()["blackhole"] is True
    w.write(b"lost")
    await w.drain()
    await assert_silent(r)
    assert [data for _, data in echo.received] == [b"ping"]
    echo.drop_connections()
    await assert_silent(r)
    w.write(b"still nothing")
    await w.drain()
    await assert_silent(r)
    assert not r.at_eof()


async def test_blackhole_accepts_new_connections_and_holds_them_silent(
    proxy: FaultProxy, echo: Echo
):
    """A new connection is accepted but never reaches the upstream, and never hears back."""
    await proxy.set_blackhole(True)
    r, w = await connect(proxy)
    w.write(b"hello?")
    await w.drain()
    await assert_silent(r)
    assert echo.connections == [] and echo.received == []


async def test_blackhole_counts_connections_and_the_clients_that_left(echo: Echo) -> None:
    """`connections` counts every accepted connection; `clients_left` those held in the
    black hole that their client closed, not those the proxy cut when closed."""
    proxy = FaultProxy("127.0.0.1", echo.port, name="echo")
    await proxy.start()
    try:
        await proxy.set_blackhole(True)
        (_, leaving), (staying_r, _) = await connect(proxy), await connect(proxy)
        leaving.close()
        await leaving.wait_closed()
        deadline = time.monotonic() + 2
        while proxy.clients_left != 1:
            assert time.monotonic() < deadline, "the client's close was not counted"
            await asyncio.sleep(0.02)
        await assert_silent(staying_r, 0.2)
        assert proxy.connections == 2 and proxy.clients_left == 1
    finally:
        await proxy.close()
    with pytest.raises((ConnectionResetError, asyncio.IncompleteReadError)):
        await asyncio.wait_for(staying_r.readexactly(1), 2)
    await asyncio.sleep(0.1)  # the held connection's reader has seen its end
    assert proxy.connections == 2 and proxy.clients_left == 1
    assert echo.connections == []


async def test_the_end_of_a_blackhole_resets_what_lived_through_it(proxy: FaultProxy):
    """Bytes were dropped, so those streams are broken: reset. New connections pass."""
    before_r, before_w = await connect(proxy)
    before_w.write(b"x")
    await before_w.drain()
    assert await asyncio.wait_for(before_r.readexactly(1), 2) == b"x"
    await proxy.set_blackhole(True)
    held_r, _ = await connect(proxy)
    await assert_silent(held_r, 0.2)
    await proxy.set_blackhole(False)
    for r in (before_r, held_r):
        with pytest.raises((ConnectionResetError, asyncio.IncompleteReadError)):
            await asyncio.wait_for(r.readexactly(1), 2)
    assert (await round_trip(proxy))[1] == b"ping"


async def test_http_api_turns_the_blackhole_on_and_reset_turns_it_off(echo: Echo):
    async with serving() as (url, registry):
        client = ToxiproxyClient(url)
        await client.create_proxy("echo", f"127.0.0.1:{echo.port}")
        assert (await client.set_blackhole("echo", True))["blackhole"] is True
        r, _ = await connect(registry.get("echo"))
        await assert_silent(r)
        assert echo.connections == []
        await client.reset()
        listed = await client.proxies()
        assert listed["echo"]["blackhole"] is False and listed["echo"]["enabled"] is True
        assert (await round_trip(registry.get("echo")))[1] == b"ping"
        await client.aclose()
