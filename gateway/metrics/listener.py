"""The minimal `/metrics` (and admin) listener of processes without a web server of
their own, or beside the public one: HTTP/1.0-style, one request per connection."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import http
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

import orjson

from gateway.core.health.readiness import Readiness, liveness
from gateway.errors import ConfigError

#: The Prometheus text exposition's content type.
METRICS_TYPE = "text/plain; version=0.0.4"
#: A request head must arrive within this long; an idle connection is closed after it.
HEAD_TIMEOUT_S = 5.0
#: Connections served at once; more are closed unanswered. Scrapers and probes open one
#: or two at a time, so this only bounds what a flood of sockets can hold.
MAX_CONNECTIONS = 64

#: Answers one request (method, path) with (status, content type, body).
Answer = Callable[[str, str], Awaitable[tuple[int, str, bytes]]]
_JSON_TYPE = "application/json"


class Rendered(Protocol):
    """What the listener serves as the metrics (`Metrics`, or a stand-in for it)."""

    def render(self) -> str: ...


async def serve_plain_http(
    answer: Answer, host: str, port: int, *, setting: str, reuse_port: bool = False
) -> asyncio.Server:
    """A minimal one-request-per-connection HTTP listener for scrapers and probes.

    The head must arrive within `HEAD_TIMEOUT_S` and fit the stream reader's 64 KiB
    limit, and at most `MAX_CONNECTIONS` are served at once; anything else closes the
    connection without an answer. An address that cannot be listened on (a port already
    taken, most often) raises `ConfigError` naming `setting`, the key that chose it.
    """
    active = 0

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal active
        if active >= MAX_CONNECTIONS:
            writer.close()
            return
        active += 1
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT_S)
            method, _, rest = head.decode("latin-1").partition(" ")
            path = rest.partition(" ")[0].partition("?")[0]
            status, content_type, body = await answer(method, path)
            writer.write(
                f"HTTP/1.1 {status} {http.HTTPStatus(status).phrase}\r\n"
                f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
                "Connection: close\r\n\r\n".encode("latin-1")
                + body
            )
            await asyncio.wait_for(writer.drain(), HEAD_TIMEOUT_S)  # a reader that reads none
        except (OSError, TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass  # the client left, stalled or sent more head than a GET needs
        finally:
            active -= 1
            writer.close()

    try:
        return await asyncio.start_server(serve, host, port, reuse_port=reuse_port)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            problem = f"port {port} is already in use on {host} (choose another, or 0 for off)"
        else:
            problem = f"cannot listen on {host}:{port}: {exc.strerror or exc}"
        raise ConfigError(setting, problem) from None


@dataclass(frozen=True)
class ListenAddress:
    """Where a process serves `/metrics` (port 0: nowhere), and the setting or flag that
    chose it, for the error when it cannot."""

    host: str
    port: int
    setting: str


@contextlib.asynccontextmanager
async def metrics_listener(
    metrics: Rendered, address: ListenAddress, health: Readiness | None = None
) -> AsyncIterator[asyncio.Server | None]:
    """For the block, serve on `address` the listener of the processes without a web
    server of their own (`settle`, `relay`, `forward`, `dlq run-jobs`): `/livez` (200
    while the event loop runs), `/readyz` with `health` (404 without), and the metrics
    on any other GET path, `/metrics` included."""
    if not address.port:
        yield None
        return

    async def answer(method: str, path: str) -> tuple[int, str, bytes]:
        if path == "/livez":
            # Answered by the loop the process's work runs on: answering is the check.
            status, body = liveness()
            return status, _JSON_TYPE, orjson.dumps(body)
        if path == "/readyz":
            if health is None:
                return 404, _JSON_TYPE, b'{"error":"not_found"}'
            status, body = await health.ready()
            return status, _JSON_TYPE, orjson.dumps(body)
        return 200, METRICS_TYPE, metrics.render().encode()

    server = await serve_plain_http(answer, address.host, address.port, setting=address.setting)
    try:
        yield server
    finally:
        server.close()
