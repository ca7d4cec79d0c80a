"""`scripts/run.sh` (`make run`) supervises its processes and checks its ports first.

run.sh is run for real, with a config, ports and logs of the test's own (GATEWAY_CONFIG,
GATEWAY_RUN_LOGS) and this interpreter's `gateway` (GATEWAY_BIN).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.gateway import SECRETS
from tests.support.processes import clean_env
from tests.support.services import free_port, wait_for_port

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[3]
RUN_SH = REPO / "scripts" / "run.sh"


def write_config(path: Path, database_url: str, nats_url: str) -> dict[str, int]:
    """A config with free ports for every listener; the ports by setting."""
    ports = {
        "http.port": free_port(),
        "currency.url": free_port(),
        "metrics": free_port(),
        "console.port": free_port(),
    }
    path.write_text(
        f"""
[database]
url = "{database_url}"
[nats]
url = "{nats_url}"
[http]
host = "127.0.0.1"
port = {ports["http.port"]}
[currency]
url = "http://127.0.0.1:{ports["currency.url"]}"
[settlement]
metrics_port = {ports["metrics"]}
[console]
port = {ports["console.port"]}
[providers.stripe]
scheme = "stripe"
secrets = ["{SECRETS["stripe"]}"]
""",
        encoding="utf-8",
    )
    return ports


def _sigint_as_in_a_terminal() -> None:
    """Ctrl-C reaches the foreground job of a terminal, whose SIGINT is never ignored.
    A test runner started in the background (`make test &`, `nohup ... &` from a script)
    ignores SIGINT, its children inherit that, and a shell cannot trap a signal that was
    ignored when it started: run.sh would never see the test's Ctrl-C (the test then
    hung for its whole 60 s)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_run_sh(tmp_path: Path, config: Path) -> subprocess.Popen[str]:
    env = clean_env(
        GATEWAY_CONFIG=str(config),
        GATEWAY_BIN=str(Path(sys.executable).parent),
        GATEWAY_RUN_LOGS=str(tmp_path / "logs"),
        PYTHONPATH=str(REPO),
    )
    return subprocess.Popen(
        ["bash", str(RUN_SH)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, so cleanup reaches every child
        preexec_fn=_sigint_as_in_a_terminal,
    )


@pytest.fixture
def cleanup() -> Iterator[list[subprocess.Popen[str]]]:
    """Kill whatever a test's run.sh left behind (its whole process group)."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def children(pid: int) -> dict[str, int]:
    """run.sh's child processes by the gateway sub-command they run."""
    found: dict[str, int] = {}
    raw = Path(f"/proc/{pid}/task/{pid}/children").read_text(encoding="ascii")
    for child in map(int, raw.split()):
        try:
            argv = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
        except FileNotFoundError:
            continue
        words = [a.decode() for a in argv]
        for command in ("currency-stub", "settle", "serve", "console", "run-jobs"):
            if command in words:
                found[command] = child
    return found


def port_free(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


@pytest.mark.parametrize("victim", ["settle", "currency-stub", "run-jobs"])
def test_when_one_process_dies_the_others_stop_and_it_is_named(
    tmp_path: Path,
    database_url: str,
    nats_url: str,
    cleanup: list[subprocess.Popen[str]],
    victim: str,
) -> None:
    """Killing one of them ends run.sh with status 1, naming it with its log's tail,
    and the others are stopped."""
    config = tmp_path / "gateway.toml"
    ports = write_config(config, database_url, nats_url)
    proc = start_run_sh(tmp_path, config)
    cleanup.append(proc)
    for port in ports.values():
        wait_for_port(port, timeout_s=60)
    running = children(proc.pid)
    assert set(running) == {"currency-stub", "settle", "serve", "console", "run-jobs"}, running
    # Listening comes before the first log line (settle binds /metrics first): wait for
    # the line, so that there is a tail to show.
    log = tmp_path / "logs" / f"{victim}.log"
    deadline = time.monotonic() + 60
    while not (log.exists() and log.stat().st_size) and time.monotonic() < deadline:
        time.sleep(0.1)

    os.kill(running[victim], signal.SIGKILL)
    _, stderr = proc.communicate(timeout=60)

    assert proc.returncode == 1, stderr
    assert f"run: {victim} exited (status 137); stopped the others" in stderr
    assert f"the last lines of {tmp_path / 'logs' / victim}.log" in stderr
    for pid in running.values():
        assert not Path(f"/proc/{pid}").exists() or _is_zombie(pid), pid
    for port in ports.values():
        assert port_free(port), port


def test_ctrl_c_stops_them_all(
    tmp_path: Path, database_url: str, nats_url: str, cleanup: list[subprocess.Popen[str]]
) -> None:
    """SIGINT to run.sh (Ctrl-C) stops every process it started and exits 130; the
    console's address and a demo token that logs in were printed first."""
    config = tmp_path / "gateway.toml"
    ports = write_config(config, database_url, nats_url)
    proc = start_run_sh(tmp_path, config)
    cleanup.append(proc)
    assert proc.stdout is not None
    line = ""
    while "log in with:" not in line:
        line = proc.stdout.readline()
        assert line, "run.sh printed no console line"
    address, _, token = line.removeprefix("run: console on ").partition(" (log ")
    assert address == f"http://127.0.0.1:{ports['console.port']}/console/", line
    token = token.rpartition("log in with: ")[2].strip()
    for port in ports.values():
        wait_for_port(port, timeout_s=60)
    running = children(proc.pid)
    assert set(running) == {"currency-stub", "settle", "serve", "console", "run-jobs"}, running
    login = httpx.post(f"{address}login", data={"token": token}, follow_redirects=False)
    assert login.status_code == 303, login.text
    assert "gateway_console=" in login.headers["set-cookie"]
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "exited" not in stderr
    for pid in running.values():
        assert not Path(f"/proc/{pid}").exists() or _is_zombie(pid), pid


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")
    except FileNotFoundError:
        return True


@pytest.mark.parametrize("setting", ["http.port", "currency.url", "metrics", "console.port"])
def test_a_taken_port_is_named_with_its_setting_in_one_line(
    tmp_path: Path, cleanup: list[subprocess.Popen[str]], setting: str
) -> None:
    """Nothing starts when a port is taken: one line names the port and its setting."""
    config = tmp_path / "gateway.toml"
    # Nothing is reached before the check: the URLs need not lead anywhere.
    ports = write_config(config, "postgresql://127.0.0.1:1/none", "nats://127.0.0.1:1")
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", ports[setting]))
        squatter.listen()
        proc = start_run_sh(tmp_path, config)
        cleanup.append(proc)
        stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 1
    assert stdout == ""
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    name = "settlement.metrics_port" if setting == "metrics" else setting
    assert lines[0].startswith(f"run: port {ports[setting]} ({name} in {config}"), lines[0]
    assert not (tmp_path / "logs" / "serve.log").exists()


def test_run_sh_defaults_are_the_make_run_ones() -> None:
    """Without the variables, run.sh uses the repository's venv, gateway.toml and .data."""
    text = RUN_SH.read_text(encoding="utf-8")
    for default in (
        "BIN=${GATEWAY_BIN:-.venv/bin}",
        "CONFIG=${GATEWAY_CONFIG:-gateway.toml}",
        "LOGS=${GATEWAY_RUN_LOGS:-.data}",
    ):
        assert default in text
