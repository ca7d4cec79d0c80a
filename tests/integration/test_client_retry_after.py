"""The bundled `Publisher` against a real (tiny) HTTP server that answers 503 with
`Retry-After`, as the gateway does: the client waits as long as it is asked, in seconds
or until an HTTP-date, and gives up at once when the wait would pass its deadline."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from gateway.client import Publisher, PublishUnavailable

Answer = tuple[int, dict[str, str], bytes]
ACCEPTED: Answer = (200, {}, b'{"status":"accepted","event_id":"k1"}')


@dataclass
class ScriptedServer:
    """Answers each POST with the next scripted (status, headers, body); records when."""

    answers: list[Answer]
    arrived_at: list[float] = field(default_factory=list)
    port: int = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.decode("latin-1").split("\r\n"):
            name, _, value = line.partition(":")
            if name.lower() == "content-length":
                length = int(value)
        await reader.readexactly(length)
        self.arrived_at.append(time.monotonic())
        status, headers, body = self.answers.pop(0)
        lines = [f"HTTP/1.1 {status} X", f"Content-Length: {len(body)}", "Connection: close"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        await writer.drain()
        writer.close()

    @property
    def gaps_s(self) -> list[float]:
        return [b - a for a, b in zip(self.arrived_at, self.arrived_at[1:], strict=False)]


@asynccontextmanager
async def serving(*answers: Answer) -> AsyncIterator[ScriptedServer]:
    server = ScriptedServer(list(answers))
    listener = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    server.port = listener.sockets[0].getsockname()[1]
    async with listener:
        yield server


def publisher(server: ScriptedServer, deadline_s: float = 60.0) -> Publisher:
    # Backoff alone would wait at most a few milliseconds: any longer wait is Retry-After's.
    return Publisher(
        f"http://127.0.0.1:{server.port}",
        "t",
        deadline_s=deadline_s,
        base_delay_s=0.001,
        max_delay_s=0.01,
    )


async def test_retry_after_seconds_is_waited_for() -> None:
    retry = {"Retry-After": "1"}
    async with serving((503, retry, b"{}"), ACCEPTED) as server, publisher(server) as pub:
        result = await pub.publish("payment.captured", {}, key="k1")
    assert result.status == "accepted"
    (gap,) = server.gaps_s
    assert 0.95 <= gap < 2.0


async def test_retry_after_http_date_is_waited_for() -> None:
    # HTTP-dates have whole seconds: 2 s ahead is between 1 and 2 s from now.
    when = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=2)
    retry = {"Retry-After": format_datetime(when, usegmt=True)}
    async with serving((429, retry, b"{}"), ACCEPTED) as server, publisher(server) as pub:
        await pub.publish("payment.captured", {}, key="k1")
    (gap,) = server.gaps_s
    assert 0.9 <= gap < 2.5


async def test_a_wait_past_the_deadline_gives_up_at_once() -> None:
    retry = {"Retry-After": "30"}
    async with (
        serving((503, retry, b"{}"), ACCEPTED) as server,
        publisher(server, deadline_s=3.0) as pub,
    ):
        started = time.monotonic()
        with pytest.raises(PublishUnavailable, match=r"HTTP 503.*3 s deadline"):
            await pub.publish("payment.captured", {}, key="k1")
    assert time.monotonic() - started < 1.0
    assert len(server.arrived_at) == 1


async def test_without_retry_after_the_backoff_applies() -> None:
    answers: list[Answer] = [(503, {}, b"{}"), (502, {}, b"{}"), ACCEPTED]
    async with serving(*answers) as server, publisher(server) as pub:
        await pub.publish("payment.captured", {}, key="k1")
    assert len(server.gaps_s) == 2
    assert all(gap < 0.5 for gap in server.gaps_s)
