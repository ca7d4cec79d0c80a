"""`gateway console token create|revoke` and `gateway console` as an operator runs them:
the token printed alone, only its hash stored, revocation ending sessions, and the
refusal to listen beyond loopback with no way to log in."""

from __future__ import annotations

import asyncio
import getpass
import re
import signal
import subprocess
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import httpx
import pytest

from gateway.core.console.access import sha256
from gateway.core.console.roles import Role
from tests.support import processes
from tests.support.cli import GATEWAY, Result, invoke, run
from tests.support.config_file import with_urls, write_toml
from tests.support.console import ConsoleHarness
from tests.support.processes import clean_env
from tests.support.services import free_port, wait_until

TOKEN = re.compile(r"^gwc_[A-Za-z0-9_-]{43}$")


@pytest.fixture
def cfg(tmp_path: Path, database_url: str) -> str:
    return str(
        write_toml(tmp_path / "gateway.toml", with_urls({"database": {"url": database_url}}))
    )


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(database_url)
    yield conn
    await conn.close()


async def gateway(*args: str) -> Result:
    return await asyncio.to_thread(invoke, *args)


async def test_create_prints_the_token_alone_and_stores_only_its_hash(
    cfg: str, db: asyncpg.Connection
) -> None:
    before = datetime.now(UTC)
    done = await gateway(
        "console", "token", "create", "--name", "alice", "--role", "operator",
        "--expires", "30d", "--config", cfg,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith("\n") and done.stdout.count("\n") == 1
    token = done.stdout.strip()
    assert TOKEN.match(token), done.stdout
    row = await db.fetchrow("SELECT * FROM console_tokens WHERE name = 'alice'")
    assert row is not None
    assert bytes(row["token_sha256"]) == sha256(token)
    assert row["role"] == "operator"
    assert row["created_by"] == getpass.getuser()
    assert timedelta(days=30) <= row["expires_at"] - before < timedelta(days=30, minutes=1)
    # The token itself is nowhere in the database.
    dump = await db.fetchval(
        "SELECT string_agg(t::text, ' ') FROM console_tokens t"
    ) + await db.fetchval("SELECT coalesce(string_agg(a::text, ' '), '') FROM console_audit a")
    assert token not in dump and token[4:] not in dump
    (audit,) = await db.fetch("SELECT * FROM console_audit WHERE action = 'token.create'")
    assert (audit["actor"], audit["via"], audit["target"]) == (
        getpass.getuser(),
        "cli",
        "token:alice",
    )


async def test_a_second_live_token_of_one_name_is_refused(cfg: str) -> None:
    create = ("console", "token", "create", "--name", "bob", "--role", "viewer", "--config", cfg)
    assert (await gateway(*create)).returncode == 0
    again = await gateway(*create)
    assert again.returncode == 1
    assert again.stdout == ""
    assert "already called 'bob'" in again.stderr and again.stderr.count("\n") == 1


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (("--name", "x", "--role", "root"), "invalid choice"),
        (("--name", "bad name", "--role", "viewer"), "a name is 1 to 64"),
        (("--name", "x", "--role", "viewer", "--expires", "soon"), "lifetime like 30d"),
    ],
)
async def test_create_refuses_bad_flags_in_one_line(
    cfg: str, flags: tuple[str, ...], said: str
) -> None:
    done = await gateway("console", "token", "create", *flags, "--config", cfg)
    assert done.returncode == 2
    assert said in done.stderr and done.stderr.strip().count("\n") == 0
    assert done.stdout == ""


async def test_revoke_ends_the_tokens_sessions(console: ConsoleHarness, cfg: str) -> None:
    browser = await console.session_client(Role.OPERATOR)
    assert (await browser.get("/console/login")).status_code == 303  # logged in
    done = await gateway("console", "token", "revoke", "operator", "--config", cfg)
    assert done.returncode == 0, done.stderr
    assert "revoked operator" in done.stdout
    ended = await console.fetchval(
        "SELECT count(*) FROM console_sessions WHERE principal = 'operator' AND ended_at IS NULL"
    )
    assert ended == 0
    r = await browser.get("/console/tokens")
    assert r.status_code == 303 and r.headers["location"].startswith("/console/login")
    assert (
        await console.client(Role.OPERATOR).get("/console/api/v1/openapi.json")
    ).status_code == 401
    row = await console.fetch("SELECT revoked_by FROM console_tokens WHERE name = 'operator'")
    assert row[0]["revoked_by"] == getpass.getuser()
    again = await gateway("console", "token", "revoke", "operator", "--config", cfg)
    assert again.returncode == 1 and "no live token" in again.stderr


async def test_the_console_refuses_a_public_address_with_no_token(cfg: str) -> None:
    done = await asyncio.to_thread(  # a process: the console runs until stopped
        run, "console", "--host", "0.0.0.0", "--port", str(free_port()), "--config", cfg
    )
    assert done.returncode == 2
    lines = [line for line in done.stderr.splitlines() if not line.startswith("{")]
    assert len(lines) == 1, done.stderr
    assert "refusing to listen on 0.0.0.0" in lines[0]
    assert "gateway console token create" in lines[0]


async def serving(cfg: str, host: str, port: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [GATEWAY, "console", "--host", host, "--port", str(port), "--config", cfg],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(),
    )


async def answer(url: str) -> httpx.Response | None:
    try:
        async with httpx.AsyncClient() as client:
            return await client.get(url)
    except httpx.TransportError:
        return None


def stop(proc: subprocess.Popen[str]) -> int:
    """SIGTERM, and the exit status: 0, or the signal uvicorn raises again after its
    graceful stop (as `gateway serve` does), both a clean stop to systemd."""
    if not processes.stop(proc, 15):
        raise TimeoutError("the console did not stop within 15 s of SIGTERM; killed")
    return 0 if proc.returncode == -signal.SIGTERM else proc.returncode


async def test_the_console_serves_on_loopback_without_a_token(cfg: str) -> None:
    port = free_port()
    proc = await serving(cfg, "127.0.0.1", port)
    try:
        r = await wait_until(lambda: answer(f"http://127.0.0.1:{port}/console/login"), 20)
        assert r is not None and r.status_code == 200
        assert "default-src 'none'" in r.headers["content-security-policy"]
        assert "server" not in r.headers
    finally:
        assert stop(proc) == 0, proc.stderr.read() if proc.stderr else ""


async def test_the_console_serves_beyond_loopback_once_a_token_exists(cfg: str) -> None:
    made = await gateway(
        "console", "token", "create", "--name", "ops", "--role", "admin", "--config", cfg
    )
    token = made.stdout.strip()
    port = free_port()
    proc = await serving(cfg, "0.0.0.0", port)
    try:
        r = await wait_until(lambda: answer(f"http://127.0.0.1:{port}/console/login"), 20)
        assert r is not None and r.status_code == 200
        async with httpx.AsyncClient() as client:
            api = await client.get(
                f"http://127.0.0.1:{port}/console/api/v1/tokens",
                headers={"Authorization": f"Bearer {token}"},
            )
        assert api.status_code == 200 and [t["name"] for t in api.json()["items"]] == ["ops"]
    finally:
        assert stop(proc) == 0
