"""`EdgeProtocol` fed bytes directly (no socket): where the head budget and each phase's
deadline fall, whichever way a request is split into reads."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest
import uvicorn
from uvicorn.server import ServerState

from gateway import edge as edge_module
from gateway.edge import REFUSALS_STATE_KEY, EdgeProtocol
from gateway.metrics import Counter

LIMIT = 4096
TIMEOUT_S = 0.05
BODY_TIMEOUT_S = 0.1


class FakeTransport(asyncio.Transport):
    """Collects what the protocol writes and whether it closed or half-closed."""

    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()
        self.writes = 0  # calls to write(): one per small answer (gateway.edge_writes)
        self.closed = False
        self.eof = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 40000), "sockname": ("127.0.0.1", 8080)}.get(name)

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.writes += 1
        self.written += data

    def write_eof(self) -> None:
        self.eof = True

    def can_write_eof(self) -> bool:
        return True

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


class Edge:
    """One connection: its protocol, transport, the paths the app saw, the counter."""

    def __init__(self, limit_concurrency: int | None = None, *, early: bool = False) -> None:
        """`early`: the app answers without reading the body, as a 401 or 404 does."""
        self.paths: list[str] = []
        self.received: list[str] = []  # the type of the app's last `receive()` message
        self.headers: list[tuple[bytes, bytes]] = []  # the last request's, as the app saw them

        async def app(scope: Any, receive: Any, send: Any) -> None:
            self.paths.append(scope["path"])
            self.headers = scope["headers"]
            while not early:
                message = await receive()
                self.received.append(message["type"])
                if not message.get("more_body"):
                    break
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
            body_timeout_s=BODY_TIMEOUT_S,
        )
        self.protocol.connection_made(self.transport)

    async def feed(self, *chunks: bytes) -> None:
        for chunk in chunks:
            self.protocol.data_received(chunk)
        for _ in range(5):  # let the app tasks run
            await asyncio.sleep(0)

    def status(self) -> int:
        return int(bytes(self.transport.written).split(b" ", 2)[1])

    def written_once(self) -> bool:
        """Exactly one answer was written."""
        return bytes(self.transport.written).count(b"HTTP/1.1 ") == 1


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


# -- pipelined heads -----------------------------------------------------------------


@pytest.mark.parametrize("read_bytes", [1 << 20, 6_000, 1024])
async def test_a_pipelined_head_over_the_budget_is_431(read_bytes: int) -> None:
    """A second head over budget behind a first request, however the reads fall (the
    second head starting mid-read included): the second is refused, the first answered
    (its answer cannot be interleaved with a 431) and the connection then closed."""
    edge = Edge()
    await edge.feed(*split(request(10, b"x" * 3_000) + request(LIMIT + 10), read_bytes))
    await asyncio.sleep(0.01)
    assert edge.paths == ["/webhooks/stripe"]
    assert edge.refused.get(reason="header_too_large") == 1
    assert edge.status() == 200 and edge.written_once()
    assert b"connection: close" in edge.transport.written and edge.transport.closed


async def test_a_pipelined_head_under_the_budget_behind_a_large_body_is_served() -> None:
    """The read that ends a 60 KB body and holds the next head whole is charged to that
    head, then measured: under budget, it is served."""
    edge = Edge()
    await edge.feed(request(10, b"x" * 60_000) + request(LIMIT - 200))
    await asyncio.sleep(0.01)
    assert edge.paths == ["/webhooks/stripe"] * 2
    assert edge.refused.values == {}


async def test_a_pipelined_head_begun_mid_read_is_measured_not_refused() -> None:
    """Behind a 60 KB body in the same read, the start of a head (then its rest): the
    read's charge crosses the budget, the measured head does not."""
    second = request(LIMIT - 200)
    edge = Edge()
    await edge.feed(request(10, b"x" * 60_000) + second[:100], second[100:])
    await asyncio.sleep(0.01)
    assert edge.paths == ["/webhooks/stripe"] * 2
    assert edge.refused.values == {}


async def test_a_pipelined_partial_head_has_a_deadline() -> None:
    """A head begun in the read that ended the previous request, then nothing: 408."""
    edge = Edge()
    await edge.feed(request(10) + b"POST /webhooks/stripe HTTP/1.1\r\nHost: g")
    await asyncio.sleep(TIMEOUT_S * 4)
    assert edge.refused.get(reason="header_timeout") == 1


async def test_pipelined_requests_beyond_the_queue_bound_are_refused() -> None:
    """Forty small requests in one read: the first and `MAX_PIPELINED` queued behind it
    are answered, the rest refused unread, and the connection closed after the answers."""
    edge = Edge()
    await edge.feed(b"GET /healthz HTTP/1.1\r\nHost: g\r\n\r\n" * 40)
    await asyncio.sleep(0.05)
    assert edge.paths == ["/healthz"] * (1 + edge_module.MAX_PIPELINED)
    assert edge.refused.get(reason="too_many_pipelined") == 1
    assert bytes(edge.transport.written).count(b"HTTP/1.1 200 ") == 1 + edge_module.MAX_PIPELINED
    assert edge.transport.is_closing()


# -- trailers --------------------------------------------------------------------------


def chunked(body_chunks: list[bytes], trailers: bytes = b"") -> bytes:
    head = b"POST /webhooks/stripe HTTP/1.1\r\nHost: g\r\nTransfer-Encoding: chunked\r\n\r\n"
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in body_chunks)
    return head + chunks + b"0\r\n" + trailers + b"\r\n"


@pytest.mark.parametrize(
    ("trailers", "read_bytes"),
    [
        (b"X-T: " + b"t" * (LIMIT + 10) + b"\r\n", 1 << 20),
        (b"X-T: " + b"t" * (LIMIT * 8) + b"\r\n", 512),
        (b"".join(b"X-T%d: t\r\n" % i for i in range(LIMIT // 8)), 1 << 20),
    ],
    ids=["one-large", "one-flood-in-reads", "many-small"],
)
async def test_trailers_over_the_budget_are_431(trailers: bytes, read_bytes: int) -> None:
    """Trailers count against the head budget: over it, 431 while the app still waits
    for the body (it sees the client gone), and the flood is not buffered."""
    edge = Edge()
    await edge.feed(*split(chunked([b"{}"], trailers), read_bytes))
    assert edge.status() == 431 and edge.transport.eof
    assert edge.refused.get(reason="header_too_large") == 1
    assert edge.received[-1] == "http.disconnect"
    assert edge.written_once()


async def test_a_chunked_body_with_small_trailers_is_served() -> None:
    """Chunk-size lines and trailers well under the budget, the body itself far over it."""
    edge = Edge()
    body = [b"x" * 1000] * 60
    await edge.feed(*split(chunked(body, b"X-Checksum: abc\r\n"), 1500))
    assert edge.status() == 200
    assert edge.refused.values == {}


@pytest.mark.parametrize("read_bytes", [1 << 20, 7])
async def test_trailers_never_reach_the_request_headers(read_bytes: int) -> None:
    """A trailer is not a header: it cannot add one, or stand in for one the head had."""
    edge = Edge()
    data = chunked([b"{}"], b"X-Forwarded-For: 10.0.0.1\r\nHost: evil\r\n")
    await edge.feed(*split(data, read_bytes))
    assert edge.status() == 200
    assert edge.headers == [(b"host", b"g"), (b"transfer-encoding", b"chunked")]


# -- body deadline, early answers, keep-alive ------------------------------------------


async def test_a_stalled_body_is_408_within_the_body_deadline() -> None:
    edge = Edge()
    await edge.feed(request(10, b"x" * 100)[:-50])
    await asyncio.sleep(BODY_TIMEOUT_S * 3)
    assert edge.status() == 408 and edge.transport.eof
    assert b'"body_timeout"' in edge.transport.written
    assert edge.received[-1] == "http.disconnect"
    assert edge.refused.get(reason="body_timeout") == 1


async def test_a_body_trickled_after_an_early_answer_is_cut_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Answered before its body was in, a request whose body keeps trickling is closed
    once the drain bound runs out, each byte notwithstanding."""
    monkeypatch.setattr(edge_module, "LINGER_S", 0.1)
    edge = Edge(early=True)
    await edge.feed(request(10, b"x" * 1_000_000)[:-999_000])
    assert edge.status() == 200 and not edge.transport.is_closing()
    for _ in range(10):
        await edge.feed(b"x")
        await asyncio.sleep(0.03)
    assert edge.transport.closed
    assert edge.refused.get(reason="body_not_drained") == 1


async def test_a_flood_after_an_early_answer_is_cut_off() -> None:
    edge = Edge(early=True)
    await edge.feed(request(10, b"x" * 10_000_000)[:-9_000_000])
    await edge.feed(*[b"x" * 65536] * 8)
    assert not edge.transport.is_closing()
    await edge.feed(*[b"x" * 65536] * 10)
    assert edge.transport.closed
    assert edge.refused.get(reason="body_not_drained") == 1


async def test_a_body_drained_after_an_early_answer_is_kept_alive_then_idles_out() -> None:
    """The rest of the body arrives in time: the connection is kept alive, and the
    keep-alive timer (which that body's bytes cancelled in uvicorn) runs again."""
    edge = Edge(early=True)
    whole = request(10, b"x" * 1_000)
    await edge.feed(whole[:-500])
    await edge.feed(whole[-500:])
    assert not edge.transport.closed
    assert edge.protocol.timeout_keep_alive_task is not None
    await edge.feed(request(10))
    assert edge.paths == ["/webhooks/stripe"] * 2
    assert edge.refused.values == {}


async def test_a_client_that_takes_no_answer_is_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The send buffer stays full (writing paused) past `WRITE_STALL_S`: closed; paused
    and resumed in time: kept."""
    monkeypatch.setattr(edge_module, "WRITE_STALL_S", 0.05)
    edge = Edge()
    await edge.feed(request(10))  # past the head deadline: kept alive
    edge.protocol.pause_writing()
    await asyncio.sleep(0.01)
    edge.protocol.resume_writing()
    await asyncio.sleep(0.1)
    assert not edge.transport.is_closing()
    edge.protocol.pause_writing()
    await asyncio.sleep(0.1)
    assert edge.transport.is_closing()
    assert edge.refused.get(reason="write_stalled") == 1


# -- the request line ------------------------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        b"GET /healthz",  # HTTP/0.9: no version
        b"POST http://gateway/webhooks/stripe HTTP/1.1",  # absolute-form
        b"OPTIONS * HTTP/1.1",  # asterisk-form
        b"GET /healthz HTTP/2.0",
    ],
)
async def test_a_request_line_that_is_not_origin_form_http_1_is_400(line: bytes) -> None:
    edge = Edge()
    await edge.feed(line + b"\r\nHost: g\r\nContent-Length: 0\r\n\r\n")
    assert edge.paths == []
    assert edge.status() == 400
    assert b'"bad_request_line"' in edge.transport.written
    assert edge.refused.get(reason="bad_request_line") == 1


async def test_http_1_0_is_served() -> None:
    edge = Edge()
    await edge.feed(b"GET /healthz HTTP/1.0\r\n\r\n")
    assert edge.paths == ["/healthz"] and edge.status() == 200


def test_the_server_config_still_pickles_for_worker_processes() -> None:
    """`gateway serve --workers N` pickles uvicorn's Config into spawned workers: the edge
    protocol and its limits must survive the trip."""
    import pickle

    from gateway.ingest.app import server_options
    from gateway.settings import HttpSettings

    http = HttpSettings(max_header_bytes=8192, header_timeout_s=3.0, body_timeout_s=7.0)
    config = uvicorn.Config(
        "gateway.wiring.ingest:app_from_env", factory=True, **server_options(http)
    )
    copy = pickle.loads(pickle.dumps(config))  # noqa: S301 - our own object, just made
    assert copy.http.func is EdgeProtocol
    assert copy.http.keywords == {
        "max_header_bytes": 8192,
        "header_timeout_s": 3.0,
        "body_timeout_s": 7.0,
    }


async def test_an_answer_is_one_write_head_and_body_together() -> None:
    edge = Edge()
    await edge.feed(request(10))
    assert bytes(edge.transport.written).endswith(b"\r\n\r\nok")
    assert edge.transport.writes == 1


async def test_pipelined_answers_come_whole_and_in_order() -> None:
    edge = Edge()
    await edge.feed(request(10) + request(20) + request(30))
    await asyncio.sleep(0.01)
    written = bytes(edge.transport.written)
    assert written.count(b"HTTP/1.1 200 OK") == 3
    assert [part.endswith(b"ok") for part in written.split(b"HTTP/1.1 ")[1:]] == [True] * 3
    assert edge.transport.writes == 3
