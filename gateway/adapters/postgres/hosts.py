"""Connecting to a multi-host PostgreSQL URL one host at a time, each with its own timeout.

asyncpg accepts `postgresql://h1:p1,h2:p2/db?target_session_attrs=read-write` and walks
the hosts in order, skipping one that refuses the connection or is not the wanted kind.
But its `timeout` is one budget around the whole walk (`asyncpg.connect`: `async with
compat.timeout(timeout)` outside the loop over the hosts). When the first host is
black-holed (its machine is gone and SYNs go unanswered, or a peer accepts and never
speaks), every attempt spends the whole budget on it and never reaches the second host:
failover never completes. `HostConnector` does the walk itself instead:

1. the hosts come from the URL (`gateway.core.database_hosts.split_hosts`), in the order
   `connect_order` gives: the host that last gave a usable connection, then the others;
2. each gets its own `asyncpg.connect` to that host alone with the whole timeout, and
   asyncpg checks `target_session_attrs` on it (read-write by default for a list);
3. a host that refuses, times out, is not the wanted kind or answers with a transient
   error is skipped; one that rejects the login or the database stops the walk (its
   error is the caller's to translate, as `translate_errors` does);
4. none usable: `DatabaseUnavailable` naming each host and what it did.

A walk whose caller stops waiting (a 1 s readiness probe, a request's deadline) runs on
to its end in the background, so what it learns is kept: otherwise a caller with a
deadline shorter than the per-host timeout would never get past a black-holed first
host, however many times it tried. The connection such a walk opens is closed.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

import asyncpg
from asyncpg.connect_utils import SessionAttribute

from gateway.core.classify import sqlstate_is_transient
from gateway.core.database_hosts import (
    DatabaseHost,
    DatabaseHosts,
    HostOutcome,
    connect_order,
    no_host_message,
    split_hosts,
    tries_next_host,
)
from gateway.errors import DatabaseUnavailable

log = logging.getLogger(__name__)


def host_outcome(exc: BaseException) -> HostOutcome | None:
    """What a failed connection attempt says about its host, by type and SQLSTATE; None
    for anything that is not about the host (a bug, a cancellation)."""
    if isinstance(exc, TimeoutError):  # before OSError, of which it is a subclass
        return HostOutcome.TIMED_OUT
    if isinstance(exc, ConnectionRefusedError):
        return HostOutcome.REFUSED
    if isinstance(exc, OSError):  # unreachable network, unknown name, reset
        return HostOutcome.UNREACHABLE
    if isinstance(exc, asyncpg.TargetServerAttributeNotMatched):
        return HostOutcome.NOT_MATCHING
    if isinstance(exc, asyncpg.PostgresError):
        sqlstate = getattr(exc, "sqlstate", None)
        return HostOutcome.UNAVAILABLE if sqlstate_is_transient(sqlstate) else HostOutcome.REJECTED
    if isinstance(exc, asyncpg.ClientConfigurationError):
        return HostOutcome.REJECTED  # the same settings fail on every host
    if isinstance(exc, asyncpg.InterfaceError | asyncpg.InternalClientError):
        return HostOutcome.UNAVAILABLE
    return None


class HostConnector:
    """Opens connections for one pool (or one command) to the first usable host.

    Remembers the host that last gave a usable connection, so after a failover only the
    first new connection walks the list.
    """

    def __init__(self, hosts: DatabaseHosts) -> None:
        self.hosts = hosts
        self.last_good: DatabaseHost | None = None
        self._abandoned: asyncio.Task[asyncpg.Connection] | None = None

    async def connect(
        self,
        dsn: str | None = None,
        *,
        timeout: float = 60.0,  # noqa: ASYNC109 - the pool passes it by this name
        **kwargs: Any,
    ) -> asyncpg.Connection:
        """A connection to the first usable host; `timeout` is per host.

        The signature is `asyncpg.create_pool(connect=...)`'s: the pool calls it with
        its DSN, `loop`, `connection_class`, `record_class` and its connect keywords
        (`timeout`, `command_timeout`, `server_settings`), all passed on to asyncpg.
        """
        if dsn is None:
            raise ValueError("the connector needs the URL it was made for")
        walk = asyncio.ensure_future(self._walk(dsn, timeout, kwargs))
        try:
            return await asyncio.shield(walk)
        except asyncio.CancelledError:
            self._abandon(walk)
            raise

    def _abandon(self, walk: asyncio.Task[asyncpg.Connection]) -> None:
        """Let a walk nobody waits for any more finish, then close what it opened.

        One such walk at a time is enough to learn the usable host: a further one is
        cancelled at once rather than piling up connection attempts.
        """
        if walk.done():
            _close_unwanted(walk)
        elif self._abandoned is not None and not self._abandoned.done():
            walk.cancel()
            walk.add_done_callback(_close_unwanted)
        else:
            self._abandoned = walk
            walk.add_done_callback(_close_unwanted)

    async def _walk(self, dsn: str, timeout_s: float, kwargs: dict[str, Any]) -> asyncpg.Connection:
        attrs = SessionAttribute(self.hosts.target_session_attrs.value)
        failed: list[tuple[DatabaseHost, HostOutcome]] = []
        last_error: BaseException | None = None
        for host in connect_order(self.hosts.hosts, self.last_good):
            try:
                conn: asyncpg.Connection = await asyncpg.connect(
                    dsn,
                    host=host.host,
                    port=host.port,
                    target_session_attrs=attrs,
                    timeout=timeout_s,
                    **kwargs,
                )
            except Exception as exc:
                outcome = host_outcome(exc)
                if outcome is None:
                    raise
                log.warning(
                    "database host unusable",
                    extra={
                        "host": str(host),
                        "outcome": outcome.value,
                        "error": type(exc).__name__,
                        "target_session_attrs": attrs.value,
                        "timeout_s": timeout_s,
                    },
                )
                if not tries_next_host(outcome):
                    raise
                failed.append((host, outcome))
                last_error = exc
                continue
            if host != self.last_good:
                if self.last_good is not None or failed:
                    # A failover, or a first host that was not usable: worth a line.
                    log.warning(
                        "database host chosen",
                        extra={"host": str(host), "previous": str(self.last_good or "")},
                    )
                self.last_good = host
            return conn
        raise DatabaseUnavailable(no_host_message(self.hosts, failed)) from last_error


def _close_unwanted(walk: asyncio.Task[asyncpg.Connection]) -> None:
    """A walk's connection that no caller will use is closed; its error is retrieved
    (it was logged host by host) so asyncio does not report it as never retrieved."""
    if walk.cancelled():
        return
    if walk.exception() is None:
        walk.result().terminate()


def connector_for(dsn: str) -> HostConnector | None:
    """A connector for a URL that lists several hosts; None for one host (or none, where
    asyncpg's own defaults apply), which asyncpg connects to as it always has."""
    hosts = split_hosts(dsn, os.environ)
    return HostConnector(hosts) if hosts.is_multi_host else None


async def connect(dsn: str, *, timeout_s: float, **kwargs: Any) -> asyncpg.Connection:
    """One connection of its own (not pooled) to the first usable host of `dsn`."""
    connector = connector_for(dsn)
    if connector is None:
        conn: asyncpg.Connection = await asyncpg.connect(dsn, timeout=timeout_s, **kwargs)
        return conn
    return await connector.connect(dsn, timeout=timeout_s, **kwargs)
