"""`EdgeProtocol` fed bytes directly (no socket): where the head budget and the head
deadline fall, whichever way a head is split into reads."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest
import uvicorn
from uvicorn.server import ServerState

from gateway.ingest.edge import REFUSALS_STATE_KEY, EdgeProtocol
from gateway.metrics import Counter

LIMIT = 4096
TIMEOUT_S = 0.05


class FakeTransport(asyncio.Transport):
    """Collects what the protocol writes and whether it closed or half-closed."""

    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()
        self.closed = False
        self.eof = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 40000), "sockname": ("127.0.0.1", 8080)}.get(name)

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += data

    def write_eof(self) -> None:
        self.eof = True

    def can_write_eof(self) -> bool:
        return True

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


class Edge:
    """One connection: its protocol, transport, the paths the app saw, the counter."""

    def __init__(self, limit_concurrency: int | None = None) -> None:
        self.paths: list[str] = []

        async def app(scope: Any, receive: Any, send: Any) -> None:
            self.paths.append(scope["path"])
            while (await receive()).get("more_body"):
                pass
            await send({"type": "http.response.start", "status": 200, "headers": [
                (b"content-length", b"2")]})  # fmt: skip
            await send({"type": "http.response.body", "body": b"ok"})

        config = uvicorn.Config(app, log_config=None, limit_concurrency=limit_concurrency)
        config.load()
        self.refused = Counter("gateway_http_refused_total", "", ("reason",))
        self.transport = FakeTransport()
        self.protocol = EdgeProtocol(
            config=config,
            server_state=ServerState(),
            app_state={REFUSALS_STATE_KEY: self.refused},
            _loop=asyncio.get_running_loop(),
            max_header_bytes=LIMIT,
            header_timeout_s=TIMEOUT_S,
        )
        self.protocol.connection_made(self.transport)

    async def feed(self, *chunks: bytes) -> None:
        for chunk in chunks:
            self.protocol.data_received(chunk)
        for _ in range(5):  # let the app tasks run
            await asyncio.sleep(0)

    def status(self) -> int:
        return int(bytes(self.transport.written).split(b" ", 2)[1])


def request(head_pad: int, body: bytes = b"{}") -> bytes:
    """A POST whose head is padded by `head_pad` bytes of one header."""
    return (
        b"POST /webhooks/stripe HTTP/1.1\r\nHost: g\r\nContent-Length: %d\r\nX-Pad: %s\r\n\r\n"
        % (len(body), b"p" * head_pad)
    ) + body


def split(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


@pytest.mark.parametrize(
    ("data", "read_bytes", "refused"),
    [
        # A head well under the budget, whatever the reads.
        (request(100), 1 << 20, False),
        (request(100), 7, False),
        # Just under the budget, with a body that takes the read far past it: the body
        # is not head.
        (request(LIMIT - 200, b"x" * 60_000), 1 << 20, False),
        (request(LIMIT - 200, b"x" * 60_000), 1024, False),
        # Over the budget: found at the end of the head (one read) or before it (many).
        (request(LIMIT + 10), 1 << 20, True),
        (request(LIMIT + 10), 1024, True),
        (request(LIMIT * 4), 1, True),
        # Over the budget with no end in sight.
        (b"POST / HTTP/1.1\r\nX-Pad: " + b"a" * (LIMIT * 8), 1 << 20, True),
    ],
)
async def test_the_head_budget(data: bytes, read_bytes: int, refused: bool) -> None:
    """Over `max_header_bytes` of request line and headers: 431, half-closed, app not run;
    under it: served, however the bytes are split into reads."""
    edge = Edge()
    await edge.feed(*split(data, read_bytes))
    if refused:
        assert edge.paths == []
        assert edge.status() == 431
        assert edge.transport.eof
        _, _, body = bytes(edge.transport.written).partition(b"\r\n\r\n")
        assert orjson.loads(body)["error"] == "header_too_large"
        assert edge.refused.get(reason="header_too_large") == 1
    else:
        assert edge.paths == ["/webhooks/stripe"]
        assert edge.status() == 200
    edge.protocol.connection_lost(None)


async def test_input_after_a_refusal_is_dropped_then_the_connection_closed() -> None:
    """A flood that goes on after the 431 is read and dropped, up to a bound."""
    edge = Edge()
    await edge.feed(request(LIMIT + 10))
    written = len(edge.transport.written)
    await edge.feed(*[b"a" * 65536] * 8)
    assert len(edge.transport.written) == written and not edge.transport.closed
    await edge.feed(*[b"a" * 65536] * 16)
    assert edge.transport.closed


async def test_pipelined_requests_each_get_their_own_budget() -> None:
    """Two requests in one read, each with a head near the budget: both served."""
    edge = Edge()
    await edge.feed(request(LIMIT - 200) + request(LIMIT - 200))
    await asyncio.sleep(0.01)
    assert edge.paths == ["/webhooks/stripe"] * 2
    assert edge.refused.values == {}


async def test_a_silent_connection_is_closed_unanswered() -> None:
    edge = Edge()
    await asyncio.sleep(TIMEOUT_S * 4)
    assert edge.transport.closed and edge.transport.written == b""
    assert edge.refused.get(reason="no_request") == 1


async def test_a_stalled_head_is_408() -> None:
    edge = Edge()
    await edge.feed(b"POST /webhooks/stripe HTTP/1.1\r\nHost: g")
    await asyncio.sleep(TIMEOUT_S * 4)
    assert edge.status() == 408 and edge.transport.eof
    assert edge.refused.get(reason="header_timeout") == 1


async def test_a_head_completed_in_time_stops_the_deadline() -> None:
    edge = Edge()
    await edge.feed(request(10))
    await asyncio.sleep(TIMEOUT_S * 4)
    assert edge.status() == 200 and not edge.transport.closed
    assert edge.refused.values == {}


async def test_a_later_head_on_a_kept_alive_connection_has_its_own_deadline() -> None:
    """After a response the keep-alive timer runs; a head begun then and left unfinished
    is held to the head deadline (408), not kept open by the keep-alive logic."""
    edge = Edge()
    await edge.feed(request(10))
    edge.transport.written.clear()
    await edge.feed(b"POST /webhooks/stripe HTTP/1.1\r\n")
    await asyncio.sleep(TIMEOUT_S * 4)
    assert edge.status() == 408


async def test_a_request_over_the_concurrency_limit_is_counted() -> None:
    edge = Edge(limit_concurrency=1)  # this connection alone reaches it
    await edge.feed(request(10))
    assert edge.status() == 503
    assert edge.refused.get(reason="over_capacity") == 1


def test_the_server_config_still_pickles_for_worker_processes() -> None:
    """`gateway serve --workers N` pickles uvicorn's Config into spawned workers: the edge
    protocol and its limits must survive the trip."""
    import pickle

    from gateway.ingest.app import server_options
    from gateway.settings import HttpSettings

    http = HttpSettings(max_header_bytes=8192, header_timeout_s=3.0)
    config = uvicorn.Config(
        "gateway.compose.ingest:app_from_env", factory=True, **server_options(http)
    )
    copy = pickle.loads(pickle.dumps(config))  # noqa: S301 - our own object, just made
    assert copy.http.func is EdgeProtocol
    assert copy.http.keywords == {"max_header_bytes": 8192, "header_timeout_s": 3.0}
