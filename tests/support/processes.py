"""Stopping a child process the way every harness here does: a signal, a bounded wait,
then SIGKILL, so that no test, scenario or benchmark leaves a process behind or waits
for ever on one that will not stop."""

from __future__ import annotations

import os
import signal
import subprocess
from typing import Any


def clean_env(**extra: str) -> dict[str, str]:
    """The environment without any GATEWAY_* override (a child reads its own config
    file, not the developer's), plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_")}
    env.update(extra)
    return env


def stop(
    proc: subprocess.Popen[Any], timeout_s: float = 15.0, sig: signal.Signals = signal.SIGTERM
) -> bool:
    """Send `sig` (unless the process has already exited), wait up to `timeout_s`, then
    kill it. True when it ended by itself; False when it had to be killed."""
    if proc.poll() is not None:
        return True
    proc.send_signal(sig)
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return False
    return True
