"""`/livez` and `/readyz` of the processes an orchestrator runs beside `serve`: `gateway
settle`, `gateway forward`, `gateway dlq run-jobs` (on their metrics port) and `gateway
console` (on its own port), each started as the real command. Ready answers 200 with
each dependency it probes; a dependency taken away (the database behind a proxy that is
switched off, a private NATS stopped) turns it into 503 with its reason code, and no
host, port or URL; live stays 200 throughout (finding 14)."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import threading
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import orjson

from chaos.proxy import FaultProxy
from tests.support.cli import GATEWAY, invoke
from tests.support.config_file import write_toml
from tests.support.gateway import config
from tests.support.nats import NatsServer
from tests.support.processes import clean_env
from tests.support.receiver import Receiver
from tests.support.services import free_port, wait_for_port, wait_until
from tests.support.settlement import settlement_sections

FORWARD_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


@contextmanager
def process(*args: str, **env_extra: str) -> Iterator[subprocess.Popen[str]]:
    """`gateway ARGS...` with no GATEWAY_* variables, stopped with SIGTERM at the end."""
    proc = subprocess.Popen(
        [GATEWAY, *args],
        env=clean_env(**env_extra),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    failed = False
    try:
        yield proc
    except BaseException:
        failed = True
        raise
    finally:
        exited = proc.poll()
        if exited is None:
            proc.send_signal(signal.SIGTERM)
        try:
            _, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
        if failed:  # shown with the failure: what the process said
            print(f"gateway {args[0]} (exited: {exited}):\n{err[-20_000:]}")


async def migrate(cfg: Path) -> None:
    """`gateway migrate` (the stream), without blocking the loop the proxy runs on."""
    done = await asyncio.to_thread(invoke, "migrate", "--config", str(cfg))
    assert done.returncode == 0, done.stderr


async def get(port: int, path: str) -> tuple[int, str] | None:
    """(status, body text) of GET `path`, or None while nothing answers."""
    try:
        async with httpx.AsyncClient(timeout=5) as client:
            answer = await client.get(f"http://127.0.0.1:{port}{path}")
    except httpx.TransportError:
        return None
    return answer.status_code, answer.text


async def answered(port: int, path: str, status: int) -> dict[str, Any] | None:
    """The JSON body of `path` once it answers `status` with the process started (its
    dependencies open, not `starting`); None until then."""
    found = await get(port, path)
    if found is None or found[0] != status:
        return None
    body: dict[str, Any] = orjson.loads(found[1])
    return None if body.get("reasons") == ["starting"] else body


async def readyz(port: int, status: int) -> dict[str, Any]:
    """`/readyz`'s body once it answers `status` (the process started)."""
    body = await wait_until(lambda: answered(port, "/readyz", status), timeout_s=60, interval_s=0.2)
    assert body is not None
    return body


async def assert_alive(port: int) -> None:
    assert await get(port, "/livez") == (200, '{"status":"alive"}')


class DatabaseLink:
    """PostgreSQL behind a fault proxy that runs on a loop of its own (the test's loop
    waits and probes; a busy test loop must not look like a slow database)."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self.proxy = FaultProxy("127.0.0.1", 5432)
        self._call(self.proxy.start())

    def _call(self, work: Coroutine[Any, Any, None]) -> None:
        asyncio.run_coroutine_threadsafe(work, self._loop).result(timeout=10)

    def url(self, database_url: str) -> str:
        return database_url.replace("127.0.0.1:5432", f"127.0.0.1:{self.proxy.listen_port}")

    def set_enabled(self, enabled: bool) -> None:
        self._call(self.proxy.set_enabled(enabled))

    def close(self) -> None:
        self._call(self.proxy.set_enabled(False))
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)


@contextmanager
def database_link() -> Iterator[DatabaseLink]:
    link = DatabaseLink()
    try:
        yield link
    finally:
        link.close()


@contextmanager
def currency_stub() -> Iterator[str]:
    """`gateway currency-stub` as its own process: its URL."""
    port = free_port()
    with process("currency-stub", "--port", str(port)):
        wait_for_port(port, timeout_s=30)
        yield f"http://127.0.0.1:{port}"


async def test_settle_is_ready_with_its_four_dependencies_and_names_the_database_gone(
    tmp_path: Path, database_url: str, nats_url: str, redis_url: str
) -> None:
    """`gateway settle` on its metrics port: 200 with the database, NATS, the ledger and
    the currency-service answering; with the database switched off, 503 naming the
    database and the PostgreSQL ledger that lives in it (and no address); 200 again
    once it is back."""
    port = free_port()
    with database_link() as link, currency_stub() as stub_url:
        sections = settlement_sections(stub_url, redis_url, settlement={"metrics_port": port})
        doc = config(link.url(database_url), nats_url, **sections)
        cfg = write_toml(tmp_path / "gateway.toml", doc)
        await migrate(cfg)
        with process("settle", "--config", str(cfg)) as settle:
            assert await readyz(port, 200) == {
                "status": "ready",
                "database": True,
                "nats": True,
                "ledger": True,
                "currency-service": True,
            }
            await assert_alive(port)

            link.set_enabled(False)
            assert await readyz(port, 503) == {
                "status": "not_ready",
                "database": False,
                "nats": True,
                "ledger": False,
                "currency-service": True,
                "reasons": ["database_unreachable", "ledger_unreachable"],
            }
            raw = await get(port, "/readyz")
            assert raw is not None
            for shown in (str(link.proxy.listen_port), "127.0.0.1", "postgresql"):
                assert shown not in raw[1]
            await assert_alive(port)  # the process is alive; its database is not

            link.set_enabled(True)
            assert (await readyz(port, 200))["status"] == "ready"
            assert settle.poll() is None


async def test_settle_names_the_currency_service_gone(
    tmp_path: Path, database_url: str, nats_url: str, redis_url: str
) -> None:
    """With nothing listening at the currency-service's address, settle is not ready,
    and says which dependency, not where it is."""
    port, dead = free_port(), free_port()
    sections = settlement_sections(f"http://127.0.0.1:{dead}", redis_url)
    sections["settlement"]["metrics_port"] = port
    cfg = write_toml(tmp_path / "gateway.toml", config(database_url, nats_url, **sections))
    await migrate(cfg)
    with process("settle", "--config", str(cfg)):
        body = await readyz(port, 503)
        assert body["reasons"] == ["currency_service_unreachable"]
        assert body["database"] is body["nats"] is body["ledger"] is True
        assert str(dead) not in orjson.dumps(body).decode()


async def test_forward_is_ready_with_nats_and_names_nats_stopped(
    tmp_path: Path,
    database_url: str,
    nats_server: NatsServer,
    nats_url: str,
    receiver: Receiver,
) -> None:
    """`gateway forward --name crm` on `[forward.crm] metrics_port`: ready with the
    database and NATS; with its private NATS stopped, 503 `nats_unreachable`. It runs
    with only its own destination's secret in the environment: another destination's
    unset `secret_env` is not read (a command reads only the secrets it uses)."""
    port = free_port()
    doc = config(database_url, nats_url)
    doc["forward"] = {
        "crm": {
            "url": receiver.url,
            "secret_env": "CRM_FORWARD_SECRET",
            "allow_private": True,
            "metrics_port": port,
        },
        "other": {"url": receiver.url, "secret_env": "OTHER_FORWARD_SECRET_UNSET"},
    }
    cfg = write_toml(tmp_path / "gateway.toml", doc)
    await migrate(cfg)
    env = {"CRM_FORWARD_SECRET": FORWARD_SECRET}
    with process("forward", "--name", "crm", "--config", str(cfg), **env) as forward:
        assert await readyz(port, 200) == {"status": "ready", "database": True, "nats": True}
        await assert_alive(port)

        nats_server.stop()
        assert await readyz(port, 503) == {
            "status": "not_ready",
            "database": True,
            "nats": False,
            "reasons": ["nats_unreachable"],
        }
        await assert_alive(port)
        nats_server.start()
        assert (await readyz(port, 200))["nats"] is True
        assert forward.poll() is None


async def test_run_jobs_is_ready_with_its_database_and_names_it_gone(
    tmp_path: Path, database_url: str, nats_url: str
) -> None:
    """`gateway dlq run-jobs --metrics-port`: ready with its database; 503 without it;
    its metrics on the same port."""
    port = free_port()
    with database_link() as link:
        cfg = write_toml(tmp_path / "gateway.toml", config(link.url(database_url), nats_url))
        args = ("dlq", "run-jobs", "--config", str(cfg), "--metrics-port", str(port))
        with process(*args) as runner:
            assert await readyz(port, 200) == {"status": "ready", "database": True}
            link.set_enabled(False)
            assert await readyz(port, 503) == {
                "status": "not_ready",
                "database": False,
                "reasons": ["database_unreachable"],
            }
            await assert_alive(port)
            metrics = await get(port, "/metrics")
            assert metrics is not None and metrics[0] == 200
            assert "# TYPE gateway_webhooks_total counter" in metrics[1]
            assert runner.poll() is None


async def test_run_jobs_listens_where_its_setting_says(
    tmp_path: Path, database_url: str, nats_url: str
) -> None:
    """`[console] jobs_metrics_port` chooses where `gateway dlq run-jobs` listens."""
    port = free_port()
    doc = config(database_url, nats_url, console={"jobs_metrics_port": port})
    cfg = write_toml(tmp_path / "gateway.toml", doc)
    with process("dlq", "run-jobs", "--config", str(cfg)):
        assert await readyz(port, 200) == {"status": "ready", "database": True}


async def test_console_answers_probes_on_its_port_and_names_the_database_gone(
    tmp_path: Path, database_url: str, nats_url: str
) -> None:
    """`gateway console`: `/livez` and `/readyz` on its own port, with no session and
    no token; 503 `database_unreachable` once its database is switched off."""
    port = free_port()
    with database_link() as link:
        doc = config(link.url(database_url), nats_url, console={"port": port})
        cfg = write_toml(tmp_path / "gateway.toml", doc)
        with process("console", "--config", str(cfg)) as console:
            assert await readyz(port, 200) == {"status": "ready", "database": True}
            await assert_alive(port)
            link.set_enabled(False)
            assert await readyz(port, 503) == {
                "status": "not_ready",
                "database": False,
                "reasons": ["database_unreachable"],
            }
            await assert_alive(port)
            link.set_enabled(True)
            assert (await readyz(port, 200))["database"] is True
            assert console.poll() is None
