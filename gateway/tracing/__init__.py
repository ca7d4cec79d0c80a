"""Traces (OpenTelemetry over OTLP/HTTP): the only door to the SDK, which only
`gateway.tracing.otel` imports.

Off by default, and then free: `ENABLED` is a module-level flag the hot paths read
before anything else (no span objects, no context look-ups), and the SDK is not even
imported (`gateway serve`'s start-up cost stays as it was). `configured(...)`, entered
once per process by the composition root, turns it on.

Everywhere else a span is `Span | None`, None meaning "not tracing this" (tracing off, or
a trace not sampled): every helper that takes a span takes None and then does nothing
(`failed`, `end`, `set_attributes`, `deactivate`), returns None (`traceparent`,
`start_child`, `activate`) or a null context (`child`, `activated`), so callers have one
call path and never ask which case they are in.

On, an unsampled event is nearly free too: sampling is decided here (`new_trace`, at
`sample_ratio`) or by the parent's flags before any SDK call, so no span object is made
for it (the SDK's own sampler runs inside `start_span`, after the span's allocation, and
cost about 55 µs a request). The SDK is left to record every span it is asked for.

The spans (docs/observability.md): the HTTP request and its group-commit wait; the publish
(inline or relay), a child of the request through the `traceparent` stored with the row;
the settlement, a child of the publish through the message's `traceparent`, with its
currency look-up, ledger posting and DLQ parking. Attributes name provider, event id,
type, subject, outcome and error class; never secrets, signatures or bodies.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextvars import ContextVar, Token
from types import TracebackType
from typing import TYPE_CHECKING, Protocol, cast, overload

from gateway.core import trace_context
from gateway.core.trace_context import TraceParent
from gateway.errors import error_class_of
from gateway.settings import TracingSettings

if TYPE_CHECKING:
    from gateway.tracing.otel import Backend

#: True while a process exports spans; read by every hot path before anything else.
ENABLED = False
_backend: Backend | None = None
_sample_ratio = 1.0
#: The current span as this module made it current (the SDK's context holds it too):
#: read without asking the SDK, so an unsampled request's log lines and steps cost
#: nothing.
_current: ContextVar[Span | None] = ContextVar("gateway_current_span", default=None)

Attributes = Mapping[str, str | int | float | bool]


class Span(Protocol):
    """What the gateway does with a span (an OpenTelemetry SDK span underneath)."""

    def set_attribute(self, key: str, value: str | int | float | bool) -> None: ...

    def end(self, end_time: int | None = None) -> None: ...


def _on() -> Backend:
    if _backend is None:
        raise RuntimeError("tracing is off: check gateway.tracing.ENABLED first")
    return _backend


@contextlib.asynccontextmanager
async def configured(settings: TracingSettings, default_service: str) -> AsyncIterator[None]:
    """Export this process's spans for the block's lifetime (nothing when off); on exit,
    flush what is buffered (in a thread: the exporter blocks) and turn tracing off."""
    global ENABLED, _backend, _sample_ratio
    if not settings.enabled or ENABLED:
        yield
        return
    from gateway.tracing.otel import Backend  # the SDK loads only when tracing is on

    backend = Backend(settings, settings.service_name or default_service)
    _backend, _sample_ratio, ENABLED = backend, settings.sample_ratio, True
    try:
        yield
    finally:
        ENABLED, _backend = False, None
        await asyncio.to_thread(backend.shutdown)


def new_trace(rand: Callable[[int], int] = random.getrandbits) -> TraceParent:
    """A new trace's context with this process's sampling decision (`sample_ratio`):
    sampled, start its span with `start_root`; not sampled, carry it (`str(...)`, flags
    `00`) so the processes downstream skip the event too. Makes no SDK call.
    `rand(bits)`: the randomness, a seeded one in tests."""
    return trace_context.new_trace(_sample_ratio, rand(128) or 1, rand(64) or 1)


def new_span_id() -> int:
    """A span id for a span started later (`start(..., span_id=...)`): a request's row
    names its span before the span is known to be recorded."""
    return random.getrandbits(64) or 1


def unsampled(trace_id: int | None = None) -> TraceParent:
    """A context that is not sampled, in trace `trace_id` (a new one when None)."""
    if trace_id is None:
        trace_id = random.getrandbits(128) or 1
    return TraceParent(trace_id, random.getrandbits(64) or 1, 0)


def unsampled_traceparent() -> str | None:
    """The `traceparent` to carry with work that belongs to no sampled trace, so that
    the processes downstream skip it too; None while tracing is off (the work carries
    none, and whichever process traces it later draws its own sampling)."""
    return str(unsampled()) if ENABLED else None


def current() -> Span | None:
    """The span made current by `activate`, `activated` or `child`, if any."""
    return _current.get()


def start(
    name: str,
    *,
    kind: str = "internal",
    attributes: Attributes | None = None,
    parent: Span | TraceParent | None = None,
    links: Sequence[TraceParent] = (),
    start_ns: int | None = None,
    span_id: int | None = None,
) -> Span:
    """A started span: a child of `parent` (a span, or another process's span), else of
    the current span, else the root of a new trace. `kind`: internal, server, producer,
    consumer or client. `span_id`: the id it gets (from `new_span_id`), when something
    already carries it. Only while `ENABLED`, and only for a sampled trace: the SDK
    records whatever it is asked to."""
    return _on().start(name, kind, attributes, parent, links, start_ns, span_id=span_id)


def start_root(name: str, *, kind: str = "internal", attributes: Attributes | None = None,
               links: Sequence[TraceParent] = (), start_ns: int | None = None) -> Span:  # fmt: skip
    """A span that starts a new trace whatever is current; only once `new_trace` said
    the trace is sampled."""
    return _on().start(name, kind, attributes, None, links, start_ns, root=True)


def sampled_root(name: str, *, kind: str = "internal", attributes: Attributes | None = None,
                 links: Sequence[TraceParent] = ()) -> Span | None:  # fmt: skip
    """The root span of a new trace drawn at `sample_ratio` (`new_trace`), for work that
    is nobody's child (a backfill pass, a replay); None, with no SDK call, when that
    trace is not sampled or tracing is off."""
    if not ENABLED or not new_trace().sampled:
        return None
    return _on().start(name, kind, attributes, None, links, None, root=True)


def start_child(
    parent: Span | None,
    name: str,
    *,
    kind: str = "internal",
    attributes: Attributes | None = None,
    start_ns: int | None = None,
) -> Span | None:
    """A started child of `parent`, not made current (`child` for a `with` block); None
    when `parent` is None. With `end(..., end_ns)`, a step timed before its span."""
    if parent is None:
        return None
    return _on().start(name, kind, attributes, parent, (), start_ns)


@overload
def traceparent(span: Span) -> str: ...
@overload
def traceparent(span: None) -> None: ...
@overload
def traceparent(span: Span | None) -> str | None: ...
def traceparent(span: Span | None) -> str | None:
    """The span's `traceparent` value, to carry it to another process (None: None)."""
    return None if span is None else _on().traceparent(span)


def activate(span: Span | None) -> object:
    """Make `span` current (child spans and log lines join it); returns the token for
    `deactivate` (None for a None span)."""
    if span is None:
        return None
    return _on().activate(span), _current.set(span)


def deactivate(token: object) -> None:
    """Undo `activate` (a None token: nothing)."""
    if token is None:
        return
    sdk_token, ours = cast("tuple[object, Token[Span | None]]", token)  # activate's pair
    _current.reset(ours)
    _on().deactivate(sdk_token)


def failed(span: Span | None, error_class: str) -> None:
    """Mark the span as failed with the gateway's stable error class (None: nothing)."""
    if span is None:
        return
    span.set_attribute("gateway.error_class", error_class)
    _on().set_error(span, error_class)


def set_attributes(span: Span | None, attributes: Attributes) -> None:
    """Set each of `attributes` on the span (None: nothing)."""
    if span is None:
        return
    for key, value in attributes.items():
        span.set_attribute(key, value)


def end(span: Span | None, end_ns: int | None = None) -> None:
    """End the span, now or at `end_ns` (None: nothing)."""
    if span is not None:
        span.end(end_ns)


def current_ids() -> tuple[str, str] | None:
    """(trace id, span id) of the current span in hex, or None (for the JSON logs)."""
    backend = _backend
    if backend is None or _current.get() is None:
        return None
    return backend.current_ids()


class _NoSpan:
    """The child of nothing: what `child` gives while tracing is off."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


_NO_SPAN = _NoSpan()


class _Child:
    """A current child span for a `with` block; an exception marks it failed."""

    __slots__ = ("_attributes", "_name", "_parent", "_span", "_token")

    def __init__(self, parent: Span | None, name: str, attributes: Attributes | None) -> None:
        self._parent, self._name, self._attributes = parent, name, attributes
        self._span: Span | None = None
        self._token: object = None

    def __enter__(self) -> Span:
        self._span = _on().start(self._name, "internal", self._attributes, self._parent, (), None)
        self._token = activate(self._span)
        return self._span

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        span = self._span
        if span is None:
            return
        if exc is not None and _backend is not None:
            failed(span, error_class_of(exc))
        if _backend is not None:
            deactivate(self._token)
        span.end()


def child(
    parent: Span | None, name: str, attributes: Attributes | None = None
) -> contextlib.AbstractContextManager[Span | None]:
    """`with child(span, "ledger.post"):` a current child of `span`; nothing at all when
    `span` is None (tracing off, or the work belongs to no sampled event)."""
    if parent is None or not ENABLED:
        return _NO_SPAN
    return _Child(parent, name, attributes)


def current_child(
    name: str, attributes: Attributes | None = None
) -> contextlib.AbstractContextManager[Span | None]:
    """`with current_child("currency.rate"):` a child of whatever span is current;
    nothing at all while tracing is off or no span is current (the work belongs to no
    sampled trace)."""
    if not ENABLED or _current.get() is None:
        return _NO_SPAN
    return _Child(None, name, attributes)


class _Activated:
    __slots__ = ("_span", "_token")

    def __init__(self, span: Span) -> None:
        self._span = span
        self._token: object = None

    def __enter__(self) -> None:
        self._token = activate(self._span)

    def __exit__(self, *exc: object) -> None:
        if _backend is not None:
            deactivate(self._token)


def activated(span: Span | None) -> contextlib.AbstractContextManager[None]:
    """`with activated(span):` log lines and child spans join `span` (None: nothing)."""
    if span is None or not ENABLED:
        return _NO_SPAN
    return _Activated(span)


__all__ = [
    "ENABLED",
    "Span",
    "activate",
    "activated",
    "child",
    "configured",
    "current",
    "current_child",
    "current_ids",
    "deactivate",
    "end",
    "failed",
    "new_span_id",
    "new_trace",
    "sampled_root",
    "set_attributes",
    "start",
    "start_child",
    "start_root",
    "traceparent",
    "unsampled",
    "unsampled_traceparent",
]
