"""`http_answers` (the currency-service's probe, for `/readyz` and the automatic re-drive)
is bounded as a whole: a server that drips its answer a byte at a time, each within
httpx's per-read timeout, is not waited out."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import httpx
import pytest

from gateway.adapters.currency_probe import currency_answers
from gateway.adapters.http_probe import http_answers

ANSWER = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
#: Each byte well within the probe's deadline; the whole answer far past it.
DRIP_S = 0.1


@pytest.fixture
async def dripping() -> AsyncIterator[str]:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            for byte in ANSWER:
                writer.write(bytes([byte]))
                await writer.drain()
                await asyncio.sleep(DRIP_S)
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.close()


async def test_an_answer_dripped_past_the_deadline_is_no_answer(dripping: str) -> None:
    async with httpx.AsyncClient() as http:
        started = time.monotonic()
        assert await http_answers(http, f"{dripping}/", timeout_s=0.5) is False
        assert time.monotonic() - started < 2.0  # the answer would take ~6 s


async def test_the_re_drives_currency_probe_has_the_same_bound(dripping: str) -> None:
    async with httpx.AsyncClient() as http:
        started = time.monotonic()
        assert await currency_answers(http, dripping, "USD", timeout_s=0.5) is False
        assert time.monotonic() - started < 2.0
