"""A fault proxy that reads NATS: it drops a share of the relay's stream publishes on
their way to the server, or of the PubAcks on their way back, frame by frame.

The byte-level toxics (`chaos.toxics`) cannot lose one message and keep the next: any
cut they make breaks the connection's framing, so the client reconnects and the whole
pipeline is sent again in order. Losing single frames is what reorders a stream:

- a publish dropped before the server: the later messages of the same pipeline are
  stored, this one gets no PubAck, and the relay sends it again after them;
- a PubAck dropped after the server: the message is stored in its place, the relay
  sends it again, and the duplicate window (`Nats-Msg-Id`) answers "duplicate".

NATS frames (both directions): a control line ending in CRLF; `PUB`/`MSG` and
`HPUB`/`HMSG` lines end with the payload's size in bytes (headers included), and the
payload follows with its own CRLF. Everything else (INFO, CONNECT, SUB, PING, +OK...)
is the line alone.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from chaos.proxy import FaultProxy, Link
from chaos.toxics import Stream

_CRLF = b"\r\n"
_WITH_PAYLOAD = {b"PUB", b"MSG", b"HPUB", b"HMSG"}
_WITH_HEADERS = {b"HPUB", b"HMSG"}


@dataclass(frozen=True)
class Frame:
    """One protocol operation and the bytes that carry it."""

    op: bytes  # upper case: b"PUB", b"HMSG", b"PING", ...
    subject: bytes  # b"" for operations without one
    body: bytes  # the payload without its headers; b"" without a payload
    raw: bytes  # the whole frame, as it is forwarded


#: The gateway stream's subjects: provider webhooks and internal services' events.
STREAM_PREFIXES = (b"webhooks.", b"events.")


def is_stream_publish(frame: Frame) -> bool:
    """A publish to one of the stream's subjects (not a JetStream API request)."""
    return frame.op in (b"PUB", b"HPUB") and frame.subject.startswith(STREAM_PREFIXES)


def is_pub_ack(frame: Frame) -> bool:
    """A PubAck: a message whose body is `{"stream": ..., "seq": N...}`."""
    return frame.op in (b"MSG", b"HMSG") and frame.body.startswith(b'{"stream":')


class FrameDropper:
    """Cuts one direction into frames and drops a share of those `pick` chooses.

    `feed` takes the bytes as they arrive (frames may span chunks) and returns what to
    forward now; a partial frame waits for the rest.
    """

    def __init__(
        self, pick: Callable[[Frame], bool], share: Callable[[], float], rng: random.Random
    ) -> None:
        self._pick = pick
        self._share = share
        self._rng = rng
        self._buffer = b""
        self.dropped = 0
        self.picked = 0

    def feed(self, data: bytes) -> bytes:
        self._buffer += data
        out: list[bytes] = []
        while (frame := self._next()) is not None:
            if self._pick(frame):
                self.picked += 1
                if self._rng.random() < self._share():
                    self.dropped += 1
                    continue
            out.append(frame.raw)
        return b"".join(out)

    def _next(self) -> Frame | None:
        end = self._buffer.find(_CRLF)
        if end < 0:
            return None
        line = self._buffer[:end]
        words = line.split()
        op = words[0].upper() if words else b""
        size = start = end + 2
        subject = words[1] if len(words) > 1 and op in _WITH_PAYLOAD else b""
        body = b""
        if op in _WITH_PAYLOAD:
            payload_bytes = int(words[-1])
            if len(self._buffer) < start + payload_bytes + 2:
                return None  # the payload has not all arrived
            payload = self._buffer[start : start + payload_bytes]
            headers_bytes = int(words[-2]) if op in _WITH_HEADERS else 0
            body = payload[headers_bytes:]
            size = start + payload_bytes + 2
        raw, self._buffer = self._buffer[:size], self._buffer[size:]
        return Frame(op, subject, body, raw)


class _FilteredWriter:
    """A StreamWriter's `write`/`drain` with a dropper in between."""

    def __init__(self, writer: asyncio.StreamWriter, dropper: FrameDropper) -> None:
        self._writer = writer
        self._dropper = dropper

    def write(self, data: bytes) -> None:
        kept = self._dropper.feed(data)
        if kept:
            self._writer.write(kept)

    async def drain(self) -> None:
        await self._writer.drain()


class _FramedLink(Link):
    proxy: NatsFaultProxy

    async def _pump(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, direction: Stream
    ) -> None:
        p = self.proxy
        if direction is Stream.UPSTREAM:
            dropper = FrameDropper(is_stream_publish, lambda: p.drop_publishes, p.rng)
        else:
            dropper = FrameDropper(is_pub_ack, lambda: p.drop_pubacks, p.rng)
        p.droppers[direction].append(dropper)
        await super()._pump(reader, cast(Any, _FilteredWriter(writer, dropper)), direction)


@dataclass
class NatsFaultProxy(FaultProxy):
    """A `FaultProxy` in front of a NATS server that also loses single frames:
    `drop_publishes` of the publishes to the stream's subjects, `drop_pubacks` of the
    PubAcks (shares from 0 to 1, changeable at any time), from a seeded draw."""

    drop_publishes: float = 0.0
    drop_pubacks: float = 0.0
    seed: int = 1
    rng: random.Random = field(init=False)
    droppers: dict[Stream, list[FrameDropper]] = field(
        default_factory=lambda: {Stream.UPSTREAM: [], Stream.DOWNSTREAM: []}
    )

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def counts(self) -> dict[str, int]:
        """Frames seen and dropped so far, over every connection."""
        up, down = self.droppers[Stream.UPSTREAM], self.droppers[Stream.DOWNSTREAM]
        return {
            "publishes": sum(d.picked for d in up),
            "publishes_dropped": sum(d.dropped for d in up),
            "pubacks": sum(d.picked for d in down),
            "pubacks_dropped": sum(d.dropped for d in down),
        }

    async def _accept(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        # FaultProxy._accept with this module's link: the pumps, outage and toxics are its.
        if not self.enabled:
            client_w.transport.abort()
            return
        try:
            upstream = await asyncio.open_connection(self.upstream_host, self.upstream_port)
        except OSError:
            client_w.transport.abort()
            return
        link = _FramedLink(self, (client_r, client_w), upstream)
        self._links.add(link)
        try:
            await link.run()
        finally:
            self._links.discard(link)
