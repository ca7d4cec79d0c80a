"""A long-running command stops on SIGTERM even when something in it swallows the
cancellation (as nats-py's pull fetch has been seen to): it is asked again, and after a
deadline the process ends."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

# `main` swallows the first `swallow` cancellations, as a library might, then stops.
PROGRAM = """
import asyncio, sys
from gateway.wiring import signals
signals.RECANCEL_AFTER_S = 0.5
signals.STOP_DEADLINE_S = 3.0
swallow = int(sys.argv[1])

async def main():
    seen = 0
    print("ready", flush=True)
    while True:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            seen += 1
            if seen > swallow:
                raise

signals.run_until_signalled(main)
"""


def run_and_stop(swallow: int) -> tuple[int, float, str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", PROGRAM, str(swallow)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        _, stderr = proc.communicate(timeout=30)
    finally:
        proc.kill()
    return proc.returncode, time.monotonic() - started, stderr


@pytest.mark.parametrize("swallow", [0, 1, 2])
def test_sigterm_stops_even_when_cancellations_are_swallowed(swallow: int) -> None:
    returncode, took_s, stderr = run_and_stop(swallow)
    assert returncode == 0, stderr
    assert took_s < 20
    assert ("cancelling again" in stderr) == (swallow > 0)


def test_a_process_that_never_stops_is_ended_at_the_deadline() -> None:
    returncode, took_s, stderr = run_and_stop(10_000)
    assert returncode == 1
    assert "did not stop in time" in stderr
    assert 2.5 < took_s < 20
