"""`python -m bench.settlement` on a small backlog: its checks hold on the PostgreSQL
ledger, both ways it reads transfers (each event's transfer looked up by id through the
`Ledger` port, as on TigerBeetle, or counted in `ledger_transfers`); and `--ledger
tigerbeetle` without a cluster stops at once with the reason. Figures are not asserted
(they belong to the benchmark), only the checks."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from decimal import Decimal
from pathlib import Path

import pytest
from asyncpg import Record

from bench.settlement import settlement_benchmark
from gateway.adapters.postgres import Pool
from gateway.adapters.postgres.ledger import PostgresLedger
from gateway.compose.settlement import open_ledger as compose_open_ledger
from gateway.core.ledger import Ledger, PostedTransfer, TransferLookup
from gateway.core.settlement import settlement_ref
from gateway.settings import Settings
from tests.support.services import free_port

ROOT = Path(__file__).resolve().parents[2]
EVENTS = 300


class LookingUpPostgresLedger(PostgresLedger):
    """The PostgreSQL ledger with `lookup_transfers`, as TigerBeetle's adapter has it."""

    async def lookup_transfers(self, transfer_ids: Sequence[int]) -> list[PostedTransfer | None]:
        rows = await self._pool.fetch(
            "SELECT id, debit_account_id, credit_account_id, amount, ledger, code,"
            " settlement_id, rate_at_payment FROM ledger_transfers"
            " WHERE id = ANY($1::text[]::numeric[])",
            [str(i) for i in transfer_ids],
        )
        found = {int(r["id"]): _posted(r) for r in rows}
        return [found.get(i) for i in transfer_ids]


def _posted(r: Record) -> PostedTransfer:
    return PostedTransfer(
        id=int(r["id"]), debit_account_id=int(r["debit_account_id"]),
        credit_account_id=int(r["credit_account_id"]), amount_minor=int(r["amount"]),
        ledger=int(r["ledger"]), code=int(r["code"]),
        settlement_ref=settlement_ref(r["settlement_id"]),
        rate_at_payment=Decimal(r["rate_at_payment"]),
    )  # fmt: skip


@pytest.mark.parametrize("transfers", ["looked up by id", "counted"])
def test_the_checks_hold_on_the_postgres_ledger(
    transfers: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    looked_up: list[bool] = []

    @contextlib.asynccontextmanager
    async def open_ledger(settings: Settings, pool: Pool) -> AsyncIterator[Ledger]:
        assert settings.ledger.backend == "postgres"  # the [ledger] section was written
        if transfers == "counted":
            async with compose_open_ledger(settings, pool) as ledger:
                looked_up.append(isinstance(ledger, TransferLookup))
                yield ledger
            return
        looked_up.append(True)
        yield LookingUpPostgresLedger(pool)

    monkeypatch.setattr("bench.settlement_ledger.open_ledger", open_ledger)
    result = settlement_benchmark(EVENTS, ledger="postgres")
    assert result["ledger"] == "postgres"
    assert looked_up == [transfers == "looked up by id"]
    checks = {c["check"]: c for c in result["checks"]}
    assert all(c["ok"] for c in checks.values()), checks
    one_each = checks["one transfer per event"]["detail"]
    if transfers == "counted":
        assert one_each == f"{EVENTS} transfers for {EVENTS} events"
    else:
        assert one_each.startswith(f"{EVENTS} of {EVENTS} events' transfers found"), one_each
    assert set(checks) == {
        "one transfer per event",
        "every settlement settled",
        "no dead letters",
        "ledger balanced (Ledger.check)",
        "merchants hold captures minus refunds, converted once",
    }


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
