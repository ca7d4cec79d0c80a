"""One write to the socket per answer, where uvicorn makes two.

uvicorn's HTTP protocol writes a response's head when the application starts it and the
body when the application sends it: for a small answer (every webhook's), two `send()`
system calls back to back, the second often in the same turn of the event loop. In
a py-spy profile of `make bench` the two took a fifth of the serving process's samples.

`CoalescedWrites` stands between the protocol and its transport. Once told a head is
coming (`expect_head`, when a request's head is complete), it holds the next write and
sends it together with the write after it; if that one does not come in the same turn
of the loop (a streamed answer, a `100 Continue`), the held bytes go out alone at the
start of the next. The order of the bytes never changes: everything passes through one
queue, `close` and `write_eof` send what is held first, `abort` drops it as it drops the
transport's own buffer. Every other attribute is the transport's own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

#: A write at most this large is joined to the held head (one copy of it); a larger one
#: follows the head in a write of its own.
JOIN_MAX_BYTES = 16 * 1024


class CoalescedWrites:
    """A transport whose head write waits for the body write that follows it."""

    __slots__ = ("_expecting", "_flush_handle", "_held", "_loop", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: bytes | None = None
        self._expecting = False
        self._flush_handle: asyncio.Handle | None = None

    @property
    def transport(self) -> asyncio.Transport:
        return self._transport

    def expect_head(self) -> None:
        """The next write is a response's head: hold it for the write after it."""
        self._expecting = True

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._held is not None:
            held, self._held = self._held, None
            self._expecting = False
            self._cancel_flush()
            if len(data) <= JOIN_MAX_BYTES:
                self._transport.write(held + bytes(data))
                return
            self._transport.write(held)  # a large body is not copied to save one call
            self._transport.write(data)
        elif self._expecting and not self._transport.is_closing():
            self._expecting = False
            self._held = bytes(data)
            self._flush_handle = self._loop.call_soon(self.flush)
        else:
            self._transport.write(data)

    def writelines(self, chunks: Iterable[bytes | bytearray | memoryview]) -> None:
        self.write(b"".join(chunks))

    def flush(self) -> None:
        """Send what is held, if anything (nothing once the transport is closing
        without us: the protocol was handed elsewhere, and its connection is gone)."""
        self._flush_handle = None
        self._expecting = False
        if self._held is not None:
            held, self._held = self._held, None
            if not self._transport.is_closing():
                self._transport.write(held)

    def discard(self) -> None:
        """The connection is gone: nothing held is sent."""
        self._held = None
        self._expecting = False
        self._cancel_flush()

    def get_write_buffer_size(self) -> int:
        held = 0 if self._held is None else len(self._held)
        return self._transport.get_write_buffer_size() + held

    def write_eof(self) -> None:
        self.flush()
        self._transport.write_eof()

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def abort(self) -> None:
        self.discard()
        self._transport.abort()

    def _cancel_flush(self) -> None:
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)
