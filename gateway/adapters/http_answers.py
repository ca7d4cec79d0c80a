"""An HTTP body read within bounds, and a refused TLS certificate told apart from a
network failure: what the adapters that call out to a provider's host share (backfill's
and the confirm stage's API calls, `provider_api.http_json`; PayPal's certificate host,
`paypal_certs`), and the console, which reads its requests' bodies by the same rule."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterable, Callable

import httpx


def certificate_refused(exc: BaseException) -> bool:
    """True when a transport error was caused by a certificate the client refused."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, ssl.SSLCertVerificationError):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False


async def read_capped(
    response: httpx.Response, cap: int, too_large: Callable[[int | None], Exception]
) -> bytes:
    """The answer's body, at most `cap` bytes once decoded (so a compressed answer
    cannot expand past it): `read_stream_capped` of the response."""
    declared = response.headers.get("content-length", "")
    return await read_stream_capped(declared, response.aiter_bytes(), cap, too_large)


async def read_stream_capped(
    declared: str,
    chunks: AsyncIterable[bytes],
    cap: int,
    too_large: Callable[[int | None], Exception],
) -> bytes:
    """The body `chunks` carry, at most `cap` bytes; else `too_large(length)` is raised:
    with the `declared` Content-Length when it already says more, before anything is
    read, or with None as soon as what was read passes the cap, so an oversized body is
    never held whole."""
    if declared.isascii() and declared.isdigit() and int(declared) > cap:
        raise too_large(int(declared))
    parts: list[bytes] = []
    size = 0
    async for chunk in chunks:
        size += len(chunk)
        if size > cap:
            raise too_large(None)
        parts.append(chunk)
    return b"".join(parts)
