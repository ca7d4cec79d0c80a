"""The public port's edge limits, against a real gateway on loopback with raw sockets:
oversized heads get 431, stalled heads 408, silent and idle connections are closed,
requests beyond `max_connections` get 503, and after every hostile case a genuine signed
webhook is still accepted and recorded.

Deadlines are short in these configs so the tests run fast; every wait has a generous
upper bound (the machine is shared) and no lower bound is asserted."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import AsyncIterator

import asyncpg
import httpx
import orjson
import pytest

from gateway.settings.sections import MAX_HEADER_BYTES_DEFAULT
from tests.support.deliveries import Delivery, deliver
from tests.support.gateway import RunningServer, config, running_server
from tests.support.services import wait_until

HEADER_TIMEOUT_S = 1.0
KEEPALIVE_TIMEOUT_S = 1.0
SLACK_S = 5.0  # on top of any deadline: a busy shared machine is slow, never early
LIMIT = MAX_HEADER_BYTES_DEFAULT
_ids = itertools.count()

Response = tuple[int, dict[str, str], bytes]


@pytest.fixture
async def server(database_url: str, nats_url: str) -> AsyncIterator[RunningServer]:
    doc = config(
        database_url,
        nats_url,
        http={"header_timeout_s": HEADER_TIMEOUT_S, "keepalive_timeout_s": KEEPALIVE_TIMEOUT_S},
    )
    async with running_server(doc) as srv:
        yield srv


async def genuine_is_accepted(server: RunningServer, database_url: str) -> None:
    """A signed Stripe webhook on a fresh connection: 200 accepted, its row exists and
    reaches the stream."""
    sent = deliver("stripe", f"evt_edge_{next(_ids)}", "payment_intent.succeeded")
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.port}", timeout=30) as c:
        answer = await c.post(sent.path, content=sent.body, headers=sent.headers)
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"status": "accepted", "event_id": sent.event_id}
    assert await stored(database_url, sent.event_id) == 1
    await wait_until(lambda: stored(database_url, sent.event_id, published=True))


async def stored(database_url: str, event_id: str, *, published: bool = False) -> int:
    conn = await asyncpg.connect(database_url)
    try:
        count: int = await conn.fetchval(
            "SELECT count(*) FROM processed_webhooks WHERE provider = 'stripe' AND event_id = $1"
            " AND (outbox_published(processed_webhooks) OR NOT $2)",
            event_id,
            published,
        )
        return count
    finally:
        await conn.close()


def signed_request(sent: Delivery, extra: bytes = b"") -> bytes:
    """The whole HTTP/1.1 request for `sent`, with `extra` header lines in its head."""
    lines = [f"POST {sent.path} HTTP/1.1", "Host: gateway", f"Content-Length: {len(sent.body)}"]
    lines += [f"{k}: {v}" for k, v in sent.headers.items()]
    return ("\r\n".join(lines) + "\r\n").encode() + extra + b"\r\n" + sent.body


def parse(raw: bytes) -> Response:
    """Status, headers and body of one complete response (Content-Length checked)."""
    head, _, body = raw.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    assert int(headers["content-length"]) == len(body), raw[:300]
    return int(status_line.split()[1]), headers, body


async def read_until_closed(reader: asyncio.StreamReader, timeout_s: float) -> bytes:
    """Everything until the server closes (a reset after its answer counts as closed)."""
    chunks = []
    with contextlib.suppress(ConnectionError):
        while chunk := await asyncio.wait_for(reader.read(65536), timeout_s):
            chunks.append(chunk)
    return b"".join(chunks)


async def exchange(port: int, data: bytes, timeout_s: float = 10.0) -> bytes:
    """Send `data` on a new connection and read until the server closes it."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        with contextlib.suppress(ConnectionError):
            writer.write(data)
            await writer.drain()
        return await read_until_closed(reader, timeout_s)
    finally:
        writer.close()


def assert_refused(raw: bytes, status: int, error: str) -> None:
    code, headers, body = parse(raw)
    assert code == status
    assert headers["connection"] == "close"
    assert headers["content-type"] == "application/json"
    assert orjson.loads(body)["error"] == error


# -- head size -----------------------------------------------------------------------


async def test_one_oversized_header_is_431_and_nothing_is_stored(
    server: RunningServer, database_url: str
) -> None:
    """A signed webhook whose Stripe-Signature header alone is 100 KiB: 431, no row."""
    sent = deliver("stripe", "evt_edge_big_header", "payment_intent.succeeded")
    sent.headers["Stripe-Signature"] += ",v1=" + "a" * 100_000
    assert_refused(await exchange(server.port, signed_request(sent)), 431, "header_too_large")
    assert await stored(database_url, sent.event_id) == 0
    assert server.parts.metrics.http_refused_total.get(reason="header_too_large") == 1
    await genuine_is_accepted(server, database_url)


async def test_a_header_flood_is_cut_off_without_being_read(
    server: RunningServer, database_url: str
) -> None:
    """An 8 MiB header that never ends: refused once over the limit, the rest unread."""
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)

    async def flood() -> None:
        with contextlib.suppress(ConnectionError):
            writer.write(b"POST /webhooks/stripe HTTP/1.1\r\nX-Pad: ")
            for _ in range(128):
                writer.write(b"A" * 65536)
                await writer.drain()

    sender = asyncio.create_task(flood())
    try:
        raw = await read_until_closed(reader, 10)
    finally:
        await asyncio.wait_for(sender, 10)
        writer.close()
    if raw:  # the answer may be lost to the reset that cuts a flood off
        assert_refused(raw, 431, "header_too_large")
    assert server.parts.metrics.http_refused_total.get(reason="header_too_large") == 1
    await genuine_is_accepted(server, database_url)


@pytest.mark.parametrize("count", [3_000, 20_000])
async def test_many_small_headers_over_the_limit_are_431(
    server: RunningServer, database_url: str, count: int
) -> None:
    """Many headers, each small, totalling over the limit (in one read or in several)."""
    sent = deliver("stripe", f"evt_edge_many_{count}", "payment_intent.succeeded")
    extra = b"".join(b"X-H%d: v\r\n" % i for i in range(count))
    assert len(extra) > LIMIT
    assert_refused(
        await exchange(server.port, signed_request(sent, extra)), 431, "header_too_large"
    )
    assert await stored(database_url, sent.event_id) == 0
    await genuine_is_accepted(server, database_url)


async def test_a_large_head_under_the_limit_with_a_body_is_accepted(
    server: RunningServer, database_url: str
) -> None:
    """Head near the limit and a 60 KiB body arriving in one write: the body is not
    counted as head, and the webhook is accepted."""
    body = orjson.dumps({"id": "evt_edge_near", "type": "t", "pad": "x" * 60_000})
    sent = deliver("stripe", "evt_edge_near", body=body)
    extra = b"Connection: close\r\nX-Pad: " + b"p" * (LIMIT - 1_000) + b"\r\n"
    status, _, answer = parse(await exchange(server.port, signed_request(sent, extra)))
    assert status == 200, answer
    assert await stored(database_url, "evt_edge_near") == 1


# -- head deadline -------------------------------------------------------------------


async def test_a_trickled_head_gets_408_within_the_deadline(
    server: RunningServer, database_url: str
) -> None:
    """A head sent a few bytes at a time never completes: 408 and closed, soon after the
    deadline."""
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    started = time.monotonic()

    async def trickle() -> None:
        with contextlib.suppress(ConnectionError):
            writer.write(b"POST /webhooks/stripe HTTP/1.1\r\nHost: gateway\r\n")
            for _ in range(int((HEADER_TIMEOUT_S + SLACK_S) / 0.1)):
                writer.write(b"X")
                await writer.drain()
                await asyncio.sleep(0.1)

    sender = asyncio.create_task(trickle())
    try:
        raw = await read_until_closed(reader, HEADER_TIMEOUT_S + SLACK_S)
    finally:
        sender.cancel()
        writer.close()
    assert time.monotonic() - started < HEADER_TIMEOUT_S + SLACK_S
    assert_refused(raw, 408, "header_timeout")
    assert server.parts.metrics.http_refused_total.get(reason="header_timeout") == 1
    await genuine_is_accepted(server, database_url)


async def test_a_silent_connection_is_closed_after_the_deadline(
    server: RunningServer, database_url: str
) -> None:
    """A connection that sends nothing is closed without an answer."""
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    started = time.monotonic()
    try:
        assert await read_until_closed(reader, HEADER_TIMEOUT_S + SLACK_S) == b""
    finally:
        writer.close()
    assert time.monotonic() - started < HEADER_TIMEOUT_S + SLACK_S
    assert server.parts.metrics.http_refused_total.get(reason="no_request") == 1
    await genuine_is_accepted(server, database_url)


async def test_200_idle_sockets_do_not_keep_out_a_genuine_webhook(
    server: RunningServer, database_url: str
) -> None:
    """200 connections that send nothing (half of them a partial head): a genuine webhook
    is accepted meanwhile, and every idle socket is closed after the deadline."""
    idle = [await asyncio.open_connection("127.0.0.1", server.port) for _ in range(200)]
    try:
        for _, writer in idle[::2]:
            writer.write(b"POST /webhooks/stripe HTTP/1.1\r\n")
        await genuine_is_accepted(server, database_url)
        answers = await asyncio.gather(
            *(read_until_closed(reader, HEADER_TIMEOUT_S + SLACK_S + 5) for reader, _ in idle)
        )
    finally:
        for _, writer in idle:
            writer.close()
    assert all(a == b"" for a in answers[1::2])
    assert all(parse(a)[0] == 408 for a in answers[::2])
    refused = server.parts.metrics.http_refused_total
    assert refused.get(reason="no_request") == 100
    assert refused.get(reason="header_timeout") == 100
    await genuine_is_accepted(server, database_url)


# -- keep-alive ----------------------------------------------------------------------


async def test_a_kept_alive_connection_is_closed_when_idle(
    server: RunningServer, database_url: str
) -> None:
    """After a response, an idle kept-alive connection is closed after keepalive_timeout_s;
    a later head begun on it is held to the head deadline (408)."""
    get = b"GET /healthz HTTP/1.1\r\nHost: gateway\r\n\r\n"
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        writer.write(get)
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        assert head.startswith(b"HTTP/1.1 200 ")
        await asyncio.wait_for(reader.readexactly(_length(head)), 10)
        started = time.monotonic()
        assert await read_until_closed(reader, KEEPALIVE_TIMEOUT_S + SLACK_S) == b""
        assert time.monotonic() - started < KEEPALIVE_TIMEOUT_S + SLACK_S
    finally:
        writer.close()

    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        writer.write(get)
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        await asyncio.wait_for(reader.readexactly(_length(head)), 10)
        writer.write(b"POST /webhooks/stripe HTTP/1.1\r\nHost: g")  # and then nothing
        raw = await read_until_closed(reader, HEADER_TIMEOUT_S + SLACK_S)
    finally:
        writer.close()
    assert_refused(raw, 408, "header_timeout")
    await genuine_is_accepted(server, database_url)


def _length(head: bytes) -> int:
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.lower() == b"content-length":
            return int(value)
    raise AssertionError(head)


# -- concurrency ---------------------------------------------------------------------


async def test_requests_beyond_max_connections_get_503(database_url: str, nats_url: str) -> None:
    """With the connection limit held by idle sockets a webhook is answered 503 (nothing
    stored); once they are gone it is accepted."""
    doc = config(database_url, nats_url, http={"max_connections": 4, "header_timeout_s": 30.0})
    async with running_server(doc) as server:
        idle = [await asyncio.open_connection("127.0.0.1", server.port) for _ in range(3)]
        await asyncio.sleep(0.2)  # let the server take them
        sent = deliver("stripe", "evt_edge_busy", "payment_intent.succeeded")
        raw = await exchange(server.port, signed_request(sent))
        for _, writer in idle:
            writer.close()
        assert parse(raw)[0] == 503
        assert await stored(database_url, sent.event_id) == 0
        assert server.parts.metrics.http_refused_total.get(reason="over_capacity") == 1
        await asyncio.sleep(0.5)  # let the server see them closed
        await genuine_is_accepted(server, database_url)
