"""Backfill's spans: one per pass (`gateway backfill`, or a scheduled pass of `gateway
serve`) with its provider and counts, and a child per recovered event.

Called only while `gateway.tracing.ENABLED`; `backfill.run` checks it first. A recovered
event's row and message carry its `backfill.recover` span's `traceparent`, so the
event's publish (now, or later by the relay) and its settlement join the pass's trace,
as a live event's join its request's.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from gateway import tracing
from gateway.core.backfill import Window
from gateway.core.model import Event

#: The counts a pass's span carries (`Tally` fields), as `gateway.backfill.<name>`.
COUNTS = ("fetched", "present", "recovered", "would_recover", "failed", "inexact")


def pass_span(provider: str, window: Window, dry_run: bool) -> tracing.Span | None:
    """The span of one pass: a trace of its own (a pass is nobody's child); None (no SDK
    call) when that trace is not sampled (`sample_ratio`)."""
    if not tracing.new_trace().sampled:
        return None
    return tracing.start_root(
        "backfill",
        attributes={
            "gateway.provider": provider,
            "gateway.backfill.since": window.since.isoformat(),
            "gateway.backfill.until": window.until.isoformat(),
            "gateway.backfill.dry_run": dry_run,
        },
    )


def pass_done(
    span: tracing.Span, counts: dict[str, int], unpublished: int, error_class: str | None
) -> None:
    """End the pass's span with its counts (so far, when it failed)."""
    for name in COUNTS:
        span.set_attribute(f"gateway.backfill.{name}", counts.get(name, 0))
    span.set_attribute("gateway.backfill.unpublished", unpublished)
    span.set_attribute("gateway.outcome", "failed" if error_class else "done")
    if error_class is not None:
        tracing.failed(span, error_class)
    span.end()


def recover_spans(events: Iterable[Event]) -> tuple[list[Event], list[tracing.Span | None]]:
    """A `backfill.recover` child of the current pass span per event offered to the
    gate, and the events as they are to be recorded, each carrying its span's
    `traceparent`. Under a pass that is not sampled (no current span): no spans (None
    each), and the events carry one unsampled `traceparent` (flags 00), so that their
    publish and settlement skip the SDK too."""
    if tracing.current() is None:
        events = list(events)
        carried = str(tracing.unsampled())
        return [replace(e, traceparent=carried) for e in events], [None] * len(events)
    shaped: list[Event] = []
    spans: list[tracing.Span | None] = []
    for event in events:
        attributes: dict[str, str | int | float | bool] = {
            "gateway.provider": event.provider,
            "gateway.event_id": event.event_id,
        }
        if event.event_type is not None:
            attributes["gateway.event_type"] = event.event_type
        if event.subject is not None:
            attributes["gateway.subject"] = event.subject
        span = tracing.start("backfill.recover", kind="producer", attributes=attributes)
        spans.append(span)
        shaped.append(replace(event, traceparent=tracing.traceparent(span)))
    return shaped, spans


def recover_done(span: tracing.Span, outcome: str) -> None:
    """End an event's span: published, unpublished (left to the outbox relay), or
    present (a webhook or another run recorded it first)."""
    span.set_attribute("gateway.outcome", outcome)
    span.end()
