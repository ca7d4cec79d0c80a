"""Sending one forwarded event to an HTTP target: one POST, no redirects followed, at
most `EXCERPT_BYTES` of the answer read, every failure to get an answer a `core` value.

httpx's errors stop here: a timeout or a network error becomes an `Answer` without a
status, named by the error's type only (the URL may carry a credential in its query).
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpcore
import httpx

from gateway.core.forward.addresses import is_public
from gateway.core.forward.retry import Answer

#: How much of a target's answer is kept, for the attempt's line and the dead letter.
EXCERPT_BYTES = 200


@dataclass(frozen=True)
class Attempted:
    """One attempt's answer, how long it took, and the start of what came back."""

    answer: Answer
    elapsed_s: float
    excerpt: bytes = b""


class HttpTarget:
    """One destination URL over clients of its own (its own TLS and timeout settings):
    one connection per client, as many clients as attempts may be under way.

    Why not one client with `max_connections` connections: httpx's pool slows down as it
    grows (measured on a 2-vCPU VM against a target that answers at once: 1,350 POST/s
    over one connection, 610 over a pool of 16, 190 over a pool of 64), while 16 clients
    of one connection each gave 1,600/s. An attempt takes a free client and gives it
    back, so a slow answer holds up no other attempt.
    """

    def __init__(
        self,
        url: str,
        *,
        timeout_s: float,
        verify_tls: bool,
        max_connections: int,
        allow_private: bool = True,
        resolve: Resolve | None = None,
    ) -> None:
        self.url = url
        self._timeout_s = timeout_s
        # One TLS context for all the clients: each would otherwise load the CA bundle.
        tls = httpx.create_ssl_context(verify=verify_tls)
        self._clients = [
            httpx.AsyncClient(
                timeout=httpx.Timeout(timeout_s),
                verify=tls,
                follow_redirects=False,  # a 3xx is an answer, and a failure: never followed
                limits=httpx.Limits(max_connections=1),
                trust_env=False,  # a proxy from the environment would see every event
                transport=None if allow_private else _checked_transport(tls, resolve),
            )
            for _ in range(max(1, max_connections))
        ]
        self._free: asyncio.Queue[httpx.AsyncClient] = asyncio.Queue()
        for client in self._clients:
            self._free.put_nowait(client)

    async def close(self) -> None:
        for client in self._clients:
            await client.aclose()

    async def post(self, body: bytes, headers: Mapping[str, str]) -> Attempted:
        """POST `body`; the answer, or an `Answer` naming why none came."""
        client = await self._free.get()
        try:
            return await self._post(client, body, headers)
        finally:
            self._free.put_nowait(client)

    async def _post(
        self, client: httpx.AsyncClient, body: bytes, headers: Mapping[str, str]
    ) -> Attempted:
        started = time.perf_counter()
        try:
            # httpx's timeout bounds each phase (connect, each read); this bounds the whole
            # attempt, so a target that trickles its answer is still cut off in time.
            async with (
                asyncio.timeout(self._timeout_s),
                client.stream("POST", self.url, content=body, headers=headers) as r,
            ):
                excerpt = await _read_excerpt(r)
                answer = Answer(r.status_code, r.headers.get("retry-after"))
        except TimeoutError:
            return Attempted(Answer(None, error="timeout (the whole attempt)"), _since(started))
        except httpx.TimeoutException as exc:
            return Attempted(Answer(None, error=f"timeout ({type(exc).__name__})"), _since(started))
        except httpx.HTTPError as exc:
            return Attempted(
                Answer(None, error=f"no answer ({type(exc).__name__})"), _since(started)
            )
        return Attempted(answer, _since(started), excerpt)


async def _read_excerpt(response: httpx.Response) -> bytes:
    """At most `EXCERPT_BYTES` of the answer; the rest is never read (a target cannot
    make the forwarder hold a large answer)."""
    kept = bytearray()
    async for chunk in response.aiter_bytes():
        kept += chunk[: EXCERPT_BYTES - len(kept)]
        if len(kept) >= EXCERPT_BYTES:
            break
    return bytes(kept)


def _since(started: float) -> float:
    return time.perf_counter() - started


#: How a host name becomes addresses: `(host, port)` to the addresses it resolves to.
Resolve = Callable[[str, int], Awaitable[list[str]]]


async def _getaddrinfo(host: str, port: int) -> list[str]:
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


class CheckedBackend(httpcore.AsyncNetworkBackend):
    """Connections only to public addresses, checked at every connection.

    The host is resolved here, each of its addresses checked (`core.forward.addresses`), and the
    connection made to the address checked, so a name that answers a public address at
    start-up and a private one later (DNS rebinding) never gets a connection inside the
    network. TLS still verifies the host name: httpcore wraps the socket with the URL's
    host as the server name, and the request's `Host` is the URL's.
    """

    def __init__(self, resolve: Resolve | None = None) -> None:
        self._inner = httpcore.AnyIOBackend()
        self._resolve = resolve or _getaddrinfo

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            addresses = await self._resolve(host, port)
        except OSError as exc:
            problem = f"the host does not resolve ({type(exc).__name__})"
            raise httpcore.ConnectError(problem) from None
        private = [a for a in addresses if not is_public(a)]
        if private or not addresses:
            # Named by the address only: the host was checked at start-up, and this is
            # what it answers now.
            raise httpcore.ConnectError(f"the host now resolves to {private[:1] or 'nothing'}")
        return await self._inner.connect_tcp(
            addresses[0], port, timeout=timeout, local_address=local_address,
            socket_options=socket_options,
        )  # fmt: skip

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("a forward target is never a Unix socket")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def _checked_transport(tls: Any, resolve: Resolve | None) -> httpx.AsyncHTTPTransport:
    """httpx's own transport over a pool whose connections go through `CheckedBackend`
    (httpx takes no network backend of its own, so its pool is replaced: the rest of
    the transport, its request mapping and error translation, is httpx's)."""
    transport = httpx.AsyncHTTPTransport(verify=tls, limits=httpx.Limits(max_connections=1),
                                         trust_env=False)  # fmt: skip
    transport._pool = httpcore.AsyncConnectionPool(
        ssl_context=tls, max_connections=1, network_backend=CheckedBackend(resolve)
    )
    return transport


def refuse_private(url: str) -> None:
    """ValueError when the URL's host is, or resolves to, a link-local, metadata,
    private, loopback or otherwise non-public address: a destination declared in the
    configuration must not reach inside the network unless `allow_private` says so."""
    host = urlsplit(url).hostname or ""
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except OSError as exc:
        raise ValueError(f"the target's host does not resolve ({type(exc).__name__})") from None
    for info in infos:
        address = str(info[4][0])
        if not is_public(address):  # NAT64, IPv4-compatible and the rest: `core.forward.addresses`
            raise ValueError(
                f"the target's host resolves to {address}, a non-public address; "
                "set allow_private = true to send there"
            )
