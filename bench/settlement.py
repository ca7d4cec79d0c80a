"""Settlement throughput (issue 6: drain 50,000 payment events through `gateway settle`
with the PostgreSQL ledger, target >= 3,000 events/s).

The settlement worker does not exist yet, so there is nothing to measure. This module
says so instead of printing a number; when `gateway settle` lands, the driver belongs in
`settlement_benchmark` (fill a stream with 50,000 payment events, start the worker, time
until its consumer has no pending messages and the ledger holds 50,000 transfers).
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from bench.servers import ROOT

BACKLOG_EVENTS = 50_000
TARGET_EVENTS_PER_S = 3_000


def settle_command_exists() -> bool:
    """True if `gateway settle --help` succeeds (the sub-command is registered)."""
    done = subprocess.run(
        [sys.executable, "-m", "gateway.cli", "settle", "--help"],
        cwd=ROOT,
        capture_output=True,
        timeout=60,
        check=False,
    )
    return done.returncode == 0


def settlement_benchmark() -> dict[str, Any]:
    """Placeholder: reports why no settlement figure exists; never invents one."""
    if not settle_command_exists():
        print("settlement benchmark: not available yet (gateway settle missing)")
        return {"status": "not_available", "reason": "gateway settle missing"}
    print("settlement benchmark: not available yet (gateway settle exists; no bench driver yet)")
    return {
        "status": "not_available",
        "reason": "gateway settle exists but bench/settlement.py has no driver for it yet",
    }
