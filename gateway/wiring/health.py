"""`/readyz` for the processes without a web server of their own (`settle`, `forward`,
`dlq run-jobs`) and for the console: a probe per dependency the process uses, each
bounded, run together on every request (`core.health.readiness` makes the answer).

Each process binds its listener before it opens its dependencies (a port already taken
stops start-up at once), so `/readyz` says `starting` until the composition hands over
its probes with `Health.watching`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol

import httpx

from gateway.adapters.http_probe import http_answers
from gateway.adapters.postgres import DatabaseProbe, Pool
from gateway.core.health.readiness import Dependency, readiness

#: How long one probe may take. An orchestrator's probe usually times out after 1 s
#: (Kubernetes' default): every probe runs at once, so the whole answer takes about
#: this long at worst, and a dependency that does not answer within it counts as down.
PROBE_TIMEOUT_S = 0.8

Probe = Callable[[], Awaitable[bool]]


class _Pings(Protocol):
    async def ping(self, timeout_s: float = ...) -> bool: ...


class _Balances(Protocol):
    async def balance(self, account_id: int) -> object: ...


class Health:
    """The readiness of one process: the probes of the dependencies it has open."""

    def __init__(self, timeout_s: float = PROBE_TIMEOUT_S) -> None:
        self._timeout_s = timeout_s
        self._probes: Mapping[Dependency, Probe] | None = None
        self._round: asyncio.Future[tuple[int, dict[str, object]]] | None = None

    def watch(self, probes: Mapping[Dependency, Probe]) -> None:
        """From now on, `/readyz` asks these (they are open)."""
        self._probes = dict(probes)

    def forget(self) -> None:
        """They are being closed: `/readyz` says `starting` again, as before `watch`."""
        self._probes = None

    async def ready(self) -> tuple[int, dict[str, object]]:
        """`/readyz`'s status and body.

        Requests that arrive while a round of probes runs share its answer: a flood of
        `/readyz` (the console serves it on its public port) costs the database one
        probe at a time, never a connection each.
        """
        probes = self._probes
        if probes is None:
            return readiness(None)
        if self._round is None or self._round.done():
            self._round = asyncio.ensure_future(self._ask(probes))
        # Shielded: a client that hangs up must not cancel the round others wait for.
        return await asyncio.shield(self._round)

    async def _ask(self, probes: Mapping[Dependency, Probe]) -> tuple[int, dict[str, object]]:
        answers = await asyncio.gather(*(self._bounded(p) for p in probes.values()))
        return readiness(dict(zip(probes, answers, strict=True)))

    async def _bounded(self, probe: Probe) -> bool:
        with contextlib.suppress(Exception):  # a probe that fails says "down", no more
            async with asyncio.timeout(self._timeout_s):
                return await probe()
        return False


def database(pool: Pool) -> Probe:
    """Does a pooled connection answer `SELECT 1`? (Dropped, not waited for, when the
    server is silent: see `DatabaseProbe`.)"""
    return DatabaseProbe(pool, timeout_s=PROBE_TIMEOUT_S).ping


def nats(broker: _Pings) -> Probe:
    """Is the connection up, with the stream in place, and does the server answer a
    round trip?"""
    return lambda: broker.ping(PROBE_TIMEOUT_S)


def ledger(books: _Balances) -> Probe:
    """Does the ledger answer a look-up? (Account 1 need not exist: no such account is
    an answer too.) With the PostgreSQL ledger this is one more query of the database."""

    async def probe() -> bool:
        await books.balance(1)
        return True

    return probe


def currency_service(http: httpx.AsyncClient, url: str) -> Probe:
    """Does the currency-service answer at its base URL (any status below 500)?"""
    return lambda: http_answers(http, url, timeout_s=PROBE_TIMEOUT_S)
