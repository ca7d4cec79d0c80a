"""A forward target without `allow_private` is connected to only at an address checked
at that very connection: a name that resolves to a public address at start-up and to
a private one later (DNS rebinding) never gets a connection. Against a real HTTP server
on loopback, with the resolver and the public-address rule made explicit."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from gateway.adapters import http_target
from gateway.adapters.http_target import HttpTarget

PUBLIC_HERE = "127.0.0.1"  # what these tests treat as public (loopback is all there is)
PRIVATE_HERE = "127.0.0.2"


@pytest.fixture
async def server() -> AsyncIterator[tuple[int, list[bytes]]]:
    """An HTTP server that answers 204 and closes every connection; the heads it got."""
    heads: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        heads.append(await reader.readuntil(b"\r\n\r\n"))
        length = next((int(line.split(b":")[1]) for line in heads[-1].split(b"\r\n")
                       if line.lower().startswith(b"content-length")), 0)  # fmt: skip
        await reader.readexactly(length)
        writer.write(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
        await writer.drain()
        writer.close()

    listening = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = listening.sockets[0].getsockname()[1]
    try:
        yield port, heads
    finally:
        listening.close()
        await listening.wait_closed()


@pytest.fixture
def loopback_is_public(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http_target, "is_public", lambda address: address == PUBLIC_HERE)


async def test_the_connection_goes_to_the_address_checked(
    server: tuple[int, list[bytes]], loopback_is_public: None
) -> None:
    """`target.example` resolves (here) to the checked address only; the request
    reaches it with the name kept in `Host`."""
    port, heads = server

    async def resolve(host: str, port_: int) -> list[str]:
        assert host == "target.example"
        return [PUBLIC_HERE]

    target = HttpTarget(f"http://target.example:{port}/hook", timeout_s=5, verify_tls=True,
                        max_connections=1, allow_private=False, resolve=resolve)  # fmt: skip
    try:
        attempted = await target.post(b"{}", {"content-type": "application/json"})
    finally:
        await target.close()
    assert attempted.answer.status == 204
    assert b"host: target.example:" in heads[0].lower()


async def test_a_name_that_rebinds_to_a_private_address_gets_no_connection(
    server: tuple[int, list[bytes]], loopback_is_public: None
) -> None:
    """Public at the first connection, private at the second: the second attempt has
    no answer, and the server sees one request only."""
    port, heads = server
    answers = iter([[PUBLIC_HERE], [PRIVATE_HERE, PUBLIC_HERE]])

    async def resolve(host: str, port_: int) -> list[str]:
        return next(answers)

    target = HttpTarget(f"http://rebind.example:{port}/hook", timeout_s=5, verify_tls=True,
                        max_connections=1, allow_private=False, resolve=resolve)  # fmt: skip
    try:
        first = await target.post(b"{}", {})
        second = await target.post(b"{}", {})
    finally:
        await target.close()
    assert first.answer.status == 204
    assert second.answer.status is None
    assert second.answer.error == "no answer (ConnectError)"
    assert len(heads) == 1


async def test_with_the_real_rule_loopback_is_refused_and_allow_private_lets_it(
    server: tuple[int, list[bytes]],
) -> None:
    port, heads = server
    url = f"http://127.0.0.1:{port}/hook"
    checked = HttpTarget(url, timeout_s=5, verify_tls=True, max_connections=1,
                         allow_private=False)  # fmt: skip
    allowed = HttpTarget(url, timeout_s=5, verify_tls=True, max_connections=1)
    try:
        refused = await checked.post(b"{}", {})
        answered = await allowed.post(b"{}", {})
    finally:
        await checked.close()
        await allowed.close()
    assert refused.answer.status is None
    assert answered.answer.status == 204
    assert len(heads) == 1
