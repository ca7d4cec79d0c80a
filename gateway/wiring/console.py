"""The composition root of `gateway console`: the pool, a NATS connection made on first
use (for the overview's consumer backlog), the ledger opened on first use (the ledger
pages' balances and adjustments: `LedgerBooks`), the app, and uvicorn; and of `gateway
console token create|revoke`.

Like the console itself, this imports neither ingest nor settlement: the console
process never loads them, with one exception, said where it happens: an adjustment is
posted by `gateway.settlement.finance.adjust`, the function `gateway ledger adjust`
calls, loaded with the first adjustment (that module and the account opening it uses,
no driver the console lacks), so the two can never post an entry differently.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

from gateway.adapters.jetstream.lazy import LazyNats as LazyNats  # re-exported
from gateway.adapters.postgres import Pool, connection, open_pool, transaction
from gateway.adapters.postgres.account_names import PostgresAccountNames
from gateway.adapters.postgres.console.access import live_token_exists
from gateway.adapters.postgres.console.audit import record
from gateway.console.token_admin import issue, revoke
from gateway.console.web import ConsoleDeps
from gateway.core.console.access import is_loopback
from gateway.core.finance.statements import Adjustment
from gateway.core.health.readiness import Dependency
from gateway.core.ledger.accounts import AccountView, describe_all
from gateway.core.ledger.ids import merchant_account_id
from gateway.core.ledger.port import AccountCode, Ledger
from gateway.edge import edge_options
from gateway.errors import ConfigError
from gateway.settings import Settings
from gateway.wiring import health
from gateway.wiring.ledger import open_ledger

log = logging.getLogger(__name__)


class LedgerBooks:
    """The console's `core.finance.view.Books`: the configured ledger, opened when a
    page first asks (the console starts while TigerBeetle is down, and a console whose
    ledger pages nobody opens never connects) and kept until `close`."""

    def __init__(self, settings: Settings, pool: Pool) -> None:
        self._settings = settings
        self._pool = pool
        self._opened = contextlib.AsyncExitStack()
        self._ledger: Ledger | None = None
        self._lock = asyncio.Lock()

    async def ledger(self) -> Ledger:
        async with self._lock:
            if self._ledger is None:
                opening = open_ledger(self._settings, self._pool)
                self._ledger = await self._opened.enter_async_context(opening)
            return self._ledger

    async def merchant_balances(self) -> list[AccountView]:
        """As `gateway ledger balances` reads them: every account's totals, named from
        the account directory; the merchants' alone."""
        found = [
            b for b in await (await self.ledger()).balances() if b.code == AccountCode.MERCHANT
        ]
        names = await PostgresAccountNames(self._pool).lookup([b.account_id for b in found])
        return [v for v in describe_all(found, names) if v.kind == "merchant"]

    async def merchant_balance(self, merchant_id: str, currency: str) -> int | None:
        found = await (await self.ledger()).balance(merchant_account_id(merchant_id, currency))
        return None if found is None else found.credit_balance_minor

    async def adjust(self, wanted: Adjustment) -> tuple[Adjustment, bool]:
        # The one place the console process loads `gateway.settlement` (see the module's
        # docstring): the same function as `gateway ledger adjust`, never a copy of it.
        from gateway.settlement import finance

        return await finance.adjust(self._pool, await self.ledger(), wanted)

    async def close(self) -> None:
        await self._opened.aclose()


@contextlib.asynccontextmanager
async def console_deps(settings: Settings) -> AsyncIterator[ConsoleDeps]:
    """What the console's routes use, for as long as the block runs. Closing order:
    the ledger, NATS, then the pool the ledger may be built on."""
    async with open_pool(settings.database_url, max_size=8) as pool:
        nats = LazyNats(settings.nats)
        books = LedgerBooks(settings, pool)
        try:
            yield ConsoleDeps(pool=pool, settings=settings, nats=nats, books=books)
        finally:
            await books.close()
            await nats.close()


async def check_protected(pool: Pool, host: str, trusted_proxies: tuple[str, ...]) -> None:
    """Refuse (`ConfigError`, exit 2) to listen beyond loopback with no way to log in:
    at least one live token, or a trusted SSO proxy, must exist first."""
    if is_loopback(host) or trusted_proxies:
        return
    async with connection(pool) as conn:
        if await live_token_exists(conn, datetime.now(UTC)):
            return
    raise ConfigError(
        "console.host",
        f"refusing to listen on {host}, beyond this machine, with no live token and no "
        "console.trusted_proxies: issue one with 'gateway console token create' first",
    )


def uvicorn_options(settings: Settings, host: str, port: int) -> dict[str, Any]:
    """The console's server: `serve`'s edge (head and body deadlines, the head's size,
    pipelining) with the console's own connection cap, and no header that is not the
    peer's own."""
    return {
        **edge_options(settings.http, settings.console.max_connections),
        "host": host,
        "port": port,
        "log_config": None,  # the gateway's JSON logs, not uvicorn's own
        "access_log": False,
        # The peer's own address is what `trusted_proxies` and the login throttle see:
        # a forwarded-for header is never believed.
        "proxy_headers": False,
        "server_header": False,
        "lifespan": "off",
    }


async def serve_console(settings: Settings, host: str, port: int) -> bool:
    """Serve until SIGINT/SIGTERM; False if the server did not start."""
    import uvicorn

    from gateway.console.app import build_app
    from gateway.console.probes import Probes
    from gateway.wiring.sockets import bound_socket

    async with console_deps(settings) as deps:
        await check_protected(deps.pool, host, settings.console.trusted_proxies)
        sock = bound_socket(host, port, "console.port")
        # /readyz asks the database alone: NATS and the ledger are opened by the pages
        # that show them, and the console serves every other page without them.
        readiness = health.Health()
        readiness.watch({Dependency.DATABASE: health.database(deps.pool)})
        try:
            app = Probes(build_app(deps), readiness)
            config = uvicorn.Config(app, **uvicorn_options(settings, host, port))
            server = uvicorn.Server(config)
            log.info("console listening", extra={"host": host, "port": sock.getsockname()[1]})
            await server.serve(sockets=[sock])
            return bool(server.started)
        finally:
            sock.close()


async def create_token(
    settings: Settings, name: str, role: str, created_by: str, expires_in: timedelta | None
) -> str:
    """`gateway console token create`: the new token (audited as done from the CLI)."""
    async with open_pool(settings.database_url, max_size=1) as pool, transaction(pool) as conn:
        token = await issue(
            conn,
            name=name,
            role=role,
            created_by=created_by,
            now=datetime.now(UTC),
            expires_in=expires_in,
        )
        await record(
            conn,
            actor=created_by,
            role=None,
            via="cli",
            address=None,
            action="token.create",
            target=f"token:{name}",
            detail={"role": role, "expires_s": expires_in.total_seconds() if expires_in else None},
        )
    return token


async def revoke_token(settings: Settings, name: str, revoked_by: str) -> bool:
    """`gateway console token revoke`: whether a live token of that name was revoked."""
    async with open_pool(settings.database_url, max_size=1) as pool, transaction(pool) as conn:
        revoked = await revoke(conn, name=name, revoked_by=revoked_by, now=datetime.now(UTC))
        if revoked:
            await record(
                conn,
                actor=revoked_by,
                role=None,
                via="cli",
                address=None,
                action="token.revoke",
                target=f"token:{name}",
            )
    return revoked
