"""The CLI harness (tests/support/cli.py): `invoke` answers what the real process answers
(status, stdout, stderr with its log lines), and leaves this process as it found it: its
environment, its logging, and its event loop free for the next test."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from typing import Any

import orjson
import pytest

from gateway.logs import JsonFormatter
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
    stats = invoke("dlq", "stats", "--log-level", "debug", "--config", unreachable)
    assert stats.returncode == 1, stats.stderr
    assert logging_state() == before
    assert not any(isinstance(h.formatter, JsonFormatter) for h in logging.getLogger().handlers)


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
