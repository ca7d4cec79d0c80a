"""Gateway processes for the scenarios: `gateway serve|relay|settle` with a TOML config,
started, SIGKILLed and restarted for real, each logging to its own file."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import orjson

from tests.support import processes
from tests.support.cli import GATEWAY
from tests.support.processes import clean_env


class GatewayProcess:
    """One `gateway COMMAND --config FILE` child; restartable with the same arguments."""

    def __init__(self, name: str, args: list[str], config: Path, log_dir: Path) -> None:
        self.name = name
        self.args = args
        self.config = config
        self.log_path = log_dir / f"{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> GatewayProcess:
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child owns the descriptor
        self.proc = subprocess.Popen(
            [GATEWAY, *self.args[:1], "--config", str(self.config), *self.args[1:]],
            env=clean_env(),
            stdout=log,
            stderr=log,
        )
        log.close()
        self.starts += 1
        return self

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL: nothing flushed, nothing acknowledged, no goodbye."""
        self._signal(signal.SIGKILL, 10)

    def stop(self, timeout_s: float = 20) -> None:
        """SIGTERM and wait (graceful shutdown), SIGKILL if it does not finish."""
        self._signal(signal.SIGTERM, timeout_s)

    def _signal(self, sig: signal.Signals, timeout_s: float) -> None:
        if self.proc is None:
            return
        processes.stop(self.proc, timeout_s, sig)
        self.proc = None

    def log_lines(self) -> list[dict[str, Any]]:
        """The JSON log lines written so far (other lines skipped)."""
        found = []
        for line in self.log_path.read_bytes().splitlines():
            if line.startswith(b"{"):
                try:
                    found.append(orjson.loads(line))
                except orjson.JSONDecodeError:
                    continue
        return found

    async def wait_http(self, url: str, timeout_s: float = 30.0) -> None:
        """Until `url` answers 200 (or the process dies, or time runs out)."""
        deadline = time.monotonic() + timeout_s
        async with httpx.AsyncClient(timeout=1.0) as http:
            while True:
                if not self.alive:
                    raise RuntimeError(f"{self.name} exited; see {self.log_path}")
                try:
                    if (await http.get(url)).status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{url} not ready after {timeout_s} s; see {self.log_path}")
                await asyncio.sleep(0.1)
