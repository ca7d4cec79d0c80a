"""W3C Trace Context `traceparent` values, read and written without I/O.

`00-{trace id: 32 hex}-{span id: 16 hex}-{flags: 2 hex}`. The gateway writes one into
each stream message (`gateway.tracing` and the NATS headers) and reads it back in the
worker; a provider's own is read only to be linked, or trusted when configured.
Reading follows the spec's rules: lower-case hex only, ids not all zeros, version `ff`
refused, and a later version's extra fields ignored.
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
