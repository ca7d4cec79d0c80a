"""What a newcomer hits first, as the `gateway` command answers it: a config without its
URLs, a stream that is not the configured one, a port already taken, a database that is
down, and library logs in a command's output. Each is one line on stderr with a known exit
status. `serve`, `relay` and `settle` start as real processes; the short commands run in
this process (tests/support/cli.py).
"""

from __future__ import annotations

import asyncio
import http.server
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import nats
import orjson
import pytest
from nats.js.api import StorageType, StreamConfig

from tests.support.cli import Completed, invoke, run
from tests.support.processes import clean_env
from tests.support.services import free_port, unique_name

PASSWORD = "hunter2-not-printed"
#: Commands that run until stopped: a real process each (tests/support/cli.py says why).
LONG_RUNNING = {"serve", "relay", "settle"}


def gateway(*args: str, env: dict[str, str] | None = None) -> Completed:
    """`gateway ARGS` with no GATEWAY_* variable but `env`'s: a process for a command
    that runs until stopped, in this process for the others."""
    environ = clean_env(**(env or {}))
    if args[0] in LONG_RUNNING:
        return run(*args, env=environ)
    return invoke(*args, env=environ)


def one_line(result: Completed) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def write(path: Path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return str(path)


# --- no silent defaults -----------------------------------------------------------------

MISSING_DATABASE = (
    "gateway: config error: database.url: not set: give url under [database] in the "
    "config file, or GATEWAY_DATABASE_URL in the environment"
)
MISSING_NATS = (
    "gateway: config error: nats.url: not set: give url under [nats] in the config file, "
    "or GATEWAY_NATS_URL in the environment"
)


@pytest.mark.parametrize("command", ["migrate", "serve", "relay", "settle", "dlq stats"])
def test_an_empty_config_names_both_ways_to_set_each_url(tmp_path: Path, command: str) -> None:
    """No database `test` on 127.0.0.1 and no NATS on 4222 by default: start-up stops at
    once, before anything connects, naming the file's key and the variable."""
    empty = write(tmp_path / "gateway.toml", "")
    result = gateway(*command.split(), "--config", empty)
    assert result.returncode == 2
    assert one_line(result) == MISSING_DATABASE

    only_db = write(tmp_path / "db.toml", '[database]\nurl = "postgresql://127.0.0.1:1/x"\n')
    result = gateway(*command.split(), "--config", only_db)
    assert result.returncode == 2
    assert one_line(result) == MISSING_NATS


def test_the_environment_alone_may_set_the_urls(tmp_path: Path, database_url: str) -> None:
    empty = write(tmp_path / "gateway.toml", "")
    env = {"GATEWAY_DATABASE_URL": database_url, "GATEWAY_NATS_URL": "nats://127.0.0.1:1"}
    result = gateway("dlq", "stats", "--json", "--config", empty, env=env)
    assert result.returncode == 0, result.stderr
    assert orjson.loads(result.stdout)["unresolved"] == 0


# --- the stream -------------------------------------------------------------------------


def stream_config(tmp_path: Path, database_url: str, nats_url: str, stream: str) -> str:
    return write(
        tmp_path / "gateway.toml",
        f'[database]\nurl = "{database_url}"\n'
        f'[nats]\nurl = "{nats_url}"\nstream = "{stream}"\n'
        f"[http]\nport = {free_port()}\n"
        "[outbox]\nrelay_metrics_port = 0\n[settlement]\nmetrics_port = 0\n",
    )


async def _stream(
    nats_url: str, name: str, config: dict[str, object] | None, drop: bool
) -> StreamConfig | None:
    """Create `name` with `config` when given (or delete it); return its configuration
    (None: absent)."""
    nc = await nats.connect(nats_url)
    try:
        js = nc.jetstream()
        if drop:
            await js.delete_stream(name)
        if config:
            await js.add_stream(StreamConfig(name=name, **config))  # type: ignore[arg-type]
        try:
            return (await js.stream_info(name)).config
        except nats.js.errors.NotFoundError:
            return None
    finally:
        await nc.close()


def stream(
    nats_url: str, name: str, config: dict[str, object] | None = None, *, drop: bool = False
) -> StreamConfig | None:
    return asyncio.run(_stream(nats_url, name, config, drop))


OTHER: dict[str, object] = {"subjects": ["webhooks.>"], "duplicate_window": 60.0, "max_age": 3600.0}
DIFFERENCES = "subjects webhooks.> (configured events.>, webhooks.>); duplicate window 60 s"


@pytest.mark.parametrize("command", ["serve", "relay", "settle"])
def test_a_stream_that_differs_stops_start_up_naming_the_differences(
    tmp_path: Path, database_url: str, nats_url: str, command: str
) -> None:
    """The gateway used to update whatever stream of that name it found."""
    name = unique_name("GW_OTHER")
    stream(nats_url, name, OTHER)
    cfg = stream_config(tmp_path, database_url, nats_url, name)

    result = gateway(command, "--config", cfg)

    assert result.returncode == 2
    line = one_line(result)
    assert line.startswith(f"gateway: config error: nats.stream: stream {name} exists"), line
    assert DIFFERENCES in line and "(configured 120 s)" in line
    assert "gateway migrate" in line
    found = stream(nats_url, name)
    assert found is not None and found.subjects == ["webhooks.>"]  # left as it was
    assert found.duplicate_window == 60.0


def test_migrate_creates_and_updates_the_stream_and_says_what_changed(
    tmp_path: Path, database_url: str, nats_url: str
) -> None:
    name = unique_name("GW_MIGRATE")
    cfg = stream_config(tmp_path, database_url, nats_url, name)
    created = gateway("migrate", "--config", cfg)
    assert created.returncode == 0, created.stderr
    assert created.stdout.splitlines()[-1] == f"stream {name} created"
    again = gateway("--json", "migrate", "--config", cfg)
    assert orjson.loads(again.stdout) == {
        "applied": [],
        "stream": {"name": name, "action": "unchanged", "changes": []},
    }

    stream(nats_url, name, drop=True)  # two streams cannot hold the same subjects
    other = unique_name("GW_MIGRATE")
    stream(nats_url, other, OTHER)
    cfg = stream_config(tmp_path, database_url, nats_url, other)
    updated = gateway("migrate", "--config", cfg)
    assert updated.returncode == 0, updated.stderr
    assert updated.stdout.splitlines()[-1] == (
        f"stream {other} updated: subjects webhooks.> -> events.>, webhooks.>; "
        "duplicate window 60 s -> 120 s; allow_atomic false -> true"
    )
    found = stream(nats_url, other)
    assert found is not None and sorted(found.subjects or []) == ["events.>", "webhooks.>"]
    assert found.duplicate_window == 120.0
    assert found.max_age == 3600.0  # what the operator set, and the gateway does not, stays


def test_migrate_reports_a_change_nats_refuses_in_one_line(
    tmp_path: Path, database_url: str, nats_url: str
) -> None:
    name = unique_name("GW_MEMORY")
    stream(nats_url, name, {"subjects": ["webhooks.>", "events.>"], "storage": StorageType.MEMORY})
    cfg = stream_config(tmp_path, database_url, nats_url, name)
    result = gateway("migrate", "--config", cfg)
    assert result.returncode == 1
    line = one_line(result)
    assert line.startswith(
        f"gateway: StreamUpdateRefused: NATS refused to create or update stream {name}: "
    ), line


# --- a taken port ---------------------------------------------------------------------


@pytest.fixture
def squatter() -> Iterator[socket.socket]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s


@pytest.mark.parametrize("workers", ["1", "2"])
def test_serve_with_its_port_taken_is_one_line_before_anything_starts(
    tmp_path: Path, database_url: str, nats_url: str, squatter: socket.socket, workers: str
) -> None:
    """It used to start the pool, NATS and the relay, then log 13 JSON lines and exit 3."""
    name = unique_name("GW_PORT")
    cfg = stream_config(tmp_path, database_url, nats_url, name)
    port = str(squatter.getsockname()[1])
    result = gateway("serve", "--config", cfg, "--port", port, "--workers", workers)
    assert result.returncode == 2
    assert one_line(result) == (
        f"gateway: config error: --port: port {port} is already in use on 127.0.0.1 "
        "(stop what listens there, or choose another)"
    )
    assert stream(nats_url, name) is None  # nothing reached NATS: nothing had started


def test_serve_with_its_admin_port_taken_is_one_line(
    tmp_path: Path, database_url: str, nats_url: str, squatter: socket.socket
) -> None:
    admin = squatter.getsockname()[1]
    cfg = write(
        tmp_path / "gateway.toml",
        f'[database]\nurl = "{database_url}"\n[nats]\nurl = "{nats_url}"\n'
        f"[http]\nport = {free_port()}\nadmin_port = {admin}\n",
    )
    result = gateway("serve", "--config", cfg)
    assert result.returncode == 2
    assert one_line(result).startswith(
        f"gateway: config error: http.admin_port: port {admin} is already in use"
    )


# --- a database that is down ----------------------------------------------------------

OUTAGE_COMMANDS = [
    "migrate",
    "dlq list",
    "dlq show 1",
    "dlq replay --all",
    "dlq resolve 1 --note done",
    "dlq stats",
    "events list",
    "events show 1",
    "events replay --all",
    "ledger open-account m_1",
    "ledger balances",
    "ledger check",
    "reconcile",
    "retention run",
]


@pytest.fixture(scope="module")
def closed_port() -> int:
    return free_port()


@pytest.mark.parametrize("command", OUTAGE_COMMANDS)
@pytest.mark.parametrize("where", ["database.url", "GATEWAY_DATABASE_URL"])
def test_every_command_reports_a_database_outage_in_the_same_line(
    tmp_path: Path, closed_port: int, command: str, where: str
) -> None:
    """`dlq` and `events` printed `[Errno 111] ...`, the others `DatabaseUnavailable`;
    neither said which database or which setting. Never the password."""
    url = f"postgresql://gw:{PASSWORD}@127.0.0.1:{closed_port}/gw"
    in_file = url if where == "database.url" else "postgresql://127.0.0.1:1/unused"
    cfg = write(
        tmp_path / "gateway.toml",
        f'[database]\nurl = "{in_file}"\n[nats]\nurl = "nats://127.0.0.1:{closed_port}"\n',
    )
    env = {"GATEWAY_DATABASE_URL": url} if where != "database.url" else {}
    result = gateway(*command.split(), "--config", cfg, env=env)
    # `ledger check` says "no verdict" (3), apart from an imbalance (1), for its monitor.
    assert result.returncode == (3 if command == "ledger check" else 1)
    assert one_line(result) == (
        f"gateway: cannot use the database at 127.0.0.1:{closed_port} (set by {where}): "
        "database unreachable: ConnectionRefusedError"
    )
    assert PASSWORD not in result.stderr + result.stdout


@pytest.mark.parametrize(
    ("flags", "verdict", "error"),
    [
        ((), "balanced", "PostgreSQL ledger unreachable: database unreachable: "),
        (("--payments",), "differing", "database unreachable: "),
    ],
)
def test_ledger_check_without_its_database_says_no_verdict_in_json(
    tmp_path: Path, closed_port: int, flags: tuple[str, ...], verdict: str, error: str
) -> None:
    """For a monitor: the verdict is null (not false) and the status 3, not 1."""
    cfg = write(
        tmp_path / "gateway.toml",
        f'[database]\nurl = "postgresql://127.0.0.1:{closed_port}/gw"\n'
        f'[nats]\nurl = "nats://127.0.0.1:{closed_port}"\n',
    )
    result = gateway("ledger", "check", *flags, "--json", "--config", cfg)
    assert result.returncode == 3
    assert orjson.loads(result.stdout) == {
        verdict: None,
        "error": f"{error}ConnectionRefusedError",
    }


def test_migrate_reports_nats_down_the_same_way(
    tmp_path: Path, database_url: str, closed_port: int
) -> None:
    cfg = write(
        tmp_path / "gateway.toml",
        f'[database]\nurl = "{database_url}"\n'
        f'[nats]\nurl = "nats://token-{PASSWORD}@127.0.0.1:{closed_port}"\n',
    )
    result = gateway("migrate", "--config", cfg)
    assert result.returncode == 1
    assert result.stdout == "applied 0 migration(s)\n"  # the database part is done
    assert one_line(result) == (
        f"gateway: cannot use NATS at 127.0.0.1:{closed_port} (set by nats.url): "
        "NATS is not reachable: NoServersError"
    )
    assert PASSWORD not in result.stderr


# --- library logs ---------------------------------------------------------------------


class _Ok(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def ok_server() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Ok)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/webhooks/stripe"
    server.shutdown()
    server.server_close()


def test_library_logs_stay_out_of_a_commands_output_and_urls_out_of_every_log(
    tmp_path: Path, ok_server: str
) -> None:
    """`gateway sign --send` printed httpx's own `HTTP Request: POST ...` record at INFO
    (as backfill printed the Stripe SDK's) before the command's answer. That record
    names the whole URL, which may carry a credential: not even `debug` shows it."""
    body = write(tmp_path / "event.json", '{"id": "evt_1"}')
    argv = ("sign", "stripe", "--secret", "whsec_x", "--body", body, "--send", ok_server)
    quiet = gateway(*argv, "--log-level", "info")
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stdout.startswith("200 ok")
    assert quiet.stderr == ""
    loud = gateway(*argv, "--log-level", "debug")
    assert loud.returncode == 0, loud.stderr
    assert '"logger":"httpx"' not in loud.stderr
    assert ok_server not in loud.stderr
