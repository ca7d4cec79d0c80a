"""An HTTP answer read within bounds, and a refused TLS certificate told apart from a
network failure: what the adapters that call out to a provider's host share (backfill's
API calls, `provider_api.http_json`; PayPal's certificate host, `paypal_certs`)."""

from __future__ import annotations

import ssl
from collections.abc import Callable

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
    cannot expand past it); else `too_large(declared)` is raised: with the declared
    `Content-Length` when it already says more, before anything is read, or with None
    as soon as what was read passes the cap."""
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > cap:
        raise too_large(int(declared))
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > cap:
            raise too_large(None)
        chunks.append(chunk)
    return b"".join(chunks)
