"""Whether an HTTP service answers: `/readyz`'s question to the currency-service, and the
automatic re-drive's before it replays the rows parked while the service was away."""

from __future__ import annotations

import asyncio

import httpx


async def http_answers(http: httpx.AsyncClient, url: str, *, timeout_s: float = 1.0) -> bool:
    """True if a GET of `url` is answered with any status below 500 within `timeout_s`.

    Any answer from the service itself (a 404 for a path it does not serve included)
    shows it is up; a refused connection, a timeout or a 5xx (the service, or a proxy
    in front of it, saying it cannot serve) shows it is not. `timeout_s` bounds the whole
    request: httpx's bounds each read, which a server dripping its answer never passes.
    """
    try:
        async with asyncio.timeout(timeout_s):
            response = await http.get(url, timeout=timeout_s)
    except (TimeoutError, httpx.HTTPError):
        return False
    return response.status_code < httpx.codes.INTERNAL_SERVER_ERROR
