"""The console's server holds `serve`'s edge: a head that never finishes is cut off, a
head over the budget is refused `431`, and past `[console] max_connections` a request is
answered `503`; a genuine request is served throughout. Raw sockets on loopback against
a console under uvicorn, with short deadlines; no lower bound on a wait is asserted."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import replace

import httpx
import pytest

from gateway.wiring.console import uvicorn_options
from tests.support.console import console_settings
from tests.support.services import free_port

HEADER_TIMEOUT_S = 1.0
SLACK_S = 10.0


@pytest.fixture
async def console(database_url: str) -> AsyncIterator[int]:
    """A console on its own port: 1 s head deadline, 4 KiB heads, 3 connections."""
    import uvicorn

    from gateway.adapters.postgres import create_pool
    from gateway.console.app import build_app
    from gateway.console.web import ConsoleDeps
    from gateway.wiring.console import LedgerBooks

    settings = console_settings(database_url, max_connections=3)
    http = replace(settings.http, header_timeout_s=HEADER_TIMEOUT_S, max_header_bytes=4096)
    settings = replace(settings, http=http)
    pool = await create_pool(database_url, max_size=3)
    port = free_port()
    deps = ConsoleDeps(pool=pool, settings=settings, books=LedgerBooks(settings, pool))
    server = uvicorn.Server(
        uvicorn.Config(build_app(deps), **uvicorn_options(settings, "127.0.0.1", port))
    )
    task = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.05)
    try:
        yield port
    finally:
        server.should_exit = True
        await task
        await pool.close()


async def read_all(reader: asyncio.StreamReader) -> bytes:
    return await asyncio.wait_for(reader.read(), timeout=SLACK_S)


async def answered(port: int) -> int:
    async with httpx.AsyncClient() as client:
        return (await client.get(f"http://127.0.0.1:{port}/console/login")).status_code


async def test_a_head_that_never_finishes_is_cut_off(console: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", console)
    writer.write(b"GET /console/login HTTP/1.1\r\nHost: console\r\nX-Slow: ")
    await writer.drain()
    started = time.monotonic()
    answer = await read_all(reader)
    assert answer.startswith(b"HTTP/1.1 408"), answer[:80]
    assert time.monotonic() - started < HEADER_TIMEOUT_S + SLACK_S
    writer.close()
    assert await answered(console) == 200


async def test_a_head_over_the_budget_is_refused_whole(console: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", console)
    writer.write(b"GET /console/login HTTP/1.1\r\nHost: console\r\nX-Big: " + b"a" * 100_000)
    await writer.drain()
    answer = await read_all(reader)
    assert answer.startswith(b"HTTP/1.1 431"), answer[:80]
    writer.close()


async def test_past_the_connection_cap_a_request_is_503(console: int) -> None:
    """Three connections held open with a request each still being read: a fourth is
    answered 503 at once; once they are gone, the console serves again."""
    held = []
    for _ in range(3):
        reader, writer = await asyncio.open_connection("127.0.0.1", console)
        writer.write(b"POST /console/login HTTP/1.1\r\nHost: c\r\nContent-Length: 100\r\n\r\n")
        await writer.drain()
        held.append((reader, writer))
    await asyncio.sleep(0.2)
    assert await answered(console) == 503
    for _, writer in held:
        writer.close()
    await asyncio.sleep(0.5)
    assert await answered(console) == 200
