"""The forwarding target's edge against real sockets: a target that answers too slowly,
trickles its answer, answers with a huge body, redirects, or is not there at all costs
one bounded attempt and an `Answer` saying which, never an exception or a wait past the
timeout."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from gateway.adapters.http_target import EXCERPT_BYTES, HttpTarget
from gateway.core.forward.retry import Answer
from tests.support.services import free_port

Reply = Callable[[asyncio.StreamWriter], Awaitable[None]]


@contextlib.asynccontextmanager
async def raw_server(reply: Reply) -> AsyncIterator[str]:
    """An HTTP/1.1 server written by hand: it reads a request, then `reply` writes."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                int(line.split(b":")[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length")
            )
            await reader.readexactly(length)
            await reply(writer)
        writer.close()

    port = free_port()
    server = await asyncio.start_server(handle, "127.0.0.1", port)
    try:
        yield f"http://127.0.0.1:{port}/hooks"
    finally:
        server.close()


def target(url: str, timeout_s: float = 0.5) -> HttpTarget:
    return HttpTarget(url, timeout_s=timeout_s, verify_tls=True, max_connections=2)


async def post(url: str, timeout_s: float = 0.5) -> tuple[Answer, float, bytes]:
    t = target(url, timeout_s)
    try:
        started = time.monotonic()
        attempted = await t.post(b'{"id": "evt_1"}', {"content-type": "application/json"})
        return attempted.answer, time.monotonic() - started, attempted.excerpt
    finally:
        await t.close()


async def test_a_target_slower_than_the_timeout_is_a_timeout() -> None:
    async def never(writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(10)

    async with raw_server(never) as url:
        answer, took_s, _ = await post(url)
    assert answer.status is None and "timeout" in answer.error
    assert took_s < 2.0


async def test_an_answer_trickled_past_the_timeout_is_cut_off() -> None:
    """Each byte comes within httpx's per-read timeout; the attempt as a whole does not."""

    async def trickle(writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n")
        for _ in range(100):
            writer.write(b"x")
            await writer.drain()
            await asyncio.sleep(0.1)

    async with raw_server(trickle) as url:
        answer, took_s, _ = await post(url)
    assert answer.status is None and "whole attempt" in answer.error
    assert took_s < 2.0


async def test_a_huge_answer_is_read_only_as_far_as_its_excerpt() -> None:
    size = 50 * 1024 * 1024

    async def huge(writer: asyncio.StreamWriter) -> None:
        writer.write(f"HTTP/1.1 500 Oops\r\nContent-Length: {size}\r\n\r\n".encode())
        chunk = b"e" * 65536
        with contextlib.suppress(ConnectionError):
            for _ in range(size // len(chunk)):
                writer.write(chunk)
                await writer.drain()

    async with raw_server(huge) as url:
        answer, took_s, excerpt = await post(url, timeout_s=5.0)
    assert answer.status == 500
    assert excerpt == b"e" * EXCERPT_BYTES
    assert took_s < 4.0


async def test_a_redirect_is_an_answer_not_followed() -> None:
    async def redirect(writer: asyncio.StreamWriter) -> None:
        writer.write(
            b"HTTP/1.1 302 Found\r\nLocation: http://169.254.169.254/\r\nContent-Length: 0\r\n\r\n"
        )

    async with raw_server(redirect) as url:
        answer, _, _ = await post(url)
    assert answer.status == 302


async def test_no_target_is_no_answer() -> None:
    answer, _, _ = await post(f"http://127.0.0.1:{free_port()}/hooks")
    assert answer.status is None
    assert answer.error == "no answer (ConnectError)"


@pytest.mark.parametrize("header", ["9" * 400, "Wed, 99 Foo 2026", "-1"])
async def test_a_forged_retry_after_is_read_without_error(header: str) -> None:
    async def busy(writer: asyncio.StreamWriter) -> None:
        writer.write(
            f"HTTP/1.1 429 Busy\r\nRetry-After: {header}\r\nContent-Length: 0\r\n\r\n".encode()
        )

    async with raw_server(busy) as url:
        answer, _, _ = await post(url)
    assert answer.status == 429 and answer.retry_after == header
