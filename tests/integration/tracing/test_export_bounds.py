"""A collector that accepts connections and never answers must not hold up a stop:
the last export is abandoned after 5 s (the SDK alone waits 10 s or more), and the
queue-full warnings are not logged per span."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator

import pytest

from gateway import tracing
from gateway.settings import TracingSettings


@pytest.fixture
async def silent_collector() -> AsyncIterator[str]:
    held: list[asyncio.StreamWriter] = []

    async def accept(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)  # read nothing, answer nothing

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        for writer in held:
            writer.close()
        server.close()


async def test_a_silent_collector_does_not_hold_up_the_stop(silent_collector: str) -> None:
    started = 0.0
    async with tracing.configured(TracingSettings(endpoint=silent_collector), "gateway-test"):
        for n in range(5):
            tracing.start(f"span {n}").end()
        started = time.monotonic()
    took_s = time.monotonic() - started
    assert not tracing.ENABLED
    assert took_s < 8, f"stopping waited {took_s:.1f} s for a collector that never answers"


def test_queue_full_warnings_are_not_logged_per_span() -> None:
    from gateway.tracing.otel import Backend

    Backend(TracingSettings(endpoint="http://127.0.0.1:9"), "gateway-test").shutdown()
    noisy = logging.getLogger("opentelemetry.sdk._shared_internal")
    assert not noisy.isEnabledFor(logging.WARNING)
