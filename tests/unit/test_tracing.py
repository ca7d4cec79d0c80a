"""`gateway.tracing`: nothing at all while off; while on, log lines carry the current
span's ids, and a provider's `traceparent` is a parent only when trusted.

Spans here are never sampled (`sample_ratio = 0` and unsampled parents), so nothing is
exported: the receiver-backed tests are in tests/integration/tracing.
"""

from __future__ import annotations

import logging

import orjson

from gateway import tracing
from gateway.core.trace_context import parse_traceparent
from gateway.ingest import traced
from gateway.logs import JsonFormatter
from gateway.settings import TracingSettings
from tests.support.services import free_port

#: A provider's span, not sampled (so the child is not either, and nothing is exported).
PROVIDERS = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"


def settings(trust_incoming: bool = False) -> TracingSettings:
    endpoint = f"http://127.0.0.1:{free_port()}"  # nothing listens: nothing is sent
    return TracingSettings(endpoint=endpoint, sample_ratio=0.0, trust_incoming=trust_incoming)


def line() -> dict[str, object]:
    record = logging.LogRecord("gateway.test", logging.INFO, __file__, 1, "hello", (), None)
    doc: dict[str, object] = orjson.loads(JsonFormatter().format(record))
    return doc


async def test_off_costs_nothing_and_adds_nothing() -> None:
    """Off: the flag is down, the helpers hand back one shared no-op, log lines are as
    before, and entering `configured` without an endpoint turns nothing on."""
    async with tracing.configured(TracingSettings(), "gateway-test"):
        assert not tracing.ENABLED
        assert tracing.child(None, "x") is tracing.current_child("x") is tracing.activated(None)
        with tracing.current_child("x") as span:
            assert span is None
        assert "trace_id" not in line()


async def test_log_lines_carry_the_current_span() -> None:
    """On: a line written while a span is current carries its trace and span ids; none
    outside it; and tracing is off again after the block."""
    async with tracing.configured(settings(), "gateway-test"):
        assert tracing.ENABLED
        span = tracing.start_root("work")
        parent = parse_traceparent(tracing.traceparent(span))
        assert parent is not None
        with tracing.activated(span):
            doc = line()
        span.end()
        assert (doc["trace_id"], doc["span_id"]) == (
            f"{parent.trace_id:032x}",
            f"{parent.span_id:016x}",
        )
        assert "trace_id" not in line()
    assert not tracing.ENABLED


async def test_a_providers_traceparent_is_a_parent_only_when_trusted() -> None:
    """By default the request starts a trace of its own; with `trust_incoming` it joins
    the provider's."""
    headers = [(b"traceparent", PROVIDERS.encode())]
    providers_trace = PROVIDERS.split("-")[1]
    for trust, joined in ((False, False), (True, True)):
        config = settings(trust_incoming=trust)
        async with tracing.configured(config, "gateway-test"):
            span = traced.request_span(headers, "stripe", traced.WEBHOOK_ROUTE, config)
            parent = parse_traceparent(tracing.traceparent(span))
            span.end()
        assert parent is not None
        assert (f"{parent.trace_id:032x}" == providers_trace) is joined
