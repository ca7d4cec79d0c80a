"""Connecting to a multi-host PostgreSQL URL host by host, each with its own timeout.

asyncpg accepts `postgresql://h1:p1,h2:p2/db?target_session_attrs=read-write` and walks
the hosts in order, skipping one that refuses the connection or is not the wanted kind.
But its `timeout` is one budget around the whole walk (`asyncpg.connect`: `async with
compat.timeout(timeout)` outside the loop over the hosts). When the first host is
black-holed (its machine is gone and SYNs go unanswered, or a peer accepts and never
speaks), every attempt spends the whole budget on it and never reaches the second host:
failover never completes. `HostConnector` does the walk itself instead:

1. the hosts come from the URL (`gateway.core.database_hosts.split_hosts`), in the order
   `connect_order` gives: the host that last gave a usable connection, then the others;
2. each gets its own `asyncpg.connect` to that host alone with the whole timeout (or
   what is left of the walk's budget, step 4), and asyncpg checks
   `target_session_attrs` on it (read-write by default for a list);
3. the attempts are staggered ("happy eyeballs" for hosts): the next host's starts as
   soon as the one before fails, or once that one has gone unanswered for the stagger
   delay (`stagger_delay_s`, 0.5 s), while it keeps its own timeout. So a black-holed
   first host costs the stagger delay, not the connect timeout;
4. the whole walk has one budget (`walk_budget_s`, two connect timeouts): a host's
   attempt gets its own timeout cut to what is left of it, none starts with less than
   the stagger delay left, and one still unanswered at the end is stopped (timed out).
   So a list of silent hosts costs that budget, not about 0.42 s more per host;
5. the first usable connection wins (of two usable at once, the earlier host's); every
   other attempt is cancelled and any connection it opened is closed, before the call
   returns: no attempt outlives it, and no connection leaks;
6. a host that refuses, times out, is not the wanted kind or answers with a transient
   error is skipped; one that rejects the login or the database stops the walk (its
   error is the caller's to translate, as `translate_errors` does);
7. none usable: `DatabaseUnavailable` naming each host and what it did (and those the
   budget left untried).

A walk whose caller stops waiting (a readiness probe's 1 s, a request's deadline) runs on
to its end in the background, so what it learns is kept: otherwise a caller with a
deadline shorter than the walk would never get past a black-holed host, however many
times it tried. The connection such a walk opens is closed.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

import asyncpg
from asyncpg.connect_utils import SessionAttribute

from gateway.core.database_hosts import (
    DatabaseHost,
    DatabaseHosts,
    HostOutcome,
    attempt_timeout_s,
    connect_order,
    no_host_message,
    split_hosts,
    stagger_delay_s,
    tries_next_host,
    walk_budget_s,
)
from gateway.core.failures.classify import sqlstate_is_transient
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
        # What was last said about each host: a host that stays unusable (a lost primary
        # still first in the URL) is reported once, not on every new connection.
        self._reported: dict[DatabaseHost, HostOutcome] = {}

    async def connect(
        self,
        dsn: str | None = None,
        *,
        timeout: float = 60.0,  # noqa: ASYNC109 - the pool passes it by this name
        **kwargs: Any,
    ) -> asyncpg.Connection:
        """A connection to the first usable host; `timeout` is per host, and the whole
        walk spends at most `walk_budget_s(timeout)`.

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
        """Staggered attempts in `connect_order` within one budget; the first usable
        connection wins."""
        loop = asyncio.get_running_loop()
        order = connect_order(self.hosts.hosts, self.last_good)
        stagger_s = stagger_delay_s(timeout_s)
        budget_s = walk_budget_s(timeout_s)
        deadline = loop.time() + budget_s
        attempts: dict[asyncio.Task[asyncpg.Connection], int] = {}  # -> position in order
        given_s: dict[int, float] = {}  # position -> the timeout its attempt was given
        failed: dict[int, HostOutcome] = {}
        last_error: BaseException | None = None
        started, next_start_at = 0, loop.time()
        startable = len(order)  # cut to `started` once the budget cannot start another
        try:
            while True:
                now = loop.time()
                if started < startable and now >= next_start_at:
                    host_timeout_s = attempt_timeout_s(timeout_s, deadline - now)
                    if host_timeout_s is None:
                        startable = started
                    else:
                        task = self._attempt(dsn, order[started], host_timeout_s, kwargs)
                        attempts[task], given_s[started] = started, host_timeout_s
                        started, next_start_at = started + 1, now + stagger_s
                if not attempts:
                    break  # every host tried (or the budget spent), none usable
                if loop.time() >= deadline:
                    # Each attempt's own timeout ends by the deadline; one that has not
                    # quite ended is stopped here (in `finally`) and counted timed out.
                    for position in attempts.values():
                        failed[position] = self._unusable(
                            order[position], TimeoutError(), given_s[position]
                        )
                    break
                # Until an attempt ends, the next host's turn comes, or the budget ends.
                wake_at = next_start_at if started < startable else deadline
                wait_s = max(0.0, min(wake_at, deadline) - loop.time())
                done, _ = await asyncio.wait(
                    attempts, timeout=wait_s, return_when=asyncio.FIRST_COMPLETED
                )
                # In preference order: of two usable at once, the earlier host's is kept
                # (the other stays in `attempts` and is closed below).
                for task in sorted(done, key=attempts.__getitem__):
                    position = attempts.pop(task)
                    exc = task.exception()
                    if exc is None:
                        return self._chose(order[position], task.result(), failed, attempts)
                    outcome = self._unusable(order[position], exc, given_s[position])
                    failed[position] = outcome
                    last_error = exc
                    next_start_at = loop.time()  # a failed host moves on at once
        finally:
            await _stop_attempts(attempts)
        outcomes = [(order[p], failed[p]) for p in sorted(failed)]
        message = no_host_message(self.hosts, outcomes, order[started:], budget_s)
        raise DatabaseUnavailable(message) from last_error

    def _attempt(
        self, dsn: str, host: DatabaseHost, timeout_s: float, kwargs: dict[str, Any]
    ) -> asyncio.Task[asyncpg.Connection]:
        attrs = SessionAttribute(self.hosts.target_session_attrs.value)
        return asyncio.create_task(
            asyncpg.connect(
                dsn,
                host=host.host,
                port=host.port,
                target_session_attrs=attrs,
                timeout=timeout_s,
                **kwargs,
            ),
            name=f"database-connect {host}",
        )

    def _unusable(self, host: DatabaseHost, exc: BaseException, timeout_s: float) -> HostOutcome:
        """Log a failed attempt and say what it was; raise what must stop the walk."""
        outcome = host_outcome(exc)
        if outcome is None:
            raise exc
        if self._reported.get(host) is outcome:
            level = logging.DEBUG
        else:
            # A standby the URL lists on purpose is no failure: said, but not warned.
            level = logging.INFO if outcome is HostOutcome.NOT_MATCHING else logging.WARNING
        self._reported[host] = outcome
        log.log(
            level,
            "database host unusable",
            extra={
                "host": str(host),
                "outcome": outcome.value,
                "error": type(exc).__name__,
                "target_session_attrs": self.hosts.target_session_attrs.value,
                "timeout_s": timeout_s,
            },
        )
        if not tries_next_host(outcome):
            raise exc
        return outcome

    def _chose(
        self,
        host: DatabaseHost,
        conn: asyncpg.Connection,
        failed: dict[int, HostOutcome],
        unanswered: dict[asyncio.Task[asyncpg.Connection], int],
    ) -> asyncpg.Connection:
        if host != self.last_good:
            if self.last_good is not None or failed or unanswered:
                # A failover (a warning: the primary moved), or a host before it that was
                # not usable on the first connection (info: each command's first
                # connection says it, and the unusable host has had its own line).
                log.log(
                    logging.WARNING if self.last_good is not None else logging.INFO,
                    "database host chosen",
                    extra={
                        "host": str(host),
                        "previous": str(self.last_good or ""),
                        "unanswered": len(unanswered),
                    },
                )
            self.last_good = host
        self._reported.pop(host, None)  # usable again: its next failure is news
        return conn


async def _stop_attempts(attempts: dict[asyncio.Task[asyncpg.Connection], int]) -> None:
    """Cancel the attempts still running and wait for them to end; a connection any of
    them opened (one that won at the same moment as the chosen one) is closed."""
    for task in attempts:
        task.cancel()  # asyncpg closes a half-open connection it is cancelled in
        task.add_done_callback(_close_unwanted)
    if attempts:
        await asyncio.wait(attempts)


def _close_unwanted(task: asyncio.Task[asyncpg.Connection]) -> None:
    """A connection that no caller will use is closed; an error is retrieved (it was
    logged host by host) so asyncio does not report it as never retrieved."""
    if task.cancelled():
        return
    if task.exception() is None:
        task.result().terminate()


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
