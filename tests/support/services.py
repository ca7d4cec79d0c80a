"""Real services for tests: per-test PostgreSQL databases, Redis, free ports, waiting.

Every test gets its own database (cloned from a migrated template) and, where it needs
NATS, its own nats-server process (`tests/support/nats.py`, on a port from here), so
runs never collide and a test may stop and restart its server without touching anyone
else.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import itertools
import os
import socket
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import asyncpg
import httpx

ADMIN_DSN = os.environ.get("TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")


def xdist_worker_index() -> int | None:
    """This pytest-xdist worker's number (`gw3` is 3), None outside a worker."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    return int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else None


def worker_redis_url(base: str) -> str:
    """`base` with the Redis database of this xdist worker: worker N uses database N + 1
    (Redis has 16: 0 stays the default of runs without workers, and of development), so
    no worker ever reads a rate another one cached, whatever key prefix a test forgot."""
    index = xdist_worker_index()
    if index is None:
        return base
    head, slash, db = base.rpartition("/")
    if not slash or "//" not in head or not db.isdigit():
        head = base.rstrip("/")  # no database in the URL: Redis's default is 0
    return f"{head}/{index % 15 + 1}"


REDIS_URL = worker_redis_url(os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0"))

T = TypeVar("T")

# Ports for test servers come from a block of this process's own, below the kernel's
# ephemeral range. A port the kernel hands out for `bind(0)` and which is then closed
# (to be passed to a server started later) may be handed to another worker or run in
# between, and the ephemeral range is where every outgoing connection (to PostgreSQL,
# NATS, Redis) takes its source port: so neither is used. A block is leased with an
# advisory lock on a file (released when the process ends, however it ends), so no two
# processes (xdist workers, concurrent runs, a benchmark beside the suite) share one.
PORT_BLOCK_SIZE = 200
PORT_FLOOR = 10_000
_PORT_LOCK_DIR = Path(tempfile.gettempdir()) / "gateway-test-ports"
_leased: list[tuple[range, int]] = []  # (ports, fd of the lock file held for the process)
_next_port: list[itertools.cycle[int]] = []


def _ephemeral_floor() -> int:
    """The lowest port of the kernel's ephemeral range (32768 where unreadable)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        text = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text(encoding="ascii")
        return int(text.split()[0])
    return 32768


def _lease_block() -> range:
    """Lock the first free block of ports (after those this process holds) for good."""
    _PORT_LOCK_DIR.mkdir(parents=True, exist_ok=True)
    top = _ephemeral_floor()
    if top < PORT_FLOOR + 8 * PORT_BLOCK_SIZE:  # an ephemeral range reaching down low
        top = 65_000  # then the leases alone keep processes apart
    blocks = (top - PORT_FLOOR) // PORT_BLOCK_SIZE
    held = {ports.start for ports, _ in _leased}
    index = xdist_worker_index() or 0
    for k in itertools.chain(range(index, blocks), range(index)):  # a worker's own first
        start = PORT_FLOOR + k * PORT_BLOCK_SIZE
        if start in held:
            continue
        fd = os.open(_PORT_LOCK_DIR / f"{start}.lock", os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        os.set_inheritable(fd, False)
        ports = range(start, start + PORT_BLOCK_SIZE)
        _leased.append((ports, fd))
        return ports
    raise RuntimeError(f"every block of test ports from {PORT_FLOOR} to {top} is leased")


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def free_port() -> int:
    """A TCP port on 127.0.0.1 nothing listens on, and which no other process of the
    suite will be given: the next one of this process's leased block (see above) that
    can be bound now. A block is walked round before a port comes again."""
    if not _next_port:
        _next_port.append(itertools.cycle(_lease_block()))
    for _ in range(PORT_BLOCK_SIZE):
        port = next(_next_port[0])
        if _bindable(port):
            return port
    _next_port[0] = itertools.cycle(_lease_block())  # every port of the block is busy
    return free_port()


def dsn_for(database: str) -> str:
    """The DSN of `database` on the test server."""
    base, _, _ = ADMIN_DSN.rpartition("/")
    return f"{base}/{database}"


async def create_database(name: str, template: str | None = None) -> str:
    """Create a database (optionally from a template); return its DSN."""
    conn = await asyncpg.connect(ADMIN_DSN)
    try:
        tmpl = f" TEMPLATE {template}" if template else ""
        await conn.execute(f'CREATE DATABASE "{name}"{tmpl}')
    finally:
        await conn.close()
    return dsn_for(name)


async def drop_database(name: str) -> None:
    """Drop a database, disconnecting whoever still uses it."""
    conn = await asyncpg.connect(ADMIN_DSN)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


def unique_name(prefix: str) -> str:
    """A name no other run will pick: prefix, pid and random hex."""
    return f"{prefix}_{os.getpid()}_{uuid.uuid4().hex[:10]}"


def wait_for_port(port: int, timeout_s: float) -> None:
    """Block until 127.0.0.1:port accepts connections, or raise."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with socket.socket() as s:
            s.settimeout(0.2)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.02)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout_s} s")


async def wait_until(
    predicate: Callable[[], Awaitable[T]], timeout_s: float = 10.0, interval_s: float = 0.05
) -> T:
    """Poll an async predicate until it returns a truthy value; return it, or fail."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = await predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout_s} s (last value {value!r})")
        await asyncio.sleep(interval_s)


async def wait_ready(client: httpx.AsyncClient, timeout_s: float = 30.0) -> None:
    """Wait until the gateway `client` points at answers `/readyz` with 200."""

    async def ready() -> bool:
        try:
            return (await client.get("/readyz")).status_code == 200
        except httpx.TransportError:
            return False

    await wait_until(ready, timeout_s=timeout_s)


async def stream_messages(
    nats_url: str, stream: str = "WEBHOOKS"
) -> list[tuple[str, dict[str, str], bytes]]:
    """Every message in the stream as (subject, headers, data), read from JetStream."""
    import nats
    import nats.errors

    nc = await nats.connect(nats_url)
    try:
        js = nc.jetstream()
        info = await js.stream_info(stream)
        found: list[tuple[str, dict[str, str], bytes]] = []
        if info.state.messages == 0:
            return found
        for seq in range(info.state.first_seq, info.state.last_seq + 1):
            try:
                msg = await js.get_msg(stream, seq)
            except nats.js.errors.NotFoundError:
                continue
            assert msg.subject is not None, f"stream {stream} seq {seq} came without a subject"
            found.append((msg.subject, dict(msg.headers or {}), msg.data or b""))
        return found
    finally:
        await nc.close()
