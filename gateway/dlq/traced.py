"""The replay's spans: one per dead letter `gateway dlq replay` runs again.

Each replay is a trace of its own (an operator's action, hours or days after the
event), linked to the event's trace when the parked message carried a `traceparent`.
With tracing off, or a replay not sampled, a replay has no span (None), which
`replay_done` takes like any other.
"""

from __future__ import annotations

from gateway import tracing
from gateway.core.dlq.model import DlqRow
from gateway.core.trace_context import HEADER, parse_traceparent


def replay_span(row: DlqRow) -> tracing.Span | None:
    """The span of one claimed row: its stage, event and the error class it was parked
    with (`gateway.dlq.error_class`; `gateway.error_class` is this replay's own); None
    (no SDK call) when its new trace is not sampled (`sample_ratio`) or tracing is off."""
    attributes: dict[str, str | int | float | bool] = {
        "gateway.dlq.id": row.id,
        "gateway.stage": row.stage,
        "gateway.provider": row.provider,
        "gateway.event_id": row.event_id,
        "gateway.dlq.error_class": row.error_class,
        "gateway.attempt": row.attempts + 1,
    }
    if row.subject is not None:
        attributes["gateway.subject"] = row.subject
    parked = parse_traceparent(row.headers.get(HEADER))
    links = () if parked is None else (parked,)
    return tracing.sampled_root("dlq.replay", attributes=attributes, links=links)


def replay_done(span: tracing.Span | None, outcome: str, error_class: str | None) -> None:
    """End the row's span: replayed, or failed with the replay's error class (None:
    nothing)."""
    tracing.set_attributes(span, {"gateway.outcome": outcome})
    if error_class is not None:
        tracing.failed(span, error_class)
    tracing.end(span)
