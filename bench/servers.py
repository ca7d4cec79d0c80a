"""The things a benchmark run starts and must stop: a fresh database, a private
nats-server, and the HTTP server under test (the gateway or the bare endpoint).

Databases and NATS servers come from the test helpers (`tests/support/services.py`,
`tests/support/nats.py`), so the bench never touches the shared `test` database or the
development NATS on 4223.
"""

from __future__ import annotations

import asyncio
import compileall
import contextlib
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import redis

from gateway.adapters.postgres import migrate
from gateway.adapters.postgres.outbox import outbox_stats
from tests.support import processes
from tests.support.config_file import write_toml
from tests.support.nats import NatsServer
from tests.support.services import REDIS_URL, create_database, drop_database, free_port, unique_name

ROOT = Path(__file__).resolve().parents[1]
STRIPE_SECRET = "whsec_bench_stripe_secret"  # a benchmark-only value, never a real secret
STRIPE_TOLERANCE_S = 300  # the signature window; a pass must fit inside it


@dataclass(frozen=True)
class Backend:
    """A migrated database and a NATS server that belong to one run only."""

    database: str
    dsn: str
    nats: NatsServer


@contextlib.contextmanager
def fresh_backend() -> Iterator[Backend]:
    """Create, migrate and finally drop a database; start and finally stop a nats-server
    with file storage and `sync_interval: always` (the helper's configuration)."""
    name = unique_name("gw_bench")
    dsn = asyncio.run(create_database(name))
    nats = NatsServer()
    try:
        asyncio.run(migrate(dsn))
        nats.start()
        yield Backend(name, dsn, nats)
    finally:
        nats.cleanup()
        asyncio.run(drop_database(name))


def write_gateway_config(
    path: Path, backend: Backend, port: int, settings: dict[str, dict[str, Any]]
) -> Path:
    """A gateway.toml for one run: its own database and NATS, one Stripe provider, and
    `settings` (sections such as `ingest` and `outbox`, and `providers.stripe` keys)
    over the shipped defaults."""
    doc: dict[str, dict[str, Any]] = {
        "database": {"url": backend.dsn},
        "nats": {"url": backend.nats.url},
        "http": {"host": "127.0.0.1", "port": port},
        # The relay beside it serves no /metrics: nothing here scrapes it, and a fixed
        # port could be taken by another run on the machine.
        "outbox": {"relay_metrics_port": 0},
    }
    for name, values in settings.items():
        if name != "providers":
            doc[name] = {**doc.get(name, {}), **values}
    doc["providers"] = {
        "stripe": {
            "scheme": "stripe",
            "secrets": [STRIPE_SECRET],
            "tolerance_s": STRIPE_TOLERANCE_S,
            **settings.get("providers", {}).get("stripe", {}),
        }
    }
    return write_toml(path, doc)


class Server:
    """One server process under test, started from the repository root, with the
    processes that run beside it (`gateway relay` when the gateway does not publish
    inline, `gateway settle` in the end-to-end run), started once it is ready and
    stopped before it."""

    def __init__(
        self,
        argv: list[str],
        port: int,
        log_path: Path,
        ready_path: str | None,
        sidecars: list[list[str]] | None = None,
        settlers: list[list[str]] | None = None,
    ):
        self.argv = argv
        self.port = port
        self.log_path = log_path
        self.ready_path = ready_path
        self.sidecar_argvs = sidecars or []
        self.settler_argvs = settlers or []
        self.proc: subprocess.Popen[bytes] | None = None
        self.sidecars: list[subprocess.Popen[bytes]] = []
        self.settlers: list[subprocess.Popen[bytes]] = []

    @property
    def sidecar_pids(self) -> list[int]:
        """The `gateway relay` processes."""
        return [p.pid for p in self.sidecars]

    @property
    def settler_pids(self) -> list[int]:
        """The `gateway settle` processes."""
        return [p.pid for p in self.settlers]

    @property
    def pid(self) -> int:
        if self.proc is None:
            raise RuntimeError("server not started")
        return self.proc.pid

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 30.0) -> None:
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(self.argv, cwd=ROOT, stdout=log, stderr=log)
        try:
            self._wait_ready(timeout_s)
            with self.log_path.open("ab") as log:
                for argv in self.sidecar_argvs:
                    self.sidecars.append(subprocess.Popen(argv, cwd=ROOT, stdout=log, stderr=log))
                for argv in self.settler_argvs:
                    self.settlers.append(subprocess.Popen(argv, cwd=ROOT, stdout=log, stderr=log))
        except Exception:
            self.stop()
            raise

    def _ready(self) -> bool:
        if self.ready_path is None:
            with socket.socket() as s:
                s.settimeout(0.2)
                return s.connect_ex(("127.0.0.1", self.port)) == 0
        # /readyz is 200 only once the database answers and the JetStream stream exists:
        # measuring before that would count start-up as slowness.
        with contextlib.suppress(httpx.HTTPError):
            return httpx.get(self.base_url + self.ready_path, timeout=2).status_code == 200
        return False

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                tail = self.log_path.read_text(errors="replace").splitlines()[-15:]
                raise RuntimeError(
                    f"{' '.join(self.argv[1:4])} exited with {self.proc.returncode}:\n"
                    + "\n".join(tail)
                )
            if self._ready():
                return
            time.sleep(0.1)
        raise RuntimeError(f"{' '.join(self.argv[1:4])} not ready after {timeout_s} s")

    def stop(self, timeout_s: float = 45.0) -> None:
        """SIGTERM (the gateway commits and publishes what it holds), then SIGKILL."""
        for proc in [*self.settlers, *self.sidecars, self.proc]:
            if proc is not None:
                processes.stop(proc, timeout_s)
        self.sidecars = []
        self.settlers = []
        self.proc = None


def gateway_server(
    backend: Backend,
    workdir: Path,
    label: str,
    settings: dict[str, dict[str, Any]],
    workers: int,
    relay_nice: int = 0,
    settle: bool = False,
) -> Server:
    """`gateway serve`, and a `gateway relay` beside it when `[outbox] inline = false`
    (run at `relay_nice`: acceptance first, the stream catches up); with `settle`, a
    `gateway settle` too, on the same config, as `make run` runs it."""
    port = free_port()
    config = workdir / f"{label}.toml"
    write_gateway_config(config, backend, port, settings)
    argv = [sys.executable, "-m", "gateway", "serve", "--config", str(config)]
    argv += ["--port", str(port), "--workers", str(workers)]
    sidecars = []
    if not settings.get("outbox", {}).get("inline", True):
        relay = [sys.executable, "-m", "gateway", "relay", "--config", str(config)]
        sidecars.append(["nice", "-n", str(relay_nice), *relay] if relay_nice else relay)
    settlers = [[sys.executable, "-m", "gateway", "settle", "--config", str(config)]]
    return Server(
        argv, port, workdir / f"{label}.log", "/readyz", sidecars, settlers if settle else None
    )


def currency_stub(workdir: Path, label: str = "currency-stub") -> Server:
    """`gateway currency-stub` on a free port (the demo rates `make run` uses)."""
    port = free_port()
    argv = [sys.executable, "-m", "gateway", "currency-stub", "--port", str(port)]
    return Server(argv, port, workdir / f"{label}.log", "/healthz")


def compile_sources() -> None:
    """Compile the gateway's modules to bytecode before any process is timed.

    An installed wheel carries its bytecode; a source checkout run with
    `PYTHONDONTWRITEBYTECODE=1` (as on some CI machines) would otherwise compile every
    module again in each process it starts, and a settlement drain counts its worker's
    start-up. Written to the gitignored `__pycache__` folders, as an import would."""
    compileall.compile_dir(ROOT / "gateway", quiet=1)


def drop_cache(prefix: str) -> None:
    """Remove a run's rate-cache keys from the shared Redis (each run has its own prefix,
    so the first conversions ask the stub, as after a deploy)."""
    with contextlib.suppress(redis.RedisError):
        client = redis.Redis.from_url(REDIS_URL)
        for key in client.scan_iter(f"{prefix}:*"):
            client.delete(key)
        client.close()


def bare_server(workdir: Path, label: str, workers: int) -> Server:
    port = free_port()
    argv = [sys.executable, "-m", "bench.bare_app", "--port", str(port)]
    argv += ["--workers", str(workers)]
    return Server(argv, port, workdir / f"{label}.log", None)


# --- what the database and the gateway say after a run ---------------------------------


async def _fetchval(dsn: str, sql: str) -> Any:
    conn = await asyncpg.connect(dsn)
    try:
        return await conn.fetchval(sql)
    finally:
        await conn.close()


def count_rows(dsn: str) -> int:
    return int(asyncio.run(_fetchval(dsn, "SELECT count(*) FROM processed_webhooks")))


def count_unpublished(dsn: str) -> int:
    """Rows the outbox cursor has not passed, counted as the relay's gauge counts them
    (along the outbox index: cheap on a prefilled table too)."""

    async def count() -> int:
        conn = await asyncpg.connect(dsn)
        try:
            pending, _ = await outbox_stats(conn)
            return pending
        finally:
            await conn.close()

    return asyncio.run(count())


def stream_count(nats_url: str, stream: str = "WEBHOOKS") -> int:
    """How many messages the stream holds."""
    import nats

    async def count() -> int:
        nc = await nats.connect(nats_url)
        try:
            return int((await nc.jetstream().stream_info(stream)).state.messages)
        finally:
            await nc.close()

    return asyncio.run(count())


def wait_published(
    dsn: str, timeout_s: float, since_s: float | None = None, settle_s: float = 1.0
) -> tuple[float, int]:
    """Wait until the outbox is empty; return (seconds since `since_s`, a
    `time.monotonic()` defaulting to now, until the outbox was found empty for good;
    rows still unpublished). "For good": empty at every look from then on until at
    least `settle_s` after `since_s`, so a row committed late (a request in flight when
    the load stopped) is waited for. Looks come every 0.25 s."""
    started = time.monotonic() if since_s is None else since_s
    empty_since: float | None = None
    while True:
        left = count_unpublished(dsn)
        waited = time.monotonic() - started
        if left:
            empty_since = None
        elif empty_since is None:
            empty_since = waited
        if (left == 0 and waited >= settle_s) or waited >= timeout_s:
            return (waited if empty_since is None else empty_since), left
        time.sleep(0.25)


_SAMPLE = re.compile(r"^(\w+)\{([^}]*)\} (\S+)$", re.MULTILINE)


def _metric(text: str, name: str, label: str, **match: str) -> dict[str, int]:
    """Values of counter `name` by `label`, for series whose other labels equal `match`."""
    values: dict[str, int] = {}
    for metric, labels, value in _SAMPLE.findall(text):
        found = dict(re.findall(r'(\w+)="([^"]*)"', labels))
        if metric == name and all(found.get(k) == v for k, v in match.items()):
            values[found.get(label, "?")] = int(float(value))
    return values


def server_counters(server: Server) -> dict[str, dict[str, int]]:
    """From /metrics: answers by outcome for the stripe provider, and publishes by path
    (`inline` right after the commit, `relay` by the outbox sweep).

    With `--workers N` any worker answers for all of them (the workers' figures are
    merged, see the README's Operations).
    """
    text = httpx.get(server.base_url + "/metrics", timeout=5).text
    return {
        "outcomes": _metric(text, "gateway_webhooks_total", "outcome", provider="stripe"),
        "published": _metric(text, "gateway_published_total", "path"),
    }
