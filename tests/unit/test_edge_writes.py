"""`CoalescedWrites`: a response's head and body reach the transport as one write, in
order, whatever happens between them. The transport here records its calls; the edge's
own tests (tests/unit/test_edge.py, tests/integration/ingest/test_edge_*.py) run it on
real sockets."""

from __future__ import annotations

import asyncio
from typing import Any

from gateway.edge_writes import JOIN_MAX_BYTES, CoalescedWrites


class Recording:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.closing = False

    def write(self, data: bytes) -> None:
        self.calls.append(("write", bytes(data)))

    def write_eof(self) -> None:
        self.calls.append(("write_eof", None))

    def close(self) -> None:
        self.closing = True
        self.calls.append(("close", None))

    def abort(self) -> None:
        self.calls.append(("abort", None))

    def is_closing(self) -> bool:
        return self.closing

    def get_write_buffer_size(self) -> int:
        return 7

    def get_extra_info(self, name: str) -> str:
        return f"info:{name}"


def _writes() -> tuple[CoalescedWrites, Recording]:
    recording = Recording()
    return CoalescedWrites(recording, asyncio.get_running_loop()), recording  # type: ignore[arg-type]


async def test_head_and_body_in_one_turn_are_one_write() -> None:
    writes, transport = _writes()
    writes.expect_head()
    writes.write(b"HTTP/1.1 200 OK\r\n\r\n")
    assert transport.calls == []
    assert writes.get_write_buffer_size() == 7 + 19
    writes.write(b'{"status":"accepted"}')
    assert transport.calls == [("write", b'HTTP/1.1 200 OK\r\n\r\n{"status":"accepted"}')]
    await asyncio.sleep(0)  # the fallback flush finds nothing held
    assert len(transport.calls) == 1


async def test_without_a_head_expected_writes_go_straight_through() -> None:
    writes, transport = _writes()
    writes.write(b"a")
    writes.write(b"b")
    assert transport.calls == [("write", b"a"), ("write", b"b")]


async def test_a_head_left_alone_goes_out_at_the_next_turn() -> None:
    writes, transport = _writes()
    writes.expect_head()
    writes.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    await asyncio.sleep(0)
    assert transport.calls == [("write", b"HTTP/1.1 100 Continue\r\n\r\n")]
    writes.write(b"later")  # only the one write after expect_head is held
    assert transport.calls[-1] == ("write", b"later")


async def test_a_large_body_follows_the_head_without_a_copy() -> None:
    writes, transport = _writes()
    body = b"x" * (JOIN_MAX_BYTES + 1)
    writes.expect_head()
    writes.write(b"head")
    writes.write(body)
    assert transport.calls == [("write", b"head"), ("write", body)]


async def test_close_and_write_eof_send_what_is_held_first() -> None:
    writes, transport = _writes()
    writes.expect_head()
    writes.write(b"head")
    writes.close()
    assert transport.calls == [("write", b"head"), ("close", None)]
    writes2, transport2 = _writes()
    writes2.expect_head()
    writes2.write(b"head")
    writes2.write_eof()
    assert transport2.calls == [("write", b"head"), ("write_eof", None)]


async def test_abort_and_a_lost_connection_drop_what_is_held() -> None:
    writes, transport = _writes()
    writes.expect_head()
    writes.write(b"head")
    writes.abort()
    await asyncio.sleep(0)
    assert transport.calls == [("abort", None)]
    writes.expect_head()
    writes.write(b"head")
    writes.discard()
    await asyncio.sleep(0)
    assert transport.calls == [("abort", None)]


async def test_a_closing_transport_is_not_held_for() -> None:
    writes, transport = _writes()
    transport.closing = True
    writes.expect_head()
    writes.write(b"head")
    assert transport.calls == [("write", b"head")]


async def test_everything_else_is_the_transports() -> None:
    writes, transport = _writes()
    assert writes.get_extra_info("peername") == "info:peername"
    assert writes.transport is transport  # type: ignore[comparison-overlap]
