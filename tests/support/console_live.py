"""A console served over loopback for schemathesis: the app from `build_app` under
uvicorn, in a thread of its own with its own event loop (schemathesis calls it
synchronously, from pytest's thread), on a database cloned from the template, with one
token of the role asked for and whatever rows `seed` writes.

    @pytest.fixture(scope="module")
    def live(template_db: str) -> Iterator[LiveConsole]:
        with serve_console(template_db, role=Role.OPERATOR, seed=my_rows) as live:
            yield live

    case.call_and_validate(base_url=live.base_url, headers=live.headers, checks=CHECKS)

`live.run(coroutine)` runs a coroutine on the console's loop (with `live.pool`) and
waits for it: how a test reads the database between two calls.
"""

from __future__ import annotations

import asyncio
import secrets
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

import schemathesis.specs.openapi.checks  # noqa: F401  (registers the OpenAPI checks)
from schemathesis.checks import CHECKS as REGISTERED_CHECKS
from schemathesis.checks import is_check_class

from gateway.adapters.postgres import Conn, Pool, create_pool, transaction
from gateway.console.app import build_app
from gateway.console.web import ConsoleDeps
from gateway.core.console.roles import Role
from gateway.wiring.console import LedgerBooks, uvicorn_options
from tests.support.console import console_settings
from tests.support.services import create_database, drop_database, free_port, unique_name

T = TypeVar("T")

#: Writes a test's rows, in the transaction that issued the token.
Seed = Callable[[Conn], Awaitable[None]]


@dataclass(frozen=True)
class LiveConsole:
    base_url: str
    #: The token of the role asked for, and its name.
    token: str
    token_name: str
    pool: Pool
    loop: asyncio.AbstractEventLoop

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def run(self, coroutine: Coroutine[Any, Any, T], *, timeout: float = 30) -> T:
        """Run `coroutine` on the console's loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=timeout)


def new_token() -> str:
    """A token in the console's format, for a console started with it (`token=`)."""
    from gateway.core.console.access import TOKEN_BYTES, token_from_bytes

    return token_from_bytes(secrets.token_bytes(TOKEN_BYTES))


def checks(*, without: tuple[str, ...] = ()) -> list[Callable[..., Any]]:
    """Every check `st run --checks all` runs, less the ones named in `without`."""
    found = [c for c in REGISTERED_CHECKS.get_all() if not is_check_class(c)]
    names = {c.__name__ for c in found}
    unknown = set(without) - names
    assert not unknown, f"no such check: {sorted(unknown)}"
    return [c for c in found if c.__name__ not in without]


@contextmanager
def serve_console(
    template_db: str,
    *,
    role: Role,
    seed: Seed | None = None,
    name: str = "fuzz",
    token: str | None = None,
    prefix: str = "gw_live",
) -> Iterator[LiveConsole]:
    """A console on a database of its own, served until the block ends, with a token
    of `role` called `name`: `token` when given (one made beforehand, for a schema's
    auth settings), else a new one."""
    import uvicorn

    from gateway.adapters.postgres.console import access as token_store
    from gateway.console.token_admin import issue
    from gateway.core.console.access import sha256

    ready: Future[tuple[LiveConsole, asyncio.Event]] = Future()

    async def serve() -> None:
        database = unique_name(prefix)
        dsn = await create_database(database, template=template_db)
        try:
            # Schemathesis sends one invalid token many times: its checks expect 401.
            settings = console_settings(dsn, bearer_failures_per_min=10_000)
            pool = await create_pool(dsn, max_size=5)
            try:
                async with transaction(pool) as conn:
                    if token is None:
                        secret = await issue(
                            conn,
                            name=name,
                            role=str(role),
                            created_by="test",
                            now=datetime.now(UTC),
                            expires_in=None,
                        )
                    else:
                        secret = token
                        await token_store.create_token(
                            conn,
                            name=name,
                            role=str(role),
                            token_sha256=sha256(token),
                            created_by="test",
                            now=datetime.now(UTC),
                            expires_at=None,
                        )
                    if seed is not None:
                        await seed(conn)
                port = free_port()
                books = LedgerBooks(settings, pool)
                config = uvicorn.Config(
                    build_app(ConsoleDeps(pool=pool, settings=settings, books=books)),
                    **uvicorn_options(settings, "127.0.0.1", port),
                )
                server = uvicorn.Server(config)
                task = asyncio.create_task(server.serve())
                while not server.started:
                    if task.done():
                        task.result()  # raises what stopped it
                        raise RuntimeError("the console stopped before it started")
                    await asyncio.sleep(0.05)
                stop = asyncio.Event()
                live = LiveConsole(
                    base_url=f"http://127.0.0.1:{port}",
                    token=secret,
                    token_name=name,
                    pool=pool,
                    loop=asyncio.get_running_loop(),
                )
                ready.set_result((live, stop))
                await stop.wait()
                server.should_exit = True
                await task
                await books.close()
            finally:
                await pool.close()
        finally:
            await drop_database(database)

    def run() -> None:
        try:
            asyncio.run(serve())
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            raise

    thread = threading.Thread(target=run, name="live-console", daemon=True)
    thread.start()
    live, stop = ready.result(timeout=60)
    try:
        yield live
    finally:
        live.loop.call_soon_threadsafe(stop.set)
        thread.join(timeout=60)
