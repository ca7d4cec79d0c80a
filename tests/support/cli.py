"""The `gateway` command in a test, two ways: `run` starts the installed script as a
real process; `invoke` calls `gateway.cli.main` in this process and answers the same
three things (status, stdout, stderr).

A process pays for an interpreter and the whole command tree's imports each time:
`gateway --version` or `dlq --help` took 2.2-2.8 s as a process and 0.03-0.13 s through
`invoke` on this 2-vCPU machine beside a parallel test run. Use `run` (or Popen with
`GATEWAY`) where the process is the point: its exit status or signals, a fresh
interpreter, the commands that run until stopped (`serve`, `relay`, `settle`, `forward`,
`listen`, `console`, `confirm`: they install signal handlers, which only the main thread
may, and a mistake would hang the test instead of hitting the timeout); `invoke` for the
short ones, and it refuses those.

`invoke` shares the process with the test: while a command runs, `sys.stdout`,
`sys.stderr` and the root logger's handler are the command's, so a server on the test's
own event loop (`asyncio.to_thread(invoke, ...)`) that logs meanwhile writes into the
command's stderr; a test that reads that stderr closely runs the command with `run`.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import os
import subprocess
import sys
import threading
import traceback
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from tests.support.processes import clean_env

__all__ = ["GATEWAY", "Completed", "Result", "invoke", "run"]

#: The venv's `gateway` script, as an operator runs it.
GATEWAY = str(Path(sys.executable).parent / "gateway")

#: `os.environ`, `sys.stdout`/`sys.stderr`, the cwd and the logging tree are the
#: process's own: two `invoke`s at once would write into each other's.
_ONE_AT_A_TIME = threading.Lock()
#: A call that timed out still holds all of that: every later call fails at once,
#: rather than run under another test, or wait for it.
_STUCK: list[str] = []

#: The commands that run until a signal stops them (`console` without `token`, and
#: `dlq run-jobs` without `--once`, too): they install signal handlers, which only the
#: main thread may; a test runs them with `run` or `subprocess.Popen([GATEWAY, ...])`.
UNTIL_STOPPED = frozenset(
    {"serve", "relay", "settle", "forward", "listen", "console", "confirm", "currency-stub"}
)


def runs_until_stopped(argv: list[str]) -> bool:
    """Whether `gateway ARGV` is one of the `UNTIL_STOPPED` commands (not its --help)."""
    words = [a for a in argv if not a.startswith("-")]
    if not words or "--help" in argv or "-h" in argv:
        return False
    if words[0] == "console":
        return "token" not in words
    if words[0] == "dlq":
        return "run-jobs" in words and "--once" not in argv
    return words[0] in UNTIL_STOPPED


def run(
    *args: str,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    timeout_s: float = 60,
) -> subprocess.CompletedProcess[str]:
    """`gateway ARGS` as a real process, to its end; `env` None: `clean_env()` (the
    process reads its own config file, not the developer's GATEWAY_* variables)."""
    return subprocess.run(
        [GATEWAY, *args],
        env=dict(clean_env() if env is None else env),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


@dataclass(frozen=True)
class Result:
    """What `invoke` answers: the fields of `subprocess.CompletedProcess` a test reads."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str

    def check_returncode(self) -> None:
        """Raise `CalledProcessError` on a non-zero status, as `CompletedProcess` does."""
        if self.returncode:
            raise subprocess.CalledProcessError(
                self.returncode, [GATEWAY, *self.args], self.stdout, self.stderr
            )


#: What `run` or `invoke` answers, for a helper that may do either.
Completed = subprocess.CompletedProcess[str] | Result


def invoke(
    *args: str,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    timeout_s: float = 120,
) -> Result:
    """`gateway ARGS` through `gateway.cli.main` in this process, with `os.environ`
    exactly `env` (None: `clean_env()`) and `cwd` for the call; everything it changes
    is put back afterwards.

    Blocking, in a thread of its own (a command's `asyncio.run` cannot nest in an async
    test's running loop), waited for at most `timeout_s`: a command still running then
    is `subprocess.TimeoutExpired`, as `run` raises, and is left behind in its daemon
    thread rather than hanging the run. An async test that serves something the
    command talks to awaits `asyncio.to_thread(invoke, ...)`, so its loop runs meanwhile.
    """
    argv = list(args)
    if _STUCK:
        raise RuntimeError(f"an earlier invoke timed out and still runs: gateway {_STUCK[0]}")
    if runs_until_stopped(argv):
        raise ValueError(f"gateway {' '.join(argv)} runs until stopped: use run() or Popen")
    environ = clean_env() if env is None else dict(env)  # a copy: `env` may be os.environ
    answer: list[Result | BaseException] = []

    def call() -> None:
        try:
            answer.append(_invoke(argv, environ, cwd))
        except BaseException as exc:  # handed to the caller's thread
            answer.append(exc)

    worker = threading.Thread(target=call, name="gateway-cli", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if not answer:
        _STUCK.append(" ".join(argv))
        raise subprocess.TimeoutExpired([GATEWAY, *argv], timeout_s)
    if isinstance(answer[0], BaseException):
        raise answer[0]
    return answer[0]


def _invoke(argv: list[str], env: Mapping[str, str], cwd: str | Path | None) -> Result:
    from gateway.cli import main  # the whole command tree: only for tests that use it

    out, err = io.StringIO(), io.StringIO()
    with _ONE_AT_A_TIME, _environ(env), _logging_restored(), contextlib.ExitStack() as stack:
        if cwd is not None:
            stack.enter_context(contextlib.chdir(cwd))
        # Captured before `main` configures logging: its handler binds the `sys.stderr`
        # of that moment, so the JSON log lines land in `err` as they would on stderr.
        stack.enter_context(contextlib.redirect_stdout(out))
        stack.enter_context(contextlib.redirect_stderr(err))
        try:
            status = main(argv)
        except SystemExit as exc:  # argparse: 2 for bad usage, 0 after --help/--version
            status = _exit_status(exc.code)
        except Exception:  # what the interpreter does with an uncaught one: exit 1
            traceback.print_exc()
            status = 1
    return Result(argv, status, out.getvalue(), err.getvalue())


def _exit_status(code: object) -> int:
    """The status `sys.exit(code)` gives a process (a message is printed, status 1)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


@contextlib.contextmanager
def _environ(env: Mapping[str, str]) -> Iterator[None]:
    """`os.environ` is `env` in the block and what it was afterwards (`main` writes
    GATEWAY_LOG_LEVEL for `serve`'s workers; a command may read any variable). Only the
    variables that differ are set or removed, never the whole environment cleared: the
    test's own threads (a server on its loop) read it meanwhile."""
    saved = dict(os.environ)
    _become(env)
    try:
        yield
    finally:
        _become(saved)


def _become(env: Mapping[str, str]) -> None:
    """Make `os.environ` equal to `env`, touching only the variables that differ."""
    for name in [n for n in os.environ if n not in env]:
        del os.environ[name]
    for name, value in env.items():
        if os.environ.get(name) != value:
            os.environ[name] = value


@contextlib.contextmanager
def _logging_restored() -> Iterator[None]:
    """Every logger's level, handlers and propagation, `logging.disable` and the event
    loop policy as they were: `gateway.logs.configure` replaces the root's handlers and
    sets levels (root, httpx, uvicorn), the operator commands quieten the JetStream
    adapter's logger, and the long-running commands install uvloop's policy. A logger
    first made during the call gets back the level a new one has (NOTSET)."""
    manager = logging.Logger.manager
    saved = {lg: (lg.level, lg.handlers[:], lg.propagate, lg.disabled) for lg in _loggers()}
    disabled, policy = manager.disable, asyncio.get_event_loop_policy()
    try:
        yield
    finally:
        asyncio.set_event_loop_policy(policy)
        logging.disable(disabled)
        for lg in _loggers():
            if lg not in saved:
                lg.setLevel(logging.NOTSET)
                continue
            level, handlers, lg.propagate, lg.disabled = saved[lg]
            lg.setLevel(level)  # clears the manager's cache of effective levels too
            lg.handlers[:] = handlers


def _loggers() -> list[logging.Logger]:
    """The root logger and every one made so far (placeholders are not loggers)."""
    made = logging.Logger.manager.loggerDict.values()
    return [logging.getLogger(), *(lg for lg in made if isinstance(lg, logging.Logger))]
