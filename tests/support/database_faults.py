"""Database hosts that fail the way a lost database machine does, for the multi-host
tests: each is a `chaos.proxy.FaultProxy` (its `listen` is the "host:port" to put in a
URL), started on entry and closed on exit.

- `with_hosts(dsn, *hosts)`: a DSN with more hosts listed before its own.
- `dead_address()`: a "host:port" where nothing listens: connections are refused at once.
- `black_hole()`: accepts TCP connections and never says a word, as a peer that is stuck
  (or a load balancer whose backend is gone); the client waits for the server's first
  message until its own timeout. `connections` counts the connections it saw,
  `clients_left` those the client closed.
- `database_proxy()`: forwards to the shared PostgreSQL until `set_blackhole(True)`,
  then goes silent on every connection, old and new, without closing any: a primary
  whose machine vanished under established connections. `connections` counts them.
- `slow_proxy(delay_s)`: forwards to the shared PostgreSQL, its answers `delay_s` late
  (the client's bytes go through at once, so the server has the session while the
  client still waits for its login's answer): a server that is up but slow to log in (a
  loaded machine, one far away). Either side closing closes the other, as on one real
  connection: a client that gives up ends the server's session.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from chaos.proxy import FaultProxy
from tests.support.services import ADMIN_DSN, free_port


def with_hosts(dsn: str, *hosts: str) -> str:
    """`dsn` (`postgresql://user@host:port/db?...`) with `hosts` listed before its own."""
    scheme, _, rest = dsn.partition("://")
    user, at, address = rest.partition("@")
    if not at:
        user, address = "", rest
    return f"{scheme}://{user}{at}{','.join(hosts)},{address}"


def dead_address() -> str:
    """`127.0.0.1:PORT` where nothing listens: connections are refused at once."""
    return f"127.0.0.1:{free_port()}"


@contextlib.asynccontextmanager
async def _running(proxy: FaultProxy) -> AsyncIterator[FaultProxy]:
    await proxy.start()
    try:
        yield proxy
    finally:
        await proxy.close()


def _shared_database() -> tuple[str, int]:
    """The shared PostgreSQL's host and port, from `ADMIN_DSN`."""
    host_port = ADMIN_DSN.partition("@")[2].partition("/")[0]
    host, _, port = host_port.rpartition(":")
    return host, int(port)


@contextlib.asynccontextmanager
async def black_hole() -> AsyncIterator[FaultProxy]:
    """A host that accepts and never answers (a black hole before any connection; its
    upstream is a dead address, never reached)."""
    host, _, port = dead_address().rpartition(":")
    proxy = FaultProxy(host, int(port), name="black-hole")
    await proxy.set_blackhole(True)
    async with _running(proxy):
        yield proxy


@contextlib.asynccontextmanager
async def database_proxy() -> AsyncIterator[FaultProxy]:
    """A proxy to the shared PostgreSQL; `await proxy.set_blackhole(True)` silences it."""
    async with _running(FaultProxy(*_shared_database(), name="database")) as proxy:
        yield proxy


@contextlib.asynccontextmanager
async def slow_proxy(delay_s: float) -> AsyncIterator[FaultProxy]:
    """A proxy to the shared PostgreSQL whose answers come `delay_s` late."""
    async with database_proxy() as proxy:
        proxy.add_toxic("latency", "downstream", latency=delay_s * 1000)
        yield proxy
