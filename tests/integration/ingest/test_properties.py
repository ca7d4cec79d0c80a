"""The properties of tests/unit/ingest/test_properties.py end to end: a real gateway
under uvicorn with PostgreSQL and JetStream, requests written byte by byte on real TCP
connections, and both tables read back with asyncpg.

Fewer examples than in process (each one is a few commits and round trips), always the
same ones (`derandomize`). Every example starts from empty tables; the gateway runs
without its memory of recorded keys (`remembered_keys = 0`), so a row removed between
examples is not answered as a duplicate from memory.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import asyncpg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.gateway import RunningServer, config, running_server
from tests.support.hostile import (
    SCHEMES,
    SERVICES,
    TOKENS,
    Request,
    internal_events,
    not_genuine,
    signed_webhooks,
)
from tests.support.oracle import (
    History,
    Stored,
    check_genuine,
    check_not_genuine,
    expect_internal_event,
    expect_not_genuine,
    expect_signed_webhook,
)
from tests.support.services import wait_until

EXAMPLES = 100
PROPERTY = settings(
    max_examples=EXAMPLES,
    derandomize=True,  # the same examples on every run and machine
    database=None,  # nothing kept in .hypothesis/ between runs
    deadline=None,  # a commit on a busy machine may take a while
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,  # one gateway serves every example, on purpose
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
#: What the HTTP server itself answers to a request head it cannot parse.
SERVER_REFUSALS = {400}


class RealGateway:
    """A running gateway, spoken to over raw HTTP/1.1, and its two tables."""

    def __init__(self, server: RunningServer, conn: asyncpg.Connection) -> None:
        self.server = server
        self.conn = conn

    def __repr__(self) -> str:  # what Hypothesis prints for the fixture
        return f"RealGateway(port={self.server.port})"

    async def send(self, request: Request) -> tuple[int | None, bytes]:
        """POST the request as written (repeated headers and all), one connection each."""
        reader, writer = await asyncio.open_connection("127.0.0.1", self.server.port)
        try:
            head = [
                b"POST " + request.target + b" HTTP/1.1",
                b"host: 127.0.0.1",
                b"connection: close",
                b"content-length: %d" % len(request.body),
                *(name + b": " + value for name, value in request.headers),
            ]
            writer.write(b"\r\n".join(head) + b"\r\n\r\n" + request.body)
            await writer.drain()
            raw = await asyncio.wait_for(reader.read(), 10)
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
        if not raw:
            return None, b""
        status_line, _, rest = raw.partition(b"\r\n")
        _, _, body = rest.partition(b"\r\n\r\n")
        return int(status_line.split(b" ")[1]), body

    async def reset(self) -> None:
        await self.conn.execute("TRUNCATE processed_webhooks, dlq_webhooks CASCADE")

    async def get(self, provider: str, event_id: str) -> Stored | None:
        row = await self.conn.fetchrow(
            "SELECT id, body FROM processed_webhooks WHERE provider = $1 AND event_id = $2",
            provider,
            event_id,
        )
        if row is None:
            return None
        dead = await self.conn.fetch(
            "SELECT error_class, payload FROM dlq_webhooks"
            " WHERE webhook_id = $1 AND stage = 'ingest' ORDER BY id",
            row["id"],
        )
        return Stored(
            bytes(row["body"]),
            tuple(d["error_class"] for d in dead),
            all(bytes(d["payload"]) == bytes(row["body"]) for d in dead),
        )

    async def counts(self) -> tuple[int, int]:
        row = await self.conn.fetchrow(
            "SELECT (SELECT count(*) FROM processed_webhooks) AS events,"
            " (SELECT count(*) FROM dlq_webhooks) AS dead"
        )
        assert row is not None
        return row["events"], row["dead"]

    async def check_outbox(self) -> None:
        """Every recorded row with a subject is published; no parked row has one."""
        parked_with_subject = await self.conn.fetchval(
            "SELECT count(*) FROM processed_webhooks w JOIN dlq_webhooks d ON d.webhook_id = w.id"
            " WHERE d.stage = 'ingest' AND w.subject IS NOT NULL"
        )
        assert parked_with_subject == 0, "a parked event was given a subject"

        async def drained() -> bool:
            pending: int = await self.conn.fetchval(
                "SELECT count(*) FROM processed_webhooks WHERE outbox_holds(processed_webhooks)"
            )
            return pending == 0

        await wait_until(drained, timeout_s=10, interval_s=0.01)


@pytest.fixture
async def gw(database_url: str, nats_url: str) -> AsyncIterator[RealGateway]:
    doc = config(database_url, nats_url, services=SERVICES, ingest={"remembered_keys": 0})
    async with running_server(doc) as server:
        conn = await asyncpg.connect(database_url)
        try:
            yield RealGateway(server, conn)
        finally:
            await conn.close()


@pytest.fixture
def history() -> History:
    return History()


@PROPERTY
@given(request=signed_webhooks(http_safe=True))
async def test_a_signed_webhook_is_accepted_or_parked_never_refused(
    gw: RealGateway, history: History, request: Request
) -> None:
    """Every scheme, any content HTTP can carry: recorded with its body byte for byte
    (parked with the right error class, never published, where it cannot be published;
    published where it can; under its body digest without a usable id); never a 400; a
    retry is a duplicate."""
    scheme = request.path.removeprefix("/webhooks/")
    await check_genuine(gw.send, gw, request, expect_signed_webhook(scheme, request), history)
    await gw.check_outbox()


@PROPERTY
@given(request=internal_events(http_safe=True))
async def test_an_internal_event_is_recorded_or_refused_for_its_content(
    gw: RealGateway, history: History, request: Request
) -> None:
    """A valid token, any content: recorded and published, or 400/403 as the README lists."""
    token = request.seen_headers()["authorization"].split(" ", 1)[1]
    service = next(name for name, t in TOKENS.items() if t == token)
    await check_genuine(gw.send, gw, request, expect_internal_event(service, request), history)
    await gw.check_outbox()


#: Bytes an HTTP server must refuse in a header value (CR and LF would end the header).
CONTROL_BYTES = [b"\x00", b"\x01", b"\x1b", b"\x7f"]


@PROPERTY
@given(
    request=not_genuine(http_safe=True),
    control=st.none() | st.sampled_from(CONTROL_BYTES),
)
async def test_a_request_that_is_not_genuine_stores_nothing(
    gw: RealGateway, request: Request, control: bytes | None
) -> None:
    """Forged or missing signatures and tokens, unknown providers, and (optionally) a
    control byte in a header: refused, never 5xx, no row in either table."""
    allowed = expect_not_genuine(request, SCHEMES)
    if control is not None:
        headers = (*request.headers, (b"x-trace", b"a" + control + b"b"))
        request = Request(request.path, headers, request.body, request.note + " + control byte")
        allowed |= SERVER_REFUSALS
    await check_not_genuine(gw.send, gw, request, allowed)
