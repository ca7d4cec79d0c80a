"""The edge of every HTTP server the gateway runs (the public port, the console): the
deadlines and limits that uvicorn does not enforce.

uvicorn's httptools protocol buffers a request head (and chunked trailers) of any size,
and runs a timer only while a kept-alive connection is idle: the first byte of anything
cancels it. A client could hold a socket for ever by trickling a head, a body, or the
rest of a body after an early answer (401, 404). `EdgeProtocol` gives every connection a
deadline at every phase and one budget for what is not body:

1. head (`header_timeout_s`): started when the connection opens, and when a later head
   does not arrive in one read; `408` when part of a head came, a plain close when
   nothing did;
2. body (`body_timeout_s`): the whole body must follow its head within this long; `408`
   while the application still waits for it, a close once it has answered;
3. after an early answer (the response is complete, the body is not): the rest of the
   body is read and dropped for at most `LINGER_S` or `LINGER_MAX_BYTES`, then the
   connection is closed; drained in time, it is kept alive;
4. between requests: uvicorn's keep-alive timer (`keepalive_timeout_s`), re-armed here
   when a drained body ends after its answer (uvicorn's own was cancelled by that body);
   at most `MAX_PIPELINED` requests wait behind the one being answered;
5. while the client takes none of its answer (writing paused): `WRITE_STALL_S`;
6. the budget (`max_header_bytes`): request line and headers, then a chunked body's
   chunk-size lines and trailers, counted as they arrive, one addition per read; over
   it, `431` and the connection closed, having buffered at most the budget plus one read.
   A head that begins mid-read (pipelined behind the end of the previous request) is
   charged that whole read until it ends, then what was parsed of it, and measured
   once complete.

A request line must have an origin-form target (`/path`) and HTTP/1.0 or 1.1: anything
else (HTTP/0.9's version-less line, an absolute URL) is answered `400`.

Refusals are written directly (well-formed, `Connection: close`, a small JSON body),
counted in `gateway_http_refused_total{reason}` and logged as one line without any
header content. After a refusal the connection reads and drops what the client is still
sending for a moment (bounded in time and bytes), so the answer is not destroyed by a
reset from unread data.

It relies on `HttpToolsProtocol` internals (`parser`, `cycle`, `pipeline`,
`timeout_keep_alive_task`, the parser callbacks), hence the pinned uvicorn range in
pyproject.toml.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import resource
from collections.abc import Callable
from typing import Any

import httptools
import orjson
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from gateway.edge_writes import CoalescedWrites
from gateway.metrics import Counter
from gateway.settings import HttpSettings

log = logging.getLogger(__name__)

#: The lifespan state key under which the application leaves its refusal counter
#: (`gateway_http_refused_total`) for the protocol to find.
REFUSALS_STATE_KEY = "gateway.http_refused_total"
#: After a refusal or an early answer, what the client is still sending is read and
#: dropped for at most this long, or this many bytes, before the connection is closed.
LINGER_S = 2.0
LINGER_MAX_BYTES = 1 << 20
#: Requests queued behind the one being answered (HTTP/1.1 pipelining). uvicorn queues
#: every head in a read, and one 64 KiB read holds thousands of small ones: 13 MB of
#: pipelined GETs on one connection took 750 MB in 20 s. Clients that pipeline at all
#: keep a few requests in flight.
MAX_PIPELINED = 16
#: A client that takes none of its answer (the send buffer stays full) for this long is
#: closed: otherwise the response, its task and the connection wait for ever.
WRITE_STALL_S = 10.0
#: The HTTP versions served; llhttp reports a request line without one as "0.9".
_VERSIONS = frozenset({"1.1", "1.0"})

_ANSWERS: dict[str, tuple[int, str]] = {
    "header_too_large": (431, "the request head or its trailers exceed the server's limit"),
    "header_timeout": (408, "the request head did not arrive in time"),
    "body_timeout": (408, "the request body did not arrive in time"),
    "bad_request_line": (400, "the request line needs a /path target and HTTP/1.0 or 1.1"),
    # Never written (an answer would interleave with the ones owed): for the log.
    "too_many_pipelined": (429, "too many requests pipelined on one connection"),
}


class _Refused(Exception):
    """Raised from the parser's callback to stop a head found unacceptable at its end."""


class EdgeProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a deadline at every phase and a head budget."""

    def __init__(
        self,
        *args: Any,
        max_header_bytes: int,
        header_timeout_s: float,
        body_timeout_s: float,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self._max_header_bytes = max_header_bytes
        self._header_timeout_s = header_timeout_s
        self._body_timeout_s = body_timeout_s
        # True from the end of one message until the next head is complete.
        self._head_open = True
        # Non-body bytes of the current message: its head (up to one read too many),
        # then, for a chunked body, chunk-size lines and trailers (on_body takes the
        # body's bytes back out).
        self._head_bytes = 0
        # The head began mid-read, behind the end of the previous message: its count
        # starts as that whole read (`_head_charged`, an upper bound until the read ends,
        # then the part measured so far), so it is measured when complete.
        self._head_midread = False
        self._head_charged = False
        self._read_bytes = 0  # the size of the read being parsed
        self._chunked = False  # the current message has a chunked body
        self._head_measured = 0  # a chunked message's head, measured at its first chunk
        self._draining = False  # answered before its body was in: dropping the rest
        self._deadline: asyncio.TimerHandle | None = None  # the current phase's
        self._write_deadline: asyncio.TimerHandle | None = None  # while writing is paused
        self._refusal: str | None = None  # set by on_headers_complete before it stops
        self._refused = False  # refusing this connection: drop input, close soon
        self._dropped_bytes = 0

    # -- asyncio.Protocol ------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._writes = CoalescedWrites(transport, self.loop)
        super().connection_made(self._writes)  # type: ignore[arg-type]  # a transport's shape
        self._arm(self._header_timeout_s, self._head_timed_out)

    def connection_lost(self, exc: Exception | None) -> None:
        self._writes.discard()
        self._cancel_deadline()
        if self._write_deadline is not None:
            self._write_deadline.cancel()
        super().connection_lost(exc)

    # Past the complexity bar on purpose: the HTTP parser's callback, each branch a
    # protocol state, kept inline for speed.
    def data_received(self, data: bytes) -> None:  # noqa: C901
        size = len(data)
        if self._head_open:
            if self._refused:
                self._drop(data)
                return
            self._head_bytes += size
        else:
            if self._chunked:
                self._head_bytes += size
            if self._draining:
                self._dropped_bytes += size
                if self._dropped_bytes > LINGER_MAX_BYTES:
                    self._close("body_not_drained")
                    return
        self._read_bytes = size
        # From here on as uvicorn's own `data_received`, except that a head refused when
        # it completes is answered by `_refuse` instead of a plain 400.
        self._unset_keepalive_if_required()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
        except httptools.HttpParserError:
            if self._refusal is not None:  # found by on_headers_complete
                self._refuse(self._refusal)
                return
            msg = "Invalid HTTP request received."
            self.logger.warning(msg)
            self.send_400_response(msg)
            return
        if self._head_open:
            if self._head_bytes:  # a head begun, not yet complete
                if self._over_budget():
                    self._refuse("header_too_large")
                elif self._deadline is None:  # a later request on a kept-alive connection
                    self._arm(self._header_timeout_s, self._head_timed_out)
            elif self._answered() and self.timeout_keep_alive_task is None:
                # A body drained after its answer: its bytes cancelled uvicorn's timer.
                self.timeout_keep_alive_task = self.loop.call_later(
                    self.timeout_keep_alive, self.timeout_keep_alive_handler
                )
        elif self._chunked and self._head_bytes > self._max_header_bytes:
            self._refuse("header_too_large")  # chunk-size lines and trailers
        elif self._deadline is None:  # a body begun in this read
            self._arm(self._body_timeout_s, self._body_timed_out)

    # -- parser callbacks ------------------------------------------------------------

    def on_message_begin(self) -> None:
        if not self._head_bytes:
            # The previous message ended in this read and this head begins in it: charge
            # the whole read, an upper bound measured once it crosses the budget.
            self._head_bytes = self._read_bytes
            self._head_midread = self._head_charged = True
        super().on_message_begin()

    def on_headers_complete(self) -> None:
        limit = self._max_header_bytes
        if self._head_midread:
            # Measured instead: the rest of this read is not counted (at most one read).
            self._head_midread = self._head_charged = False
            self._head_bytes = self._head_size()
            over = self._head_bytes > limit
        else:
            # Only a head that completed in the read that crossed the budget needs measuring.
            over = self._head_bytes > limit and self._head_size() > limit
        if over:
            self._refusal = "header_too_large"
        elif self.parser.get_http_version() not in _VERSIONS or self.url[:1] != b"/":
            self._refusal = "bad_request_line"
        elif len(self.pipeline) >= MAX_PIPELINED:
            # The queued requests are answered, then the connection is closed.
            self._refusal = "too_many_pipelined"
        if self._refusal is not None:
            raise _Refused  # stops the parser; data_received answers
        self._head_open = False
        self._cancel_deadline()
        limit_concurrency = self.limit_concurrency
        if limit_concurrency is not None and (
            len(self.connections) >= limit_concurrency or len(self.tasks) >= limit_concurrency
        ):
            self._count("over_capacity")  # uvicorn answers it 503 (`max_connections`)
        super().on_headers_complete()

    def _start_asgi_task(self, cycle: Any, app: Any) -> None:
        # Each answer's head and body in one write: the first write of the request
        # about to be answered is its head (pipelined ones start here one by one).
        self._writes.expect_head()
        super()._start_asgi_task(cycle, app)

    def on_chunk_header(self) -> None:
        if not self._chunked:
            # The first chunk. Trailers are not headers: uvicorn would add them to this
            # request's (which the application may not have read yet), where one could
            # stand in for a header a proxy vetted. They get a list of their own.
            self._chunked = True
            self._head_measured = self._head_size()
            self.headers = []

    def on_body(self, body: bytes) -> None:
        if self._chunked:
            self._head_bytes -= len(body)
        super().on_body(body)

    def on_message_complete(self) -> None:
        limit = self._max_header_bytes
        if (
            self._chunked
            and self._head_bytes > limit
            and self._head_measured + _fields_bytes(self.headers) > limit
        ):
            # Ended in the read that crossed the budget: the head and trailers measured,
            # and refused before the application sees the body complete.
            self._refusal = "header_too_large"
            raise _Refused
        super().on_message_complete()
        self._head_open = True
        self._head_bytes = 0
        self._chunked = self._draining = False
        self._cancel_deadline()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self._head_open or self._refused or self.transport.is_closing():
            return
        if self.cycle.response_complete:
            # Answered before the body was in (401 before reading it, 404, 413, ...):
            # drop the rest for a moment, so the answer is not lost to a reset, then close.
            self._draining = True
            self._dropped_bytes = 0
            self._unset_keepalive_if_required()
            self._cancel_deadline()
            self._arm(LINGER_S, self._drain_timed_out)

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._write_deadline is None:
            self._write_deadline = self.loop.call_later(WRITE_STALL_S, self._write_stalled)

    def resume_writing(self) -> None:
        if self._write_deadline is not None:
            self._write_deadline.cancel()
            self._write_deadline = None
        super().resume_writing()

    # -- the deadlines ---------------------------------------------------------------

    def _answered(self) -> bool:
        """The latest request has had its whole answer."""
        return self.cycle is not None and self.cycle.response_complete

    def _arm(self, delay_s: float, callback: Callable[[], None]) -> None:
        self._deadline = self.loop.call_later(delay_s, callback)

    def _cancel_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _head_timed_out(self) -> None:
        self._deadline = None
        if self.transport.is_closing() or not self._head_open:
            return
        if self.cycle is not None and not self.cycle.response_complete:
            # A pipelined head stalls behind a response still being produced: writing now
            # would interleave; close once that response is sent.
            self.cycle.keep_alive = False
            return
        if self._head_bytes == 0:
            self._count("no_request")
            log.info("connection closed: no request within header_timeout_s", extra=self._where())
            self.transport.close()
            return
        self._refuse("header_timeout")

    def _body_timed_out(self) -> None:
        self._deadline = None
        if self.transport.is_closing() or self._head_open:
            return
        if self.pipeline:
            # Queued behind a response still being written, with reading paused: its
            # body cannot arrive yet. That wait is bounded by the earlier request's own.
            self._arm(self._body_timeout_s, self._body_timed_out)
            return
        self._refuse("body_timeout")

    def _write_stalled(self) -> None:
        self._write_deadline = None
        self._close("write_stalled")
        # A close would wait for the send buffer to empty, which is what never happens.
        # connection_lost then releases the response waiting to write.
        self.transport.abort()

    def _drain_timed_out(self) -> None:
        self._deadline = None
        if not self.transport.is_closing() and not self._head_open:
            self._close("body_not_drained")

    # -- the budget ------------------------------------------------------------------

    def _head_size(self) -> int:
        """The head's size as sent (up to optional whitespace), or of as much of it as
        the parser has passed on."""
        line = len(self.parser.get_method()) + len(self.url) + len(" HTTP/1.1\r\n") + 1
        return line + _fields_bytes(self.headers)

    def _over_budget(self) -> bool:
        """Whether the open head, incomplete at the end of a read, is over budget."""
        if self._head_charged:
            # From now on, what has been parsed plus every later read: a lower bound (the
            # header being parsed is within this read), so a refusal is never wrong.
            self._head_charged = False
            self._head_bytes = self._head_size()
        return self._head_bytes > self._max_header_bytes

    # -- refusing --------------------------------------------------------------------

    def _refuse(self, reason: str) -> None:
        """Answer with 431, 408 or 400, then close after a short linger."""
        status, detail = _ANSWERS[reason]
        in_body = not self._head_open
        self._refused = True
        self._head_open = True  # so that data_received drops whatever follows
        self._cancel_deadline()
        self._unset_keepalive_if_required()
        self._count(reason)
        log.warning(
            "request refused",
            extra={"reason": reason, "status": status, "head_bytes": self._head_bytes}
            | self._where(),
        )
        cycle = self.cycle
        if in_body:
            if self.pipeline or cycle.response_started:
                # An answer is being written (an earlier one, or this request's own).
                self.transport.close()
                return
            # The application waits for this body: it is told the client is gone, so
            # it writes nothing, and the answer is ours.
            cycle.disconnected = True
            cycle.message_event.set()
        elif cycle is not None and not cycle.response_complete:
            # Pipelined behind a response still being produced: an answer would
            # interleave. That response is sent, then the connection closed.
            cycle.keep_alive = False
            return
        body = orjson.dumps({"error": reason, "detail": detail})
        content = [STATUS_LINE[status]]
        for name, value in self.server_state.default_headers:
            content.extend([name, b": ", value, b"\r\n"])
        content.extend(
            [
                b"content-type: application/json\r\n",
                b"content-length: %d\r\n" % len(body),
                b"connection: close\r\n\r\n",
                body,
            ]
        )
        self.transport.write(b"".join(content))
        try:
            # Half-close: the client reads the answer and its EOF; its own close (or the
            # linger running out) ends the connection.
            self.transport.write_eof()
        except (NotImplementedError, RuntimeError, OSError):
            self.transport.close()
            return
        self._dropped_bytes = 0
        self._arm(LINGER_S, self.transport.close)

    def _close(self, reason: str) -> None:
        """Close a connection that has had its answer, without another."""
        self._refused = True
        self._head_open = True  # so that data_received drops whatever follows
        self._cancel_deadline()
        self._count(reason)
        log.info("connection closed", extra={"reason": reason} | self._where())
        self.transport.close()

    def _drop(self, data: bytes) -> None:
        self._dropped_bytes += len(data)
        if self._dropped_bytes > LINGER_MAX_BYTES:
            self.transport.close()

    def _count(self, reason: str) -> None:
        counter = self.app_state.get(REFUSALS_STATE_KEY)
        if isinstance(counter, Counter):
            counter.inc(reason=reason)

    def _where(self) -> dict[str, object]:
        return {"client": self.client[0] if self.client else None}


def _fields_bytes(fields: list[tuple[bytes, bytes]]) -> int:
    """Header (or trailer) lines as sent, `name: value\r\n` each, and the blank line."""
    return sum(len(n) + len(v) + 4 for n, v in fields) + 2


def edge_options(http: HttpSettings, max_connections: int | None = None) -> dict[str, Any]:
    """The uvicorn options that put the `[http]` limits in force (`max_connections`
    overriding `[http]`'s, for a listener with a cap of its own: the console).

    The protocol is a `functools.partial` of a module-level class, so the config still
    pickles for `gateway serve --workers N`.
    """
    return {
        "http": functools.partial(
            EdgeProtocol,
            max_header_bytes=http.max_header_bytes,
            header_timeout_s=http.header_timeout_s,
            body_timeout_s=http.body_timeout_s,
        ),
        "timeout_keep_alive": http.keepalive_timeout_s,
        "limit_concurrency": max_connections or http.max_connections,
        "backlog": http.backlog,
    }


def raise_file_limit(http: HttpSettings, spare: int = 256) -> None:
    """Raise the soft open-files limit to fit `max_connections` plus `spare`, as far as the
    hard limit allows (a common soft limit is 1024); warn when it cannot."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = http.max_connections + spare
    if soft != resource.RLIM_INFINITY and soft < wanted:
        target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        if target < wanted:
            log.warning(
                "open-files limit below http.max_connections",
                extra={"limit": target, "max_connections": http.max_connections},
            )
