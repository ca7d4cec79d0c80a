"""Whether the currency-service answers at all: the automatic re-drive asks before it
replays the rows parked while the service was away."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx

from gateway.adapters.http_probe import http_answers


async def currency_answers(
    http: httpx.AsyncClient, base_url: str, currency: str, timeout_s: float
) -> bool:
    """True if `GET {base_url}/rates/{C}/{C}` gets an answer below 500 within `timeout_s`.

    Any such answer (a rate, or 404 for a pair it does not quote) shows a service that
    reasons about requests; a refused connection, a timeout or a 5xx is the failure the
    parked rows met. The pair is the settlement currency with itself, so the probe asks
    for no particular pair a payment needs.
    """
    return await http_answers(
        http, f"{base_url.rstrip('/')}/rates/{currency}/{currency}", timeout_s=timeout_s
    )


@contextlib.asynccontextmanager
async def currency_probe(
    base_url: str, currency: str, timeout_s: float
) -> AsyncIterator[Callable[[], Awaitable[bool]]]:
    """`currency_answers` on an HTTP client of its own, closed with the block."""
    async with httpx.AsyncClient() as http:

        async def probe() -> bool:
            return await currency_answers(http, base_url, currency, timeout_s)

        yield probe
