"""The console under test: a fresh migrated database, the app from `build_app`, one
token per role, and clients that talk to it in-process.

    async def test_x(console: ConsoleHarness) -> None:
        r = await console.client(Role.VIEWER).get("/console/api/v1/dlq")
        browser = await console.session_client(Role.OPERATOR)  # logged in by cookie
        r = await browser.post("/console/dlq/1/resolve", data={"note": "n"})

`console` is a fixture (registered in tests/integration/console/conftest.py; other
folders import it from here); `console_factory(**console_settings)` builds one with
other `[console]` settings. The clock is real time plus an offset tests can move
(`console.clock.advance(s)`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import pytest
from starlette.applications import Starlette

from gateway import settings as settings_mod
from gateway.adapters.postgres import Pool, create_pool, transaction
from gateway.console.app import build_app
from gateway.console.token_admin import issue
from gateway.console.web import ConsoleDeps
from gateway.core.console.roles import Role
from gateway.wiring.console import LedgerBooks

#: The header a browser sends on a same-origin form post.
SAME_ORIGIN = {"Sec-Fetch-Site": "same-origin"}


@dataclass
class Clock:
    """Real time plus an offset: rows written with the database's now() still line up,
    and a test can jump past an idle timeout."""

    offset: timedelta = field(default_factory=timedelta)

    def __call__(self) -> datetime:
        return datetime.now(UTC) + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += timedelta(seconds=seconds)


@dataclass
class ConsoleHarness:
    dsn: str
    pool: Pool
    settings: settings_mod.Settings
    deps: ConsoleDeps
    app: Starlette
    clock: Clock
    #: One live token per role, each named after its role ("viewer", ...).
    tokens: dict[Role, str]
    #: The ledger behind the ledger pages (the settings' backend: PostgreSQL, on this
    #: test's database), as `gateway console` opens it.
    books: LedgerBooks | None = None
    _clients: list[httpx.AsyncClient] = field(default_factory=list)

    @property
    def origin(self) -> str:
        return self.deps.origin

    def anonymous(
        self, *, transport_client: tuple[str, int] = ("127.0.0.1", 50000), **kwargs: Any
    ) -> httpx.AsyncClient:
        """A client with no credentials, seen by the console as `transport_client`."""
        transport = httpx.ASGITransport(app=self.app, client=transport_client)
        client = httpx.AsyncClient(transport=transport, base_url=self.origin, **kwargs)
        self._clients.append(client)
        return client

    def client(self, role: Role) -> httpx.AsyncClient:
        """A client sending `role`'s token as `Authorization: Bearer`."""
        return self.anonymous(headers={"Authorization": f"Bearer {self.tokens[role]}"})

    def bearer(self, token: str) -> httpx.AsyncClient:
        return self.anonymous(headers={"Authorization": f"Bearer {token}"})

    async def session_client(
        self, role: Role, *, same_origin: bool = True, token: str | None = None
    ) -> httpx.AsyncClient:
        """A browser-like client logged in with `role`'s token (a cookie session). With
        `same_origin`, every request carries `Sec-Fetch-Site: same-origin`, as a
        browser's own form posts do."""
        client = self.anonymous(headers=SAME_ORIGIN if same_origin else {})
        r = await client.post(
            "/console/login",
            data={"token": token or self.tokens[role]},
            headers=SAME_ORIGIN,
        )
        assert r.status_code == 303, f"login as {role} answered {r.status_code}: {r.text[:200]}"
        return client

    async def issue_token(
        self, name: str, role: Role, *, expires_in: timedelta | None = None
    ) -> str:
        async with transaction(self.pool) as conn:
            return await issue(
                conn,
                name=name,
                role=str(role),
                created_by="test",
                now=self.clock(),
                expires_in=expires_in,
            )

    async def fetch(self, sql: str, *args: Any) -> list[asyncpg.Record]:
        async with self.pool.acquire() as conn:
            return list(await conn.fetch(sql, *args))

    async def fetchval(self, sql: str, *args: Any) -> Any:
        async with self.pool.acquire() as conn:
            return await conn.fetchval(sql, *args)

    async def audit(self, action: str | None = None) -> list[asyncpg.Record]:
        """Audit rows (of `action`), oldest first."""
        if action is None:
            return await self.fetch("SELECT * FROM console_audit ORDER BY id")
        return await self.fetch("SELECT * FROM console_audit WHERE action = $1 ORDER BY id", action)

    async def aclose(self) -> None:
        for client in self._clients:
            await client.aclose()
        if self.books is not None:
            await self.books.close()
        await self.pool.close()


def console_settings(
    dsn: str, ledger: dict[str, Any] | None = None, **console: Any
) -> settings_mod.Settings:
    """Settings for a console on `dsn` (NATS points at nothing: the console runs without),
    with `[ledger]` as `ledger` says (default: the PostgreSQL ledger)."""
    doc: dict[str, Any] = {
        "database": {"url": dsn},
        "nats": {"url": "nats://127.0.0.1:1"},
    }
    if console:
        doc["console"] = console
    if ledger:
        doc["ledger"] = ledger
    return settings_mod.parse(doc, env={})


async def start_console(
    dsn: str, ledger: dict[str, Any] | None = None, **console: Any
) -> ConsoleHarness:
    settings = console_settings(dsn, ledger, **console)
    pool = await create_pool(dsn, max_size=5)
    clock = Clock()
    books = LedgerBooks(settings, pool)
    deps = ConsoleDeps(pool=pool, settings=settings, now=clock, books=books)
    app = build_app(deps)
    harness = ConsoleHarness(dsn, pool, settings, deps, app, clock, tokens={}, books=books)
    for role in Role:
        harness.tokens[role] = await harness.issue_token(str(role), role)
    return harness


ConsoleFactory = Callable[..., Awaitable[ConsoleHarness]]


@pytest.fixture
async def console_factory(database_url: str) -> AsyncIterator[ConsoleFactory]:
    """`await console_factory(ledger=..., **console_settings)`: a console on this test's
    database (`ledger`: its `[ledger]` section, PostgreSQL by default)."""
    made: list[ConsoleHarness] = []

    async def make(ledger: dict[str, Any] | None = None, **console: Any) -> ConsoleHarness:
        harness = await start_console(database_url, ledger, **console)
        made.append(harness)
        return harness

    yield make
    for harness in made:
        await harness.aclose()


@pytest.fixture
async def console(console_factory: ConsoleFactory) -> ConsoleHarness:
    """The console with default settings, on a fresh migrated database."""
    return await console_factory()


#: A route and role case: (method, concrete path, least role allowed, form or JSON body).
Case = tuple[str, str, Role, dict[str, Any] | None]

#: What a state digest leaves out: columns every request may touch without changing
#: anything (a token's last use, a session's last request).
_DIGEST_SKIP = {"console_tokens": ("last_used_at",), "console_sessions": ("last_seen_at",)}


async def state_digest(pool: Pool) -> dict[str, str]:
    """Every table's rows as one md5 each (the audit trail without its 'forbidden'
    rows): equal digests before and after a request mean it changed nothing."""
    async with pool.acquire() as conn:
        tables = [
            r["table_name"]
            for r in await conn.fetch(
                "SELECT table_name FROM information_schema.tables"
                " WHERE table_schema = 'public' AND table_type = 'BASE TABLE'"
                " ORDER BY table_name"
            )
        ]
        digest: dict[str, str] = {}
        for table in tables:
            columns = [
                r["column_name"]
                for r in await conn.fetch(
                    "SELECT column_name FROM information_schema.columns"
                    " WHERE table_schema = 'public' AND table_name = $1 ORDER BY ordinal_position",
                    table,
                )
                if r["column_name"] not in _DIGEST_SKIP.get(table, ())
            ]
            listed = ", ".join(f'"{c}"' for c in columns)
            where = " WHERE action <> 'forbidden'" if table == "console_audit" else ""
            digest[table] = await conn.fetchval(
                f"SELECT md5(coalesce(string_agg(r::text, '|' ORDER BY r::text), ''))"  # noqa: S608
                f' FROM (SELECT {listed} FROM "{table}"{where}) r'
            )
    return digest


async def send_case(
    client: httpx.AsyncClient, method: str, path: str, body: dict[str, Any] | None
) -> httpx.Response:
    """The case's request: a JSON body under /console/api/, a form elsewhere."""
    if body is None:
        return await client.request(method, path)
    if path.startswith("/console/api/"):
        return await client.request(method, path, json=body)
    return await client.request(method, path, data=body)


async def check_case(console: ConsoleHarness, case: Case, role: Role) -> httpx.Response:
    """Send `case` as `role` (by bearer token). Below the least role: 403, nothing
    changed, one more 'forbidden' audit row. At or above: anything but 403."""
    from gateway.core.console.roles import CAPABILITIES

    method, path, least, body = case
    before = await state_digest(console.pool)
    forbidden_before = len(await console.audit("forbidden"))
    r = await send_case(console.client(role), method, path, body)
    allowed = CAPABILITIES[least] <= CAPABILITIES[role]
    if allowed:
        assert r.status_code != 403, f"{role} {method} {path}: {r.status_code} {r.text[:300]}"
        return r
    assert r.status_code == 403, f"{role} {method} {path}: {r.status_code} {r.text[:300]}"
    after = await state_digest(console.pool)
    changed = sorted(t for t in before if before[t] != after.get(t))
    assert not changed, f"{role} {method} {path} was refused but changed {changed}"
    assert len(await console.audit("forbidden")) == forbidden_before + 1
    return r
