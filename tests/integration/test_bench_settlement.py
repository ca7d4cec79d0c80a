"""`python -m bench.settlement` on a small backlog: its checks hold on the PostgreSQL
ledger, each event's transfer looked up by id through the `Ledger` port as on
TigerBeetle, and fail when the ledger lacks one; and `--ledger tigerbeetle` without a
cluster stops at once with the reason. Figures are not asserted (they belong to the
benchmark), only the checks."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from bench.settlement import settlement_benchmark
from gateway.adapters.postgres import Pool
from gateway.adapters.postgres.ledger import PostgresLedger
from gateway.core.ledger.port import Ledger, PostedTransfer
from gateway.settings import Settings
from gateway.wiring.settlement import open_ledger as wiring_open_ledger
from tests.support.services import free_port

ROOT = Path(__file__).resolve().parents[2]
EVENTS = 300


class LosingPostgresLedger(PostgresLedger):
    """The PostgreSQL ledger, reading back every transfer but the first asked."""

    async def lookup_transfers(self, transfer_ids: Sequence[int]) -> list[PostedTransfer | None]:
        return [None, *(await super().lookup_transfers(transfer_ids[1:]))]


@pytest.mark.parametrize("lost", [False, True], ids=["as posted", "one transfer lost"])
def test_the_checks_hold_on_the_postgres_ledger(
    lost: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[type] = []

    @contextlib.asynccontextmanager
    async def open_ledger(settings: Settings, pool: Pool) -> AsyncIterator[Ledger]:
        assert settings.ledger.backend == "postgres"  # the [ledger] section was written
        if lost:
            opened.append(LosingPostgresLedger)
            yield LosingPostgresLedger(pool)
            return
        async with wiring_open_ledger(settings, pool) as ledger:
            opened.append(type(ledger))
            yield ledger

    monkeypatch.setattr("bench.settlement_ledger.open_ledger", open_ledger)
    result = settlement_benchmark(EVENTS, ledger="postgres")
    assert result["ledger"] == "postgres"
    assert opened == [LosingPostgresLedger if lost else PostgresLedger]
    checks = {c["check"]: c for c in result["checks"]}
    assert set(checks) == {
        "one transfer per event",
        "every settlement settled",
        "no dead letters",
        "ledger balanced (Ledger.check)",
        "merchants hold captures minus refunds, converted once",
        "ordering property holds",  # ordering is on, as shipped: the events are keyed
        "every key applied to its last event",
    }
    assert result["ordering"] and result["keys"] == 1_000
    one_each = checks.pop("one transfer per event")
    assert all(c["ok"] for c in checks.values()), checks
    assert one_each["ok"] is not lost
    found = EVENTS - 1 if lost else EVENTS
    assert one_each["detail"] == (
        f"{found} of {EVENTS} events' transfers found with their accounts and amount "
        f"({EVENTS - found} missing)"
    )


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        (None, "TIGERBEETLE_ADDRESS not set: no TigerBeetle server here"),
        ("127.0.0.1:{port}", "TigerBeetle cluster 0 at TIGERBEETLE_ADDRESS=127.0.0.1:{port} "
                             "did not answer within 5 s"),
    ],
)  # fmt: skip
def test_tigerbeetle_without_a_cluster_stops_at_once_with_the_reason(
    address: str | None, reason: str
) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIGERBEETLE_")}
    if address is not None:
        env["TIGERBEETLE_ADDRESS"] = address.format(port=port)
    done = subprocess.run(
        [sys.executable, "-m", "bench.settlement", "--events", "100", "--ledger", "tigerbeetle"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert done.stdout == ""  # nothing started: no backlog, no worker
    assert done.stderr == f"bench.settlement: --ledger tigerbeetle: {reason.format(port=port)}\n"
