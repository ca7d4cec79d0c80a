"""`gateway.tracing`: nothing at all while off; while on, log lines carry the current
span's ids, sampling is decided before any SDK call (so an unsampled event makes none),
and a provider's `traceparent` is a parent only when trusted and verified.

Spans that are recorded go to a real OTLP receiver on loopback (`tests.support.otlp`);
the tests of unsampled work make the SDK raise if it is called at all.
"""

from __future__ import annotations

import dataclasses
import logging
import random
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest
from opentelemetry.sdk.trace.sampling import Decision, TraceIdRatioBased

from gateway import tracing
from gateway.adapters.postgres.webhooks import StoredEvent
from gateway.backfill import traced as backfill_traced
from gateway.core.backfill.decisions import Window
from gateway.core.events.model import Event
from gateway.core.trace_context import keeps, parse_traceparent
from gateway.ingest import traced
from gateway.logs import JsonFormatter
from gateway.settings import TracingSettings
from gateway.settlement import traced as settle_traced
from tests.support.otlp import running_receiver
from tests.support.services import free_port
from tests.unit.ingest.test_endpoints import Gateway, lifespan, make_settings, post, stripe

#: A provider's span, not sampled (so the child is not either, and nothing is exported).
PROVIDERS = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"
#: A provider's span, sampled: what a client would send to force recording.
PROVIDERS_SAMPLED = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
PROVIDERS_TRACE = int(PROVIDERS.split("-")[1], 16)


def settings(trust_incoming: bool = False, endpoint: str = "") -> TracingSettings:
    endpoint = endpoint or f"http://127.0.0.1:{free_port()}"  # nothing listens
    return TracingSettings(endpoint=endpoint, sample_ratio=0.0, trust_incoming=trust_incoming)


def line() -> dict[str, object]:
    record = logging.LogRecord("gateway.test", logging.INFO, __file__, 1, "hello", (), None)
    doc: dict[str, object] = orjson.loads(JsonFormatter().format(record))
    return doc


def event(event_id: str = "evt_1", traceparent: str | None = None) -> Event:
    return Event("stripe", event_id, "payment_intent.succeeded", "webhooks.stripe.payment",
                 {}, b"{}", datetime.now(UTC), traceparent=traceparent)  # fmt: skip


class Delivered:
    """What `settle_span` reads of a delivery."""

    def __init__(self, headers: dict[str, str]) -> None:
        self.subject, self.headers = "webhooks.stripe.payment", headers


class SdkCalled(AssertionError):
    """The SDK was asked for a span, or to change the current context."""


@pytest.fixture
async def no_sdk(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[None]:
    """Tracing on at `sample_ratio = 0`, with an SDK that raises if it is called."""
    async with tracing.configured(settings(trust_incoming=True), "gateway-test"):
        backend = tracing._backend
        assert backend is not None

        def called(*args: Any, **kwargs: Any) -> Any:
            raise SdkCalled

        monkeypatch.setattr(backend.tracer, "start_span", called)
        monkeypatch.setattr(backend, "activate", called)
        monkeypatch.setattr(backend, "current_ids", called)
        yield


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
    async with (
        running_receiver() as receiver,
        tracing.configured(settings(endpoint=receiver.url), "gateway-test"),
    ):
        assert tracing.ENABLED
        span = tracing.start_root("work")
        parent = parse_traceparent(tracing.traceparent(span))
        assert parent is not None
        with tracing.activated(span):
            doc = line()
            assert tracing.current() is span
        assert tracing.current() is None
        span.end()
        assert (doc["trace_id"], doc["span_id"]) == (
            f"{parent.trace_id:032x}",
            f"{parent.span_id:016x}",
        )
        assert "trace_id" not in line()
    assert not tracing.ENABLED


def test_our_sampling_rule_is_the_sdks() -> None:
    """`keeps` decides as the SDK's `TraceIdRatioBased` would for the same trace id, so
    a trace id means one decision whichever side draws it."""
    rand = random.Random(16)
    for ratio in (0.0, 0.001, 0.1, 0.5, 0.9, 1.0):
        sdk = TraceIdRatioBased(ratio)
        for _ in range(2000):
            trace_id = rand.getrandbits(128)
            sampled = sdk.should_sample(None, trace_id, "x").decision is Decision.RECORD_AND_SAMPLE
            assert keeps(ratio, trace_id) is sampled


async def test_new_traces_are_kept_at_the_ratio_from_the_randomness_given() -> None:
    """`new_trace` draws from the randomness it is given: seeded, the same decisions;
    about `sample_ratio` of them sampled."""
    config = TracingSettings(endpoint=f"http://127.0.0.1:{free_port()}", sample_ratio=0.25)
    async with tracing.configured(config, "gateway-test"):
        first = [tracing.new_trace(random.Random(7).getrandbits) for _ in range(3)]
        assert len(set(first)) == 1  # the same seed, the same trace
        rand = random.Random(7)
        kept = sum(tracing.new_trace(rand.getrandbits).sampled for _ in range(4000))
        assert 850 < kept < 1150


async def test_a_providers_traceparent_is_a_parent_only_when_trusted_and_verified() -> None:
    """By default the request starts a trace of its own; with `trust_incoming` it joins
    the provider's once verified (here unsampled: the event carries the provider's trace
    id with flags 00, and no span is made); unverified, the header is ignored."""
    headers = [(b"traceparent", PROVIDERS.encode())]
    for trust, verified, joined in ((False, True, False), (True, True, True), (True, False, False)):
        config = settings(trust_incoming=trust)
        async with tracing.configured(config, "gateway-test"):
            trace = traced.RequestTrace(headers, "stripe", traced.WEBHOOK_ROUTE, trust)
            if verified:
                carried = trace.shaped(event()).traceparent
            else:
                trace.done("signature_mismatch", 401, "SIGNATURE_MISMATCH")
                carried = trace.carried
            trace.done("accepted", 200, None)
        parent = parse_traceparent(carried)
        assert trace.span is None and parent is not None and not parent.sampled
        assert (parent.trace_id == PROVIDERS_TRACE) is joined


async def test_unsampled_work_makes_no_sdk_call(no_sdk: None) -> None:
    """At `sample_ratio = 0`, with an SDK that raises if called: a request (an unsigned
    `-01` from the client, even with `trust_incoming`), its publish, a row recorded
    while tracing was off, a settlement, a replay and a backfill pass all run, their
    steps and log lines too, and what they carry is a `traceparent` with flags 00."""
    # A request: verified without a header, and unverified with a sampled one.
    plain = traced.RequestTrace([], "stripe", traced.WEBHOOK_ROUTE, True)
    shaped = plain.shaped(event())
    plain.done("accepted", 200, None)
    forced = traced.RequestTrace([(b"traceparent", PROVIDERS_SAMPLED.encode())], "stripe",
                                 traced.WEBHOOK_ROUTE, True)  # fmt: skip
    forced.done("signature_mismatch", 401, "SIGNATURE_MISMATCH")
    assert plain.span is None and forced.span is None
    assert shaped.traceparent is not None and shaped.traceparent.endswith("-00")
    assert parse_traceparent(forced.carried).trace_id != PROVIDERS_TRACE  # type: ignore[union-attr]
    # Its publish, and that of a row recorded while tracing was off (NULL traceparent).
    rows = [StoredEvent(1, shaped), StoredEvent(2, event("evt_2"))]
    sent, spans = traced.publish_spans(rows, "inline")
    assert spans == [None, None]
    assert sent[0] is rows[0]  # forwarded as it was recorded
    carried = sent[1].event.traceparent
    assert carried is not None and carried.endswith("-00")  # the settlement skips it too
    # Settlement: a message without a header, and one whose trace was not sampled.
    for headers in ({}, {"traceparent": shaped.traceparent}):
        assert settle_traced.settle_span(Delivered(headers), shaped, 1) is None  # type: ignore[arg-type]
    with tracing.activated(None), tracing.current_child("currency.rate") as step:
        assert step is None
        assert "trace_id" not in line()
    # The operator's side: a backfill pass and its recovered events.
    now = datetime.now(UTC)
    assert backfill_traced.pass_span("stripe", Window(now - timedelta(hours=1), now), False) is None
    recovered, recover_spans = backfill_traced.recover_spans([event("evt_3"), event("evt_4")])
    assert recover_spans == [None, None]
    assert {e.traceparent for e in recovered} == {recovered[0].traceparent}
    assert str(recovered[0].traceparent).endswith("-00")


async def test_a_verified_request_joins_a_trusted_senders_sampled_trace() -> None:
    """With `trust_incoming`, a verified request carrying `-01` whose event is new is
    recorded (at ratio 0) as the sender's child, with its commit wait, once its outcome
    is known; its event carries, from the start, the `traceparent` its span then gets."""
    async with running_receiver() as receiver:
        config = settings(trust_incoming=True, endpoint=receiver.url)
        async with tracing.configured(config, "gateway-test"):
            headers = [(b"traceparent", PROVIDERS_SAMPLED.encode())]
            trace = traced.RequestTrace(headers, "stripe", traced.WEBHOOK_ROUTE, True)
            assert trace.span is None  # nothing decided before verification
            shaped = trace.shaped(event("evt_joined"))
            with trace.commit_wait():
                assert trace.span is None  # nor before the outcome
            trace.done("accepted", 200, None)
        spans = await receiver.wait_for(lambda s: s.trace_id == PROVIDERS.split("-")[1], 2)
    by_name = {s.name: s for s in spans}
    span, wait = by_name[traced.WEBHOOK_ROUTE], by_name["commit.wait"]
    carried = parse_traceparent(shaped.traceparent)
    assert carried is not None and carried.sampled and carried.trace_id == PROVIDERS_TRACE
    assert f"{carried.span_id:016x}" == span.span_id  # the row names the span recorded
    assert span.parent_span_id == PROVIDERS.split("-")[2]
    assert wait.parent_span_id == span.span_id
    assert span.attributes["gateway.event_id"] == "evt_joined"
    assert span.attributes["gateway.outcome"] == "accepted"


async def test_a_replayed_delivery_never_chooses_its_sampling(no_sdk: None) -> None:
    """With `trust_incoming` at ratio 0, a verified request carrying the sender's `-01`
    whose event was already recorded (a replay, answered `duplicate`) draws at the ratio
    like any request: no span, and no SDK call at all."""
    headers = [(b"traceparent", PROVIDERS_SAMPLED.encode())]
    for _ in range(50):
        trace = traced.RequestTrace(headers, "github", traced.WEBHOOK_ROUTE, True)
        trace.shaped(event("evt_replayed"))
        with trace.commit_wait():
            pass
        trace.done("duplicate", 200, None)
        assert trace.span is None
        carried = parse_traceparent(trace.carried)
        assert carried is not None and not carried.sampled
        assert carried.trace_id != PROVIDERS_TRACE  # our own draw, not the sender's trace


async def test_the_ingestion_hot_path_makes_no_sdk_call_when_unsampled(no_sdk: None) -> None:
    """Through the real endpoint (fake ports): an accepted request records its event
    with an unsampled `traceparent`; a request with a bad signature and a sampled
    `traceparent` is refused; neither touches the SDK, `trust_incoming` on."""
    base = make_settings()
    gw = Gateway(dataclasses.replace(base, tracing=settings(trust_incoming=True)))
    async with lifespan(gw.app):
        body = orjson.dumps({"id": "evt_hot", "type": "payment_intent.succeeded"})
        accepted = await post(gw, stripe(body))
        path, headers, chunks = stripe(body, secret="whsec_wrong")
        refused = await post(gw, (path, {**headers, "traceparent": PROVIDERS_SAMPLED}, chunks))
    assert accepted.status == 200, accepted.body
    assert refused.status == 401, refused.body
    [recorded] = gw.inbox.recorded.values()
    carried = parse_traceparent(recorded.traceparent)
    assert carried is not None and not carried.sampled
