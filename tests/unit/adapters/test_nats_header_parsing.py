"""Delivered header blocks read by `gateway.adapters.jetstream.headers`, held to nats-py's
own reading of them, block by block."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nats.aio.client import Client

from gateway.adapters.jetstream.headers import HeaderClient, parse_header_lines

BLOCKS = [
    # (what the block is, the raw header lines after the NATS/1.0 line)
    ("the relay's headers", b"Nats-Msg-Id: stripe:evt_1\r\nGateway-Provider: stripe\r\n"
     b"Gateway-Order-Key: pi_1\r\nGateway-Key-Seq: 17\r\n\r\n"),
    ("no space after the colon, a tab, spaces around", b"A:b\r\nB:\tc\r\n  C  :  d  \r\n\r\n"),
    ("an empty value and an empty name", b"A:\r\n: v\r\n\r\n"),
    ("a line without a colon", b"no colon here\r\nA: b\r\n"),
    ("whitespace inside a name", b"A B: c\r\nA\tB: c\r\nA\x0bB: c\r\nok: 1\r\n"),
    ("a separator C1 control that str.isspace() calls whitespace", b"A\x1cB: c\r\n\x1cA: d\r\n"),
    ("a name that is not ASCII", "Naïve: x\r\nB: y\r\n".encode()),
    ("a value that is not UTF-8", b"A: \xff\xfe ok\r\n"),
    ("a value with a colon", b"Gateway-Received-At: 2026-12-05T03:50:19+00:00\r\n"),
    ("a name given twice: the later wins", b"A: 1\r\nA: 2\r\n"),
    ("a bare newline inside a line", b"A: b\nC: d\r\n"),
    ("nothing", b""),
]  # fmt: skip


@pytest.mark.parametrize(("what", "raw"), BLOCKS)
def test_a_header_block_reads_as_nats_py_reads_it(what: str, raw: bytes) -> None:
    assert parse_header_lines(raw) == Client._parse_header_lines(raw), what


HEADER_BYTES = st.sampled_from([b"A", b"b", b":", b" ", b"\t", b"\r\n", b"\x1c", b"\xff", b"\xc3"])


@settings(max_examples=500, database=None, derandomize=True)
@given(st.lists(HEADER_BYTES, max_size=40).map(b"".join))
def test_any_bytes_read_as_nats_py_reads_them(raw: bytes) -> None:
    assert parse_header_lines(raw) == Client._parse_header_lines(raw)


async def test_the_client_reads_delivered_headers_with_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """nats-py's message handling reads a delivered header block through the client's
    `_parse_header_lines`: were that renamed or called another way in a later release,
    the client would quietly keep the slow reading."""
    read: list[bytes] = []

    def reading(raw: bytes) -> dict[str, str]:
        read.append(raw)
        return parse_header_lines(raw)

    assert HeaderClient._parse_header_lines is parse_header_lines
    monkeypatch.setattr(HeaderClient, "_parse_header_lines", staticmethod(reading))
    headers = await HeaderClient()._process_headers(b"NATS/1.0\r\nGateway-Key-Seq: 7\r\n\r\n")
    assert headers == {"Gateway-Key-Seq": "7"}
    assert read == [b"Gateway-Key-Seq: 7\r\n\r\n"]
