"""PostgreSQL: the connection pool, error translation and migrations.

A URL that lists several hosts (`postgresql://h1:p1,h2:p2/db`) connects through
`hosts.HostConnector`, each host with a connect timeout of its own and the next started
when one is unanswered for a moment, because asyncpg's own timeout is one budget across
all the hosts (see `hosts`); the walk as a whole gets two connect timeouts.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.resources
from collections.abc import AsyncIterator, Iterator, Mapping
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from gateway.adapters.postgres import hosts
from gateway.core.failures.classify import sqlstate_is_transient
from gateway.errors import DatabaseError, DatabaseUnavailable, MigrationsMissing

#: A source checkout's migrations: the repository's top-level `sql/`.
SOURCE_SQL_DIR = Path(__file__).resolve().parents[3] / "sql"
#: Where a built package carries them: `setup.py` copies `sql/` there at build time.
PACKAGED_SQL_DIR = "_sql"
# Any constant works; it only has to be the same in every process running migrations.
_MIGRATION_LOCK_KEY = 0x6761746577617931

Pool = asyncpg.Pool
#: A connection of its own or one borrowed from a pool: statements take either.
Conn = asyncpg.Connection | PoolConnectionProxy


@contextlib.contextmanager
def translate_errors() -> Iterator[None]:
    """Turn asyncpg and socket errors into `DatabaseUnavailable` or `DatabaseError`."""
    try:
        yield
    except asyncpg.PostgresError as exc:
        sqlstate = getattr(exc, "sqlstate", None)
        if sqlstate_is_transient(sqlstate):
            raise DatabaseUnavailable(f"database error {sqlstate}") from exc
        raise DatabaseError(f"database error {sqlstate}: {type(exc).__name__}", sqlstate) from exc
    except (OSError, asyncpg.InterfaceError, TimeoutError, asyncpg.InternalClientError) as exc:
        # Connection refused or lost, pool closed, or the statement timed out: the outcome
        # of the last statement is unknown, and the caller must treat it as not durable.
        raise DatabaseUnavailable(f"database unreachable: {type(exc).__name__}") from exc


class HeldConnection:
    """A writer's own pooled connection, kept from one group to the next.

    Borrowing one per group cost a pool hand-off and asyncpg's reset query on every
    release: at small groups, more round trips than the INSERT itself. A connection
    whose statement failed for want of the database is closed and replaced on the
    next group.
    """

    def __init__(self, pool: Pool) -> None:
        self._pool = pool
        self._conn: PoolConnectionProxy | None = None

    async def get(self) -> Conn:
        if self._conn is None:
            with translate_errors():
                self._conn = await self._pool.acquire()
        return self._conn

    async def discard(self, cause: BaseException | None = None) -> None:
        """Close a connection in an unknown state; the pool opens a fresh one later.

        The pool's other connections are replaced too when the `cause` says the server
        may be gone (a statement timed out, a socket broke): not after a serialization
        failure or a deadlock on a healthy server.
        """
        conn, self._conn = self._conn, None
        if conn is not None:
            _drop(conn)
            if cause is None or _cut_off(cause):
                await _distrust_idle(self._pool)
            with contextlib.suppress(Exception):
                await self._pool.release(conn)

    async def release(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await self._pool.release(conn, timeout=1.0)


class DatabaseProbe:
    """`/readyz`'s question to PostgreSQL: does a pooled connection answer within 1 s?"""

    def __init__(self, pool: Pool, timeout_s: float = 1.0) -> None:
        self._pool = pool
        self._timeout_s = timeout_s

    async def ping(self) -> bool:
        # Through `connection`, so a probe cut short drops its connection instead of
        # waiting, on a silent server, for asyncpg's cancel request before release (it
        # held a pool slot for 11 s that way).
        with contextlib.suppress(Exception):
            async with asyncio.timeout(self._timeout_s), connection(self._pool) as conn:
                return bool(await conn.fetchval("SELECT 1") == 1)
        return False


def _cut_off(exc: BaseException) -> bool:
    """True if a statement timed out or its connection broke (raw or translated): the
    server may have gone silent, and nothing more should be asked of that connection."""
    if isinstance(exc, DatabaseUnavailable) and exc.__cause__ is not None:
        exc = exc.__cause__
    return isinstance(exc, OSError | asyncpg.InterfaceError)  # TimeoutError is an OSError


def _drop(conn: Conn) -> None:
    """Close a connection at once, without a word to its server.

    asyncpg hands a terminated pooled connection back to its pool at once and detaches
    its proxy, and terminating a detached proxy raises InterfaceError: closed either
    way, so that must not replace the error (or the cancellation) being handled.
    """
    with contextlib.suppress(asyncpg.InterfaceError):
        conn.terminate()


async def _distrust_idle(pool: Pool) -> None:
    """After one connection was cut off, replace the pool's others before their next use.

    They lead to the same server, which may be gone: the idle ones would otherwise be
    handed out one after another, each statement waiting out `command_timeout_s` on a
    silent host before the next is tried (the settlement worker's first statements after
    a lost primary took 10 s each). Expired, each is closed in the background when next
    taken and a fresh connection (to whichever host now answers) is opened instead; on a
    healthy server that costs one connect per pooled connection, once.
    """
    await pool.expire_connections()


@contextlib.asynccontextmanager
async def connection(pool: Pool) -> AsyncIterator[Conn]:
    """Borrow a pooled connection, translating failures to connect as well as to run.

    `pool.acquire()` opens a new connection when the pool has none idle, so a database
    that is down fails right here, before any statement's own translation could see it.
    A connection whose statement timed out or broke is dropped, not returned: on a
    server gone silent (its machine lost), asyncpg's release would first wait for its
    cancel request to that server, up to `command_timeout_s` again (measured: 10 s for
    the statement, then 10 s more to release, against 10 s in all this way). So is one
    whose block was cancelled (a deadline, shutdown) with a statement perhaps in flight,
    and the cancellation goes on unchanged: the server rolls back what it was doing once
    the connection is gone. A cancellation says nothing about the server, so the pool's
    other connections are kept.
    """
    with translate_errors():
        async with pool.acquire() as conn:
            try:
                yield conn
            except Exception as exc:
                if _cut_off(exc):
                    _drop(conn)
                    await _distrust_idle(pool)
                raise
            except BaseException:
                _drop(conn)
                raise


@contextlib.asynccontextmanager
async def transaction(pool: Pool) -> AsyncIterator[Conn]:
    """A pooled connection inside one transaction: committed when the block ends, rolled
    back if it raises. Row locks taken in the block (`FOR UPDATE`) last until then."""
    # Inside `connection`, so a failed BEGIN or COMMIT is translated like any statement.
    async with connection(pool) as conn:
        tx = conn.transaction()
        await tx.start()
        try:
            yield conn
        except BaseException as exc:
            # A connection cut off or cancelled is not asked to roll back: on a silent
            # server that ROLLBACK would wait out the statement timeout a second time, and
            # a cancellation would come back as its failure. `connection` drops it, and
            # the server rolls back by itself once the connection is gone.
            if isinstance(exc, Exception) and not _cut_off(exc):
                await tx.rollback()
            raise
        await tx.commit()


async def create_pool(
    dsn: str,
    *,
    max_size: int = 10,
    connect_timeout_s: float = 5.0,
    command_timeout_s: float = 10.0,
    server_settings: Mapping[str, str] | None = None,
) -> Pool:
    """A pool that connects lazily, so the gateway can start while the database is down.

    `server_settings` are session settings for every connection (PostgreSQL GUCs).
    `connect_timeout_s` bounds opening one connection; with several hosts in the URL it
    bounds each host's attempt, and the next host is tried after a short stagger, so a
    black-holed first host costs that stagger, not the whole budget; the walk over all
    the hosts spends at most twice `connect_timeout_s`. A connection whose
    server goes silent is freed by `command_timeout_s`: its statement fails after that
    long, `connection()` drops it without a cancel request or ROLLBACK to the silent
    server, and the pool's other connections are replaced before their next use.
    """
    connector = hosts.connector_for(dsn)
    pool = asyncpg.create_pool(
        dsn,
        min_size=0,
        max_size=max_size,
        # The pool calls `connect` with its connect keywords, `timeout` among them: the
        # connector spends it on each host instead of across all of them.
        connect=None if connector is None else connector.connect,
        timeout=connect_timeout_s,
        command_timeout=command_timeout_s,
        # Dead connections are found by the next query; recycle idle ones quickly so a
        # restarted database is picked up without a burst of failures.
        max_inactive_connection_lifetime=60.0,
        server_settings=dict(server_settings or {}),
    )
    with translate_errors():
        await pool
    return pool


@contextlib.asynccontextmanager
async def open_pool(dsn: str, **kwargs: Any) -> AsyncIterator[Pool]:
    """Open a pool for the lifetime of the block; close it gracefully afterwards."""
    pool = await create_pool(dsn, **kwargs)
    try:
        yield pool
    finally:
        try:
            await asyncio.wait_for(pool.close(), timeout=10)
        except (TimeoutError, OSError, asyncpg.InterfaceError):
            pool.terminate()


def default_sql_dir() -> Traversable:
    """The migrations inside the installed package, else the source checkout's `sql/`
    (running from the repository, or an editable install, which builds nothing)."""
    packaged = importlib.resources.files("gateway") / PACKAGED_SQL_DIR
    return packaged if packaged.is_dir() else SOURCE_SQL_DIR


def migration_files(sql_dir: Traversable | None = None) -> list[Traversable]:
    """The migrations in the order they apply: `NNN_name.sql`, by number."""
    source = default_sql_dir() if sql_dir is None else sql_dir
    if not source.is_dir():
        return []
    found = (p for p in source.iterdir() if p.name.endswith(".sql") and p.name[:3].isdigit())
    return sorted((p for p in found if p.is_file()), key=lambda p: p.name)


async def migrate(dsn: str, sql_dir: Traversable | None = None) -> list[str]:
    """Apply every migration not yet applied, once, in order; return the names applied.

    Safe from several processes at once: an advisory lock serialises them, and each
    migration is recorded in the same transaction that applies it. Finding no migration
    file at all raises `MigrationsMissing` before connecting: an incomplete installation
    must not report success.
    """
    files = migration_files(sql_dir)
    if not files:
        where = default_sql_dir() if sql_dir is None else sql_dir
        raise MigrationsMissing(f"no migration files (NNN_name.sql) found in {where}")
    with translate_errors():
        conn = await hosts.connect(dsn, timeout_s=10)
    applied: list[str] = []
    try:
        with translate_errors():
            await conn.execute("SELECT pg_advisory_lock($1)", _MIGRATION_LOCK_KEY)
            try:
                await conn.execute(
                    "CREATE TABLE IF NOT EXISTS schema_migrations ("
                    " name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
                )
                done = {r["name"] for r in await conn.fetch("SELECT name FROM schema_migrations")}
                for path in files:
                    if path.name in done:
                        continue
                    async with conn.transaction():
                        await conn.execute(path.read_text(encoding="utf-8"))
                        await conn.execute(
                            "INSERT INTO schema_migrations (name) VALUES ($1)", path.name
                        )
                    applied.append(path.name)
            finally:
                await conn.execute("SELECT pg_advisory_unlock($1)", _MIGRATION_LOCK_KEY)
    finally:
        await conn.close()
    return applied
