"""The public port's edge: limits on the request head that uvicorn does not enforce.

uvicorn's httptools protocol buffers a request head of any size and keeps a connection
that never completes its head open for ever: its keep-alive timer is armed only after a
response and cancelled by the first byte of the next request. `EdgeProtocol` adds, per
connection:

1. a head budget (`max_header_bytes`, request line plus headers): bytes are counted as
   they arrive, one addition per read, until the parser reports the head complete; a
   head over budget is answered `431` and the connection closed, having buffered at most
   the budget plus one read;
2. a head deadline (`header_timeout_s`), started when the connection opens and again
   when a head does not arrive in one read on a kept-alive connection: `408` when part
   of a head came, a plain close when nothing did.

Refusals are written directly (well-formed, `Connection: close`, a small JSON body),
counted in `gateway_http_refused_total{reason}` and logged as one line without any
header content. After a refusal the connection reads and drops what the client is still
sending for a moment (bounded in time and bytes), so the answer is not destroyed by a
reset from unread data.

It relies on `HttpToolsProtocol` internals (`parser`, `cycle`, `_unset_keepalive_if_required`,
the parser callbacks), hence the pinned uvicorn range in pyproject.toml.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import resource
from typing import Any

import httptools
import orjson
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from gateway.metrics import Counter
from gateway.settings import HttpSettings

log = logging.getLogger("gateway.ingest.edge")

#: The lifespan state key under which the application leaves its refusal counter
#: (`gateway_http_refused_total`) for the protocol to find.
REFUSALS_STATE_KEY = "gateway.http_refused_total"
#: After a refusal, what the client is still sending is read and dropped for at most this
#: long, or this many bytes, before the connection is closed for good.
LINGER_S = 2.0
LINGER_MAX_BYTES = 1 << 20

_ANSWERS: dict[str, tuple[int, str]] = {
    "header_too_large": (431, "the request head exceeds the server's limit"),
    "header_timeout": (408, "the request head did not arrive in time"),
}


class _HeadTooLarge(Exception):
    """Raised from the parser's callback to stop a head found over budget at its end."""


class EdgeProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a head budget and a head deadline."""

    def __init__(
        self, *args: Any, max_header_bytes: int, header_timeout_s: float, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self._max_header_bytes = max_header_bytes
        self._header_timeout_s = header_timeout_s
        # True from the end of one message until the next head is complete.
        self._head_open = True
        self._head_bytes = 0  # bytes counted in the open head (up to one read too many)
        self._head_timer: asyncio.TimerHandle | None = None
        self._refused = False  # refusing this connection: drop input, close soon
        self._dropped_bytes = 0

    # -- asyncio.Protocol ------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._head_timer = self.loop.call_later(self._header_timeout_s, self._head_timed_out)

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._head_open:
            if self._refused:
                self._drop(data)
                return
            self._head_bytes += len(data)
        # From here on as uvicorn's own `data_received`, except that a head found over
        # budget when it completes is answered 431 instead of 400.
        self._unset_keepalive_if_required()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
        except httptools.HttpParserError:
            if self._refused:  # on_headers_complete found the head over budget
                self._refuse("header_too_large")
                return
            msg = "Invalid HTTP request received."
            self.logger.warning(msg)
            self.send_400_response(msg)
            return
        if self._head_open and self._head_bytes:  # a head begun, not yet complete
            if self._head_bytes > self._max_header_bytes:
                self._refuse("header_too_large")
            elif self._head_timer is None:  # a later request on a kept-alive connection
                self._head_timer = self.loop.call_later(
                    self._header_timeout_s, self._head_timed_out
                )

    # -- parser callbacks ------------------------------------------------------------

    def on_headers_complete(self) -> None:
        self._head_open = False
        self._cancel_head_timer()
        # Only a head that completed in the read that crossed the budget needs measuring.
        if self._head_bytes > self._max_header_bytes and self._head_size() > (
            self._max_header_bytes
        ):
            self._refused = True
            raise _HeadTooLarge  # stops the parser; data_received answers 431
        limit = self.limit_concurrency
        if limit is not None and (len(self.connections) >= limit or len(self.tasks) >= limit):
            self._count("over_capacity")  # uvicorn answers it 503 (`max_connections`)
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._head_open = True
        self._head_bytes = 0

    # -- the limits ------------------------------------------------------------------

    def _head_size(self) -> int:
        """The complete head's size as sent (up to optional whitespace)."""
        line = len(self.parser.get_method()) + len(self.url) + len(" HTTP/1.1\r\n") + 1
        return line + sum(len(n) + len(v) + 4 for n, v in self.headers) + 2

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
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

    def _refuse(self, reason: str) -> None:
        """Answer the open head with 431 or 408, then close after a short linger."""
        status, detail = _ANSWERS[reason]
        self._refused = True
        self._head_open = True  # so that data_received drops whatever follows
        self._cancel_head_timer()
        self._unset_keepalive_if_required()
        self._count(reason)
        log.warning(
            "request head refused",
            extra={"reason": reason, "status": status, "head_bytes": self._head_bytes}
            | self._where(),
        )
        if self.cycle is not None and not self.cycle.response_complete:
            # Pipelined behind a response still being written: an answer would interleave.
            self.transport.close()
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
        self._head_timer = self.loop.call_later(LINGER_S, self.transport.close)

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


def edge_options(http: HttpSettings) -> dict[str, Any]:
    """The uvicorn options that put the `[http]` limits in force.

    The protocol is a `functools.partial` of a module-level class, so the config still
    pickles for `gateway serve --workers N`.
    """
    return {
        "http": functools.partial(
            EdgeProtocol,
            max_header_bytes=http.max_header_bytes,
            header_timeout_s=http.header_timeout_s,
        ),
        "timeout_keep_alive": http.keepalive_timeout_s,
        "limit_concurrency": http.max_connections,
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
