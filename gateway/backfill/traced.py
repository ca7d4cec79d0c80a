"""Backfill's spans: one per pass (`gateway backfill`, or a scheduled pass of `gateway
serve`) with its provider and counts, and a child per recovered event.

A recovered event's row and message carry its `backfill.recover` span's `traceparent`,
so the event's publish (now, or later by the relay) and its settlement join the pass's
trace, as a live event's join its request's. With tracing off, or a pass not sampled, a
pass has no span (None), and these helpers take that None like any other.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from gateway import tracing
from gateway.core.backfill.decisions import Window
from gateway.core.events.model import Event

#: The counts a pass's span carries (`Tally` fields), as `gateway.backfill.<name>`.
COUNTS = ("fetched", "present", "recovered", "would_recover", "failed", "inexact")


def pass_span(provider: str, window: Window, dry_run: bool) -> tracing.Span | None:
    """The span of one pass: a trace of its own (a pass is nobody's child); None (no SDK
    call) when that trace is not sampled (`sample_ratio`) or tracing is off."""
    return tracing.sampled_root(
        "backfill",
        attributes={
            "gateway.provider": provider,
            "gateway.backfill.since": window.since.isoformat(),
            "gateway.backfill.until": window.until.isoformat(),
            "gateway.backfill.dry_run": dry_run,
        },
    )


def pass_done(
    span: tracing.Span | None, counts: dict[str, int], unpublished: int, error_class: str | None
) -> None:
    """End the pass's span with its counts (so far, when it failed); None: nothing."""
    attributes: dict[str, str | int | float | bool] = {
        f"gateway.backfill.{name}": counts.get(name, 0) for name in COUNTS
    }
    attributes["gateway.backfill.unpublished"] = unpublished
    attributes["gateway.outcome"] = "failed" if error_class else "done"
    tracing.set_attributes(span, attributes)
    if error_class is not None:
        tracing.failed(span, error_class)
    tracing.end(span)


def recover_spans(events: Iterable[Event]) -> tuple[list[Event], list[tracing.Span | None]]:
    """A `backfill.recover` child of the current pass span per event offered to the
    gate, and the events as they are to be recorded, each carrying its span's
    `traceparent`. Under a pass that is not sampled (no current span): no spans (None
    each), and the events carry one unsampled `traceparent` (flags 00), so that their
    publish and settlement skip the SDK too; with tracing off, the events as they are."""
    if tracing.current() is None:
        carried = tracing.unsampled_traceparent()
        kept = [e if carried is None else replace(e, traceparent=carried) for e in events]
        return kept, [None] * len(kept)
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


def recover_done(span: tracing.Span | None, outcome: str) -> None:
    """End an event's span: published, unpublished (left to the outbox relay), or
    present (a webhook or another run recorded it first); None: nothing."""
    tracing.set_attributes(span, {"gateway.outcome": outcome})
    tracing.end(span)
