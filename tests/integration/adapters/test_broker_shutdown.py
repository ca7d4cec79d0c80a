"""A broker told to close during start-up stops: its connector task ends even when
nats-py swallows the cancellation (a process stopped while NATS is unresponsive must
exit, not retry for ever)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import pytest

from gateway.adapters.jetstream.broker import JetStreamBroker
from gateway.errors import BrokerUnavailable
from gateway.settings.sections import NatsSettings


@pytest.fixture
async def silent_server() -> AsyncIterator[str]:
    """A TCP server that accepts connections and never says a word (no NATS INFO)."""
    held: list[asyncio.StreamWriter] = []

    async def accept(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"nats://127.0.0.1:{port}"
    finally:
        for writer in held:
            writer.close()
        server.close()


def _connectors() -> list[asyncio.Task[object]]:
    return [t for t in asyncio.all_tasks() if t.get_name() == "nats-connect" and not t.done()]


async def test_close_during_start_up_ends_the_connector(silent_server: str) -> None:
    broker = JetStreamBroker(NatsSettings(url=silent_server, request_timeout_s=1.0))
    await broker.start(wait_s=0.3)
    assert _connectors(), "the connector should still be trying"
    await asyncio.wait_for(broker.close(), 10)
    deadline = time.monotonic() + 30
    while _connectors() and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    assert not _connectors(), "the connector kept retrying after close()"
    assert not broker.connected


async def test_a_swallowed_cancellation_still_ends_the_connector(
    nats_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As when nats-py turns a cancelled request into its own timeout: the stream loop
    must notice the pending cancellation instead of retrying for ever."""
    broker = JetStreamBroker(NatsSettings(url=nats_url, stream=f"SHUTDOWN_{id(object())}"))
    calls = 0

    async def unresponsive_stream() -> None:
        nonlocal calls
        calls += 1
        with contextlib.suppress(asyncio.CancelledError):  # swallowed, as nats-py does
            await asyncio.sleep(2.0)  # long enough for the cancellation to land here
        raise BrokerUnavailable("cannot create stream: TimeoutError")

    monkeypatch.setattr(broker, "ensure_stream", unresponsive_stream)
    await broker.start(wait_s=0.5)
    (connector,) = _connectors()
    connector.cancel()  # what asyncio.run does to a task left behind at exit
    done, _ = await asyncio.wait([connector], timeout=10)
    assert done, f"the connector kept retrying after its cancellation ({calls} attempts)"
    assert connector.cancelled()
    await broker.close()


async def test_stopped_while_starting_leaves_no_connector(silent_server: str) -> None:
    broker = JetStreamBroker(NatsSettings(url=silent_server))
    starting = asyncio.create_task(broker.start(wait_s=5))
    await asyncio.sleep(0.3)
    starting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await starting
    deadline = time.monotonic() + 30
    while _connectors() and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    assert not _connectors()
