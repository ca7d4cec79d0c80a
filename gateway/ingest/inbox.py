"""Acceptance: hand a verified event to the idempotency gate and learn, after the
commit, whether it was new.

`GroupCommitInbox` gathers what arrives within a short window into one multi-row
INSERT, so a burst costs one commit per group instead of one per request, and answers
each waiting request only after its group's commit. `DirectInbox` commits one row per
request: `[ingest] batching = false`, with no gathering wait, and the baseline the
benchmark measures group commit against (`bench.run`, pass c).

Neither waits on the database past `[ingest] commit_timeout_s`: by then the requests have
been answered 503, and a statement still running may be on a server that vanished (a lost
primary answers nothing, so the statement would wait out the pool's statement timeout).
Its connection is terminated instead: the statement fails at once, as on any connection
lost, and the next commit takes a fresh connection, to whichever host answers then. The
outcome of the terminated statement is unknown, as after any lost connection: the commit
may have landed. Nothing unconfirmed was answered 2xx; a provider's retry is answered
`duplicate` if it did land, and its row is published like any other.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence

from gateway.adapters.postgres import HeldConnection, Pool, connection
from gateway.adapters.postgres.webhooks import insert_events
from gateway.core.events.model import Event, Outcome
from gateway.errors import DatabaseError, DatabaseUnavailable, Overloaded, TransientError
from gateway.settings import IngestSettings

log = logging.getLogger(__name__)

#: Called after a commit that added rows, so they can be published right away (the
#: relay reads them from the outbox, so it needs no more than the nudge).
OnCommitted = Callable[[], None]


def _unique(events: Sequence[Event]) -> list[Event]:
    """Drop repeats within a group, keeping the first: the same (provider, event_id), or
    the same (provider, body_sha256) (a body-only signature replayed under another id).

    PostgreSQL would skip them too; dropping them here keeps which one wins the first
    arrival's, and `_resolve` answers the others `duplicate` (their ids were not inserted).
    """
    seen: set[tuple[str, str | bytes]] = set()
    unique = []
    for event in events:
        key: tuple[str, str | bytes] = (event.provider, event.event_id)
        digest_key = None if event.body_sha256 is None else (event.provider, event.body_sha256)
        if key in seen or digest_key in seen:
            continue
        seen.add(key)
        if digest_key is not None:
            seen.add(digest_key)
        unique.append(event)
    return unique


class DirectInbox:
    """One INSERT and one commit per request (batching off); the caller owns the deadline."""

    def __init__(self, pool: Pool, on_committed: OnCommitted) -> None:
        self._pool = pool
        self._on_committed = on_committed

    async def accept(self, event: Event) -> Outcome:
        inserted = await self._commit([event])
        if (event.provider, event.event_id) not in inserted:
            return Outcome.DUPLICATE
        self._on_committed()
        return Outcome.ACCEPTED

    async def _commit(self, events: Sequence[Event]) -> dict[tuple[str, str], int]:
        """The INSERT, terminated with its connection when the caller stops waiting.

        A statement merely cancelled leaves asyncpg asking the server to cancel it, and
        both releasing the connection and a transaction's ROLLBACK wait for the server:
        on a silent one, `command_timeout_s` each, and the request's 503 with them
        (measured: 10 s with a 3 s commit timeout). Terminated, it fails at once.
        """
        async with connection(self._pool) as conn:
            statement = asyncio.ensure_future(insert_events(conn, events))
            try:
                return await asyncio.shield(statement)
            except asyncio.CancelledError:
                if not statement.done():
                    conn.terminate()  # outcome unknown: see the module's docstring (and
                    # `connection` lets a second terminate pass when the cancel leaves)
                    # The pool's other connections lead to the same server, which may
                    # be gone: replaced before their next use, as after any cut-off.
                    await self._pool.expire_connections()
                # It ends at once now; what it raises is the caller's 503, already decided.
                await asyncio.gather(statement, return_exceptions=True)
                if not statement.cancelled() and statement.exception() is None:
                    self._on_committed()  # committed as the deadline passed: publish it
                raise

    async def close(self) -> None:
        """Nothing is queued, so there is nothing to flush."""


_Pending = tuple[Event, "asyncio.Future[Outcome]"]


class GroupCommitInbox:
    """Group commit: a bounded queue drained by a few writer tasks."""

    def __init__(self, pool: Pool, settings: IngestSettings, on_committed: OnCommitted) -> None:
        self._pool = pool
        self._settings = settings
        self._on_committed = on_committed
        self._queue: asyncio.Queue[_Pending] = asyncio.Queue(maxsize=settings.queue_max)
        self._writers: list[asyncio.Task[None]] = []
        self._closing = False

    async def start(self) -> None:
        for i in range(self._settings.writers):
            self._writers.append(asyncio.create_task(self._write_loop(), name=f"inbox-writer-{i}"))

    async def accept(self, event: Event) -> Outcome:
        """Queue the event for the next group commit; return once that group committed.

        The caller owns the deadline (the HTTP endpoint waits `commit_timeout_s`). A
        caller that stops waiting cancels only its own future: the writer leaves an
        event whose future is done out of its group, and every row it does commit is
        still published.
        """
        if self._closing:
            raise Overloaded("shutting down")
        future: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        try:
            self._queue.put_nowait((event, future))
        except asyncio.QueueFull:
            raise Overloaded("acceptance queue is full") from None
        return await future

    async def close(self) -> None:
        """Stop taking events, commit what is queued, then stop the writers."""
        self._closing = True
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._queue.join(), self._settings.commit_timeout_s)
        for task in self._writers:
            task.cancel()
        await asyncio.gather(*self._writers, return_exceptions=True)
        while not self._queue.empty():  # anything left never committed: say so
            _, future = self._queue.get_nowait()
            if not future.done():
                future.set_exception(Overloaded("shutting down"))

    def _take(self, batch: list[_Pending]) -> None:
        while len(batch) < self._settings.batch_max_rows:
            try:
                batch.append(self._queue.get_nowait())
            except asyncio.QueueEmpty:
                return

    async def _write_loop(self) -> None:
        window_s = self._settings.batch_window_us / 1_000_000
        held = HeldConnection(self._pool)
        try:
            while True:
                batch = [await self._queue.get()]
                self._take(batch)
                if len(batch) < self._settings.batch_max_rows and window_s > 0:
                    await asyncio.sleep(window_s)  # let the rest of a burst join this group
                    self._take(batch)
                try:
                    await self._commit_group(batch, held)
                except Exception as exc:  # a writer must never die, and no request may hang
                    log.exception("group commit failed unexpectedly")
                    await held.discard(exc)
                    for _, future in batch:
                        _set_exception(
                            future, DatabaseUnavailable(f"commit failed: {type(exc).__name__}")
                        )
                finally:
                    for _ in batch:
                        self._queue.task_done()
        finally:
            await held.release()

    async def _commit_group(self, batch: list[_Pending], held: HeldConnection) -> None:
        live = [(e, f) for e, f in batch if not f.done()]
        if not live:
            return  # every request stopped waiting before its turn; none was answered 2xx
        # Each request was queued before its group started, and waits `commit_timeout_s`
        # from then: past this deadline none is waiting any more.
        deadline = asyncio.get_running_loop().time() + self._settings.commit_timeout_s
        events = _unique([e for e, _ in live])
        try:
            inserted = await self._insert(held, events, deadline)
        except TransientError as exc:
            await held.discard(exc)
            for _, future in live:
                _set_exception(future, exc)
            return
        except DatabaseError:
            # One bad row must not fail the others: commit each on its own.
            inserted = await self._commit_one_by_one(live, held, deadline)
        self._resolve(live, inserted)

    async def _commit_one_by_one(
        self, live: list[_Pending], held: HeldConnection, deadline: float
    ) -> dict[tuple[str, str], int]:
        inserted: dict[tuple[str, str], int] = {}
        for event, future in live:
            try:
                inserted.update(await self._insert(held, [event], deadline))
            except TransientError as exc:
                await held.discard(exc)
                _set_exception(future, exc)
            except Exception as exc:
                _set_exception(future, exc)
        return inserted

    async def _insert(
        self, held: HeldConnection, events: list[Event], deadline: float
    ) -> dict[tuple[str, str], int]:
        """One INSERT on the writer's connection, which is terminated at `deadline` (loop
        time) if the statement is still running: it then fails as on a connection lost,
        `DatabaseUnavailable`, and the caller discards the connection as after any such
        failure. Outcome unknown: see the module's docstring."""
        loop = asyncio.get_running_loop()
        if loop.time() >= deadline:
            raise DatabaseUnavailable("commit did not finish in time")
        try:
            async with asyncio.timeout_at(deadline):
                # A fresh connection may first have to find the writable host; a walk
                # of several hosts cut short here runs on in the background.
                conn = await held.get()
        except TimeoutError:
            raise DatabaseUnavailable("no database connection in time") from None
        expired = False

        def expire() -> None:
            nonlocal expired
            expired = True
            conn.terminate()

        cut = loop.call_at(deadline, expire)
        try:
            inserted = await insert_events(conn, events)
        except Exception as exc:
            if not expired:
                raise
            await self._let_go(held)
            log.warning(
                "group commit timed out",
                extra={"rows": len(events), "commit_timeout_s": self._settings.commit_timeout_s},
            )
            raise DatabaseUnavailable("commit did not finish in time") from exc
        finally:
            cut.cancel()
        if expired:  # it finished as the deadline passed: committed, its connection gone
            await self._let_go(held)
        return inserted

    async def _let_go(self, held: HeldConnection) -> None:
        """After the deadline terminated the writer's connection: asyncpg has handed its
        slot back to the pool already, so it is only forgotten (`discard` would ask the
        released connection to terminate again). The pool's other connections lead to
        the same server, which may be gone: replaced before their next use, as after
        any connection cut off."""
        await held.release()
        await self._pool.expire_connections()

    def _resolve(self, live: list[_Pending], inserted: dict[tuple[str, str], int]) -> None:
        added = False
        for event, future in live:
            # Popped first: a row that was committed is published even if its request
            # has stopped waiting; a repeat within the group is a duplicate.
            row_id = inserted.pop((event.provider, event.event_id), None)
            added = added or row_id is not None
            if not future.done():
                future.set_result(Outcome.ACCEPTED if row_id is not None else Outcome.DUPLICATE)
        if added:
            self._on_committed()


def _set_exception(future: asyncio.Future[Outcome], exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)
