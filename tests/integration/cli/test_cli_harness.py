"""The CLI harness (tests/support/cli.py): `invoke` answers what the real process answers
(status, stdout, stderr with its log lines), and leaves this process as it found it: its
environment, its logging, and its event loop free for the next test."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import threading
from pathlib import Path
from typing import Any

import orjson
import pytest

from gateway.logs import JsonFormatter
from tests.support import cli as cli_harness
from tests.support.cli import invoke, run
from tests.support.config_file import with_urls, write_toml
from tests.support.processes import clean_env

#: Loggers `main` and the commands touch: the root, the ones `gateway.logs.configure`
#: sets, and the one `operator_command` quietens.
TOUCHED = ("", "httpx", "httpcore", "uvicorn", "uvicorn.error", "gateway.adapters.jetstream")


@pytest.fixture
def unreachable(tmp_path: Path) -> str:
    """A config whose database and NATS refuse at once (port 1), and whose retention
    settings warn (a log line) before the database is tried."""
    doc = with_urls({"retention": {"key_max_age_s": 3600, "payload_max_age_s": 60}})
    return str(write_toml(tmp_path / "gateway.toml", doc))


@pytest.fixture
def body(tmp_path: Path) -> str:
    path = tmp_path / "event.json"
    path.write_bytes(b'{"id": "evt_harness"}')
    return str(path)


def answer(result: Any) -> tuple[int, str, str]:
    return result.returncode, result.stdout, result.stderr


def logging_state() -> list[tuple[object, ...]]:
    found: list[tuple[object, ...]] = []
    for name in TOUCHED:
        logger = logging.getLogger(name or None)
        found.append((name, logger.level, list(logger.handlers), logger.propagate))
    return found


def without_ts(stderr: str) -> list[object]:
    """stderr's lines, each JSON log line without its timestamp (the only difference
    two runs of one command may show)."""
    lines: list[object] = []
    for line in stderr.splitlines():
        logged = line.startswith("{")
        lines.append({k: v for k, v in orjson.loads(line).items() if k != "ts"} if logged else line)
    return lines


def test_version_and_help_are_the_process_answer() -> None:
    assert answer(invoke("--version")) == answer(run("--version"))
    assert invoke("--version").returncode == 0
    # argparse wraps help to the terminal's width: this process's own terminal under
    # `pytest -s`, 80 columns for the child's pipe; COLUMNS sets both.
    eighty = clean_env(COLUMNS="80")
    assert answer(invoke("dlq", "--help", env=eighty)) == answer(run("dlq", "--help", env=eighty))


@pytest.mark.parametrize(
    "argv",
    [["--nope"], ["dlq", "list", "--bogus"], ["--log-level", "loud", "migrate"], []],
)
def test_bad_usage_is_status_2_with_the_process_usage_error(argv: list[str]) -> None:
    in_process = invoke(*argv)
    assert in_process.returncode == 2
    assert in_process.stderr.startswith("gateway: error: ")
    assert answer(in_process) == answer(run(*argv))


def test_log_lines_land_in_stderr_as_the_process_writes_them(unreachable: str) -> None:
    """The retention warning is a JSON log line, logged before the database refuses;
    `invoke`'s stderr holds it, beside the one-line outage, as the process's does."""
    argv = ("retention", "run", "--dry-run", "--config", unreachable)
    in_process, process = invoke(*argv), run(*argv)
    assert (in_process.returncode, in_process.stdout) == (process.returncode, process.stdout)
    assert in_process.returncode == 1
    assert "shorter than providers' retry schedules" in in_process.stderr
    assert without_ts(in_process.stderr) == without_ts(process.stderr)


def test_the_environment_is_exactly_env_and_put_back(
    monkeypatch: pytest.MonkeyPatch, body: str
) -> None:
    """A developer's GATEWAY_* variable is not seen by default; `main`'s own write of
    GATEWAY_LOG_LEVEL is undone; a variable given in `env` is seen, and gone after."""
    monkeypatch.setenv("GATEWAY_LOG_LEVEL", "loud")  # would stop any command that saw it
    sign = ("sign", "stripe", "--secret", "whsec_x", "--body", body)
    before = dict(os.environ)

    signed = invoke(*sign)
    assert signed.returncode == 0, signed.stderr
    assert signed.stdout.startswith("Stripe-Signature: ")
    assert dict(os.environ) == before  # not INFO, as `main` left it in the call

    refused = invoke(*sign, env=clean_env(GATEWAY_LOG_LEVEL="loud", GATEWAY_HARNESS="1"))
    assert refused.returncode == 2
    assert refused.stderr.startswith("gateway: config error: GATEWAY_LOG_LEVEL: 'LOUD'")
    assert "GATEWAY_HARNESS" not in os.environ
    assert dict(os.environ) == before


def test_logging_is_put_back(unreachable: str) -> None:
    """Root handlers and levels, the levels `configure` sets and the JetStream logger
    `operator_command` quietens: as they were, with no JSON handler left behind."""
    before = logging_state()
    json_before = json_handlers()
    stats = invoke("dlq", "stats", "--log-level", "debug", "--config", unreachable)
    assert stats.returncode == 1, stats.stderr
    assert '"level":"debug"' in stats.stderr  # it configured logging, at its own level
    assert logging_state() == before
    # None left behind (an earlier test that called `cli.main` directly may have left one).
    assert json_handlers() == json_before


def json_handlers() -> list[logging.Handler]:
    return [h for h in logging.getLogger().handlers if isinstance(h.formatter, JsonFormatter)]


async def test_from_an_async_test_and_two_at_once(unreachable: str) -> None:
    """Called in a running loop, the command's own `asyncio.run` runs in a thread; two
    invokes from threads take turns, each with its own output."""
    stats = invoke("dlq", "stats", "--config", unreachable)
    assert stats.returncode == 1
    assert stats.stderr.startswith("gateway: cannot use the database at 127.0.0.1:1")
    version, usage = await asyncio.gather(
        asyncio.to_thread(invoke, "--version"), asyncio.to_thread(invoke, "dlq", "--help")
    )
    assert version.stdout.startswith("gateway ") and version.stdout.count("\n") == 1
    assert usage.stdout.startswith("usage: gateway dlq")
    assert version.stderr == usage.stderr == ""
    await asyncio.sleep(0)  # the loop still runs


@pytest.mark.parametrize(
    "argv",
    [["serve"], ["relay", "--config", "x.toml"], ["--json", "console"], ["dlq", "run-jobs"]],
)
def test_commands_that_run_until_stopped_are_refused(argv: list[str]) -> None:
    """They would install signal handlers off the main thread and never return."""
    with pytest.raises(ValueError, match="runs until stopped"):
        invoke(*argv)


def test_until_stopped_commands_still_answer_help_and_once() -> None:
    assert invoke("serve", "--help").stdout.startswith("usage: gateway serve")
    assert invoke("dlq", "run-jobs", "--help").returncode == 0


def test_a_command_that_does_not_return_is_a_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    """Waited for at most `timeout_s`, then `TimeoutExpired` as `run` raises; the stuck
    call is left in its daemon thread, and while it runs every later call fails at once
    (it holds the environment, the output and the logging)."""
    import gateway.cli

    release = threading.Event()

    def stuck(argv: list[str]) -> int:
        release.wait(30)
        return 0

    monkeypatch.setattr(gateway.cli, "main", stuck)
    with pytest.raises(subprocess.TimeoutExpired):
        invoke("--version", timeout_s=0.2)
    with pytest.raises(RuntimeError, match="an earlier invoke timed out"):
        invoke("--version", timeout_s=10)
    release.set()
    cli_harness._STUCK.clear()  # this test's own stuck call is over
    assert invoke("--version", timeout_s=10).returncode == 0


def test_the_environment_changes_only_where_env_differs(monkeypatch: pytest.MonkeyPatch) -> None:
    """A thread of the test reading a variable both have sees it throughout the call
    (the environment is never emptied, even for a moment)."""
    import gateway.cli

    monkeypatch.setenv("GATEWAY_HARNESS_KEPT", "1")
    seen: list[str | None] = []

    def reads(argv: list[str]) -> int:
        seen.append(os.environ.get("GATEWAY_HARNESS_KEPT"))
        seen.append(os.environ.get("GATEWAY_HARNESS_ADDED"))
        return 0

    monkeypatch.setattr(gateway.cli, "main", reads)
    env = {**os.environ, "GATEWAY_HARNESS_ADDED": "2"}
    stop = threading.Event()
    watched: list[str | None] = []

    def watch() -> None:
        while not stop.is_set():
            watched.append(os.environ.get("GATEWAY_HARNESS_KEPT"))

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        for _ in range(20):
            assert invoke("x", env=env).returncode == 0
    finally:
        stop.set()
        watcher.join()
    assert seen[:2] == ["1", "2"]
    assert set(watched) == {"1"}
    assert "GATEWAY_HARNESS_ADDED" not in os.environ
