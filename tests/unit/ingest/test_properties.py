"""Property-based tests of both ingestion endpoints in process: the real `GatewayApp`
(through its lifespan) with the in-memory inbox of `tests.support.fakes`, driven as plain
ASGI with any bytes at all in header names and values.

The same properties run end to end in tests/integration/ingest/test_properties.py; the
strategies are in `tests.support.hostile`, the contract they are checked against in
`tests.support.oracle`. Many examples here, for the decision logic.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest
from hypothesis import HealthCheck, given, settings
from starlette.types import Message, Scope

from gateway.ingest.app import GatewayApp
from gateway.ingest.parts import IngestParts
from gateway.metrics import Metrics
from gateway.settings import Settings, parse
from tests.support.fakes import MemoryInbox, StaticProbe
from tests.support.gateway import config
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

EXAMPLES = 300
PROPERTY = settings(
    max_examples=EXAMPLES,
    derandomize=True,  # the same examples on every run and machine
    database=None,  # nothing kept in .hypothesis/ between runs
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,  # one gateway serves every example, on purpose
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)


class FakeGateway:
    """`GatewayApp` over fakes; `send` runs one request as a server would, in a task."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.inbox = MemoryInbox()

        @contextlib.asynccontextmanager
        async def run_parts(settings: Settings) -> AsyncIterator[IngestParts]:
            up = StaticProbe()
            yield IngestParts(
                settings.http, settings.ingest, settings.tracing, self.inbox, up, up, Metrics()
            )

        self.app = GatewayApp(self.settings, run_parts)

    def __repr__(self) -> str:  # what Hypothesis prints for the fixture (no settings)
        return "FakeGateway()"

    async def send(self, request: Request) -> tuple[int | None, bytes]:
        status: list[int] = []
        body: list[bytes] = []
        messages: list[Message] = [
            {"type": "http.request", "body": request.body, "more_body": False}
        ]

        async def receive() -> Message:
            return messages.pop(0) if messages else {"type": "http.disconnect"}

        async def send(message: Message) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])
            elif message["type"] == "http.response.body":
                body.append(message.get("body", b""))

        scope: Scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": request.path,
            "raw_path": request.target,
            "query_string": b"",
            "root_path": "",
            "headers": list(request.headers),
            "client": ("127.0.0.1", 50000),
            "server": ("testserver", 80),
        }
        await asyncio.wait_for(asyncio.create_task(self.app(scope, receive, send)), 5)
        return (status[0] if status else None), b"".join(body)

    async def reset(self) -> None:
        self.inbox.recorded.clear()

    async def get(self, provider: str, event_id: str) -> Stored | None:
        event = self.inbox.recorded.get((provider, event_id))
        if event is None:
            return None
        parked = (event.failure.error_class,) if event.failure is not None else ()
        return Stored(event.body, parked)

    async def counts(self) -> tuple[int, int]:
        return len(self.inbox.recorded), len(self.inbox.parked)


@contextlib.asynccontextmanager
async def lifespan(gateway: FakeGateway) -> AsyncIterator[None]:
    """Start and stop the app through the ASGI lifespan protocol, as uvicorn does."""
    to_app: asyncio.Queue[Message] = asyncio.Queue()
    from_app: asyncio.Queue[Message] = asyncio.Queue()
    scope: Scope = {"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}
    task = asyncio.create_task(gateway.app(scope, to_app.get, from_app.put))
    await to_app.put({"type": "lifespan.startup"})
    assert (await asyncio.wait_for(from_app.get(), 5))["type"] == "lifespan.startup.complete"
    try:
        yield
    finally:
        await to_app.put({"type": "lifespan.shutdown"})
        await asyncio.wait_for(from_app.get(), 5)
        await asyncio.wait_for(task, 5)


@pytest.fixture
async def gw() -> AsyncIterator[FakeGateway]:
    doc = config("postgresql://127.0.0.1/unused", "nats://127.0.0.1:1", services=SERVICES)
    gateway = FakeGateway(parse(doc, env={}))
    async with lifespan(gateway):
        yield gateway


@pytest.fixture
def history() -> History:
    return History()


@PROPERTY
@given(request=signed_webhooks(http_safe=False))
async def test_a_signed_webhook_is_accepted_or_parked_never_refused(
    gw: FakeGateway, history: History, request: Request
) -> None:
    """Every scheme, any content: 200 with the body kept byte for byte (parked with the
    right error class where it cannot be published, under its body digest without a
    usable id); never a 400."""
    scheme = request.path.removeprefix("/webhooks/")
    await check_genuine(gw.send, gw, request, expect_signed_webhook(scheme, request), history)


@PROPERTY
@given(request=internal_events(http_safe=False))
async def test_an_internal_event_is_recorded_or_refused_for_its_content(
    gw: FakeGateway, history: History, request: Request
) -> None:
    """A valid token, any content: recorded, or 400/403 exactly as the README lists."""
    token = request.seen_headers()["authorization"].split(" ", 1)[1]
    service = next(name for name, t in TOKENS.items() if t == token)
    await check_genuine(gw.send, gw, request, expect_internal_event(service, request), history)


@PROPERTY
@given(request=not_genuine(http_safe=False))
async def test_a_request_that_is_not_genuine_stores_nothing(
    gw: FakeGateway, request: Request
) -> None:
    """No, garbage, stale, tampered or foreign signatures, unknown providers, bad tokens:
    401 or 404 (413 for a declared size over the limit), never 5xx, nothing offered."""
    offered = len(gw.inbox.offered)
    await check_not_genuine(gw.send, gw, request, expect_not_genuine(request, SCHEMES))
    assert len(gw.inbox.offered) == offered, "a request that is not genuine reached the inbox"
