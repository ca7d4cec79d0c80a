"""`gateway.tracing`'s helpers take `None` for a span (tracing off, or a trace not
sampled) and then do nothing, so callers have one call path for every case."""

from __future__ import annotations

from gateway import tracing
from gateway.settings import TracingSettings
from tests.support.services import free_port


def test_every_span_helper_is_a_no_op_for_none() -> None:
    """Off, a None span: nothing raises, nothing is returned, no context is entered,
    and nothing is current afterwards."""
    assert not tracing.ENABLED
    tracing.failed(None, "SIGNATURE_MISMATCH")
    tracing.set_attributes(None, {"gateway.outcome": "accepted"})
    tracing.end(None)
    tracing.end(None, 123)
    assert tracing.traceparent(None) is None
    assert tracing.start_child(None, "commit.wait", start_ns=1) is None
    token = tracing.activate(None)
    assert token is None
    tracing.deactivate(token)
    with tracing.activated(None), tracing.child(None, "x") as span:
        assert span is None
        assert tracing.current() is None
    assert tracing.current() is None


def test_off_nothing_is_sampled_and_nothing_is_carried() -> None:
    """Off: no root span is drawn and work carries no `traceparent` (whoever traces it
    later decides its sampling)."""
    assert tracing.sampled_root("backfill") is None
    assert tracing.unsampled_traceparent() is None


async def test_on_unsampled_roots_are_none_and_carry_flags_00() -> None:
    """On at `sample_ratio = 0`: no root span, and work carries an unsampled context."""
    config = TracingSettings(endpoint=f"http://127.0.0.1:{free_port()}", sample_ratio=0.0)
    async with tracing.configured(config, "gateway-test"):
        assert tracing.sampled_root("dlq.replay") is None
        carried = tracing.unsampled_traceparent()
        assert carried is not None and carried.endswith("-00")
        # The helpers stay no-ops for None while tracing is on, too.
        tracing.failed(None, "X")
        tracing.deactivate(tracing.activate(None))
        assert tracing.start_child(None, "x") is None
