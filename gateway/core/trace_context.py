"""W3C Trace Context `traceparent` values, read and written without I/O.

`00-{trace id: 32 hex}-{span id: 16 hex}-{flags: 2 hex}`. The gateway writes one into
each stream message (`gateway.tracing` and the NATS headers) and reads it back in the
worker; a provider's own is read only to be linked, or trusted when configured.
Reading follows the spec's rules: lower-case hex only, ids not all zeros, version `ff`
refused, and a later version's extra fields ignored.

Sampling is decided here too, before the SDK is asked for anything (`new_trace`,
`request_parent`): an unsampled event's work then costs no span at all, and its
`traceparent` carries the decision (flags `00`) to the relay and the worker.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

HEADER = "traceparent"
#: The longest value read: version 00 is 55 characters; later versions may add fields,
#: but a header this gateway stores and forwards stays small.
MAX_CHARS = 256
_HEX = re.compile(r"[0-9a-f]+")
_ZERO_TRACE = "0" * 32
_ZERO_SPAN = "0" * 16
SAMPLED = 0x01
#: Sampling compares the low 64 bits of a new trace id with `ratio * 2**64`, as the
#: OpenTelemetry SDK's `TraceIdRatioBased` does.
_LOW_64 = (1 << 64) - 1


@dataclass(frozen=True)
class TraceParent:
    """One span's identity as another process sees it."""

    trace_id: int
    span_id: int
    flags: int = SAMPLED

    @property
    def sampled(self) -> bool:
        return bool(self.flags & SAMPLED)

    def __str__(self) -> str:
        return format_traceparent(self.trace_id, self.span_id, self.flags)


def format_traceparent(trace_id: int, span_id: int, flags: int) -> str:
    """The version-00 header value for a span."""
    return f"00-{trace_id:032x}-{span_id:016x}-{flags & 0xFF:02x}"


def _hex(text: str, length: int) -> bool:
    return len(text) == length and _HEX.fullmatch(text) is not None


def parse_traceparent(value: str | None) -> TraceParent | None:
    """The span a `traceparent` value names, or None when absent or malformed."""
    if not value or len(value) > MAX_CHARS:
        return None
    parts = value.strip().split("-")
    if len(parts) < 4:
        return None
    version, trace_id, span_id, flags = parts[:4]
    if not _hex(version, 2) or version == "ff" or (version == "00" and len(parts) != 4):
        return None
    if not (_hex(trace_id, 32) and _hex(span_id, 16) and _hex(flags, 2)):
        return None
    if trace_id == _ZERO_TRACE or span_id == _ZERO_SPAN:
        return None
    return TraceParent(int(trace_id, 16), int(span_id, 16), int(flags, 16))


def keeps(ratio: float, trace_id: int) -> bool:
    """Whether a new trace with this (random) id is sampled at `ratio` (0 to 1): its low
    64 bits fall under `ratio * 2**64`, the SDK's `TraceIdRatioBased` rule."""
    return (trace_id & _LOW_64) < round(ratio * (1 << 64))


def new_trace(ratio: float, trace_id: int, span_id: int) -> TraceParent:
    """A new trace's context, drawn from two random ids, with the sampling decision in
    its flags. Not sampled, it is what the event carries instead of a span."""
    return TraceParent(trace_id, span_id, SAMPLED if keeps(ratio, trace_id) else 0)


def request_parent(
    incoming: TraceParent | None, trust_incoming: bool, verified: bool, accepted: bool
) -> TraceParent | None:
    """The sender's context a request joins (its sampled flag then decides), or None
    for a new trace of our own, drawn at `sample_ratio`. Anyone can send a
    `traceparent`, and `-01` would make us record the request: it is honoured only when
    the sender is trusted (`trust_incoming`), this request proved to come from it
    (signature or token verified), and its event was newly `accepted`.

    Verified is not enough: a captured delivery verifies again when it is sent again
    (GitHub's and Shopify's signatures cover the body alone, and `traceparent` is not
    signed), so a replay, answered `duplicate`, would let whoever holds one delivery
    choose to be recorded as often as they like."""
    return incoming if trust_incoming and verified and accepted else None
