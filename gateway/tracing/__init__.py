"""Traces (OpenTelemetry over OTLP/HTTP): the only door to the SDK, which only
`gateway.tracing.otel` imports.

Off by default, and then free: `ENABLED` is a module-level flag the hot paths read
before anything else (no span objects, no context look-ups), and the SDK is not even
imported (`gateway serve`'s start-up cost stays as it was). `configured(...)`, entered
once per process by the composition root, turns it on.

The spans (README, "Tracing"): the HTTP request and its group-commit wait; the publish
(inline or relay), a child of the request through the `traceparent` stored with the row;
the settlement, a child of the publish through the message's `traceparent`, with its
currency look-up, ledger posting and DLQ parking. Attributes name provider, event id,
type, subject, outcome and error class; never secrets, signatures or bodies.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Protocol

from gateway.core.trace_context import TraceParent
from gateway.settings import TracingSettings

if TYPE_CHECKING:
    from gateway.tracing.otel import Backend

#: True while a process exports spans; read by every hot path before anything else.
ENABLED = False
_backend: Backend | None = None

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
    global ENABLED, _backend
    if not settings.enabled or ENABLED:
        yield
        return
    from gateway.tracing.otel import Backend  # the SDK loads only when tracing is on

    backend = Backend(settings, settings.service_name or default_service)
    _backend, ENABLED = backend, True
    try:
        yield
    finally:
        ENABLED, _backend = False, None
        await asyncio.to_thread(backend.shutdown)


def start(
    name: str,
    *,
    kind: str = "internal",
    attributes: Attributes | None = None,
    parent: Span | TraceParent | None = None,
    links: Sequence[TraceParent] = (),
    start_ns: int | None = None,
) -> Span:
    """A started span: a child of `parent` (a span, or another process's span), else of
    the current span, else the root of a new trace. `kind`: internal, server, producer,
    consumer or client. Only while `ENABLED`."""
    return _on().start(name, kind, attributes, parent, links, start_ns)


def start_root(name: str, *, kind: str = "internal", attributes: Attributes | None = None,
               links: Sequence[TraceParent] = ()) -> Span:  # fmt: skip
    """A span that starts a new trace whatever is current."""
    return _on().start(name, kind, attributes, None, links, None, root=True)


def traceparent(span: Span) -> str:
    """The span's `traceparent` value, to carry it to another process."""
    return _on().traceparent(span)


def activate(span: Span) -> object:
    """Make `span` current (child spans and log lines join it); returns the token for
    `deactivate`."""
    return _on().activate(span)


def deactivate(token: object) -> None:
    _on().deactivate(token)


def failed(span: Span, error_class: str) -> None:
    """Mark the span as failed with the gateway's stable error class."""
    span.set_attribute("gateway.error_class", error_class)
    _on().set_error(span, error_class)


def current_ids() -> tuple[str, str] | None:
    """(trace id, span id) of the current span in hex, or None (for the JSON logs)."""
    backend = _backend
    return None if backend is None else backend.current_ids()


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
        backend = _on()
        self._span = backend.start(self._name, "internal", self._attributes, self._parent, (), None)
        self._token = backend.activate(self._span)
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
            failed(span, str(getattr(exc, "error_class", type(exc).__name__)))
        if _backend is not None:
            _backend.deactivate(self._token)
        span.end()


def child(
    parent: Span | None, name: str, attributes: Attributes | None = None
) -> contextlib.AbstractContextManager[Span | None]:
    """`with child(span, "ledger.post"):` a current child of `span`; nothing at all when
    `span` is None (tracing off, or the work belongs to no traced event)."""
    if parent is None or not ENABLED:
        return _NO_SPAN
    return _Child(parent, name, attributes)


def current_child(
    name: str, attributes: Attributes | None = None
) -> contextlib.AbstractContextManager[Span | None]:
    """`with current_child("currency.rate"):` a child of whatever span is current (a new
    trace when none is); nothing at all while tracing is off."""
    if not ENABLED:
        return _NO_SPAN
    return _Child(None, name, attributes)


class _Activated:
    __slots__ = ("_span", "_token")

    def __init__(self, span: Span) -> None:
        self._span = span
        self._token: object = None

    def __enter__(self) -> None:
        self._token = _on().activate(self._span)

    def __exit__(self, *exc: object) -> None:
        if _backend is not None:
            _backend.deactivate(self._token)


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
    "current_child",
    "current_ids",
    "deactivate",
    "failed",
    "start",
    "start_root",
    "traceparent",
]
