"""One scenario's moving parts: the config, the gateway processes, the load, the drain and
the audit. A scenario test builds a `Scenario`, starts what it needs, runs the load,
injects its fault mid-run, heals, then `finish()`es: drain, audit, write the table.

Results go to `$CHAOS_RESULTS_DIR` (default `.data/chaos/`): `{scenario}.json` and
`{scenario}.txt`, the table quoted in chaos/README.md.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from chaos.audit import AuditResult, audit, judge
from chaos.loadgen import LoadGen, LoadRecord
from chaos.observe import Observed, read_database
from chaos.procs import GatewayProcess
from chaos.workload import MERCHANTS, LoadSpec, providers_config
from gateway.adapters.postgres import open_pool
from gateway.adapters.postgres.ledger import PostgresLedger
from gateway.core.ledger.ids import merchant_account
from tests.support.config_file import write_toml
from tests.support.services import free_port

RESULTS_DIR = Path(os.environ.get("CHAOS_RESULTS_DIR", ".data/chaos"))
FULL = os.environ.get("CHAOS_FULL") == "1"


def profiles() -> list[Any]:
    """Parametrize a scenario over `fast` (always) and `full` (only with CHAOS_FULL=1)."""
    return ["fast", pytest.param("full", marks=pytest.mark.chaos_full)]


def base_doc(
    database_url: str, nats_url: str, redis_url: str, currency_url: str
) -> dict[str, dict[str, Any]]:
    """The gateway config every scenario starts from: short relay and retry delays."""
    return {
        "database": {"url": database_url},
        "nats": {"url": nats_url, "request_timeout_s": 3.0},
        "redis": {"url": redis_url},
        "http": {"request_timeout_s": 10.0, "retry_after_s": 1},
        "ingest": {"commit_timeout_s": 3.0},
        "outbox": {
            "relay_interval_s": 0.5,
            "publish_timeout_s": 3.0,
            "relay_metrics_port": 0,  # several relays run at once
        },
        "providers": providers_config(),
        "settlement": {
            "retry_delays_s": [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0],
            "ack_wait_s": 5.0,
            "metrics_port": 0,
            "batch_size": 64,
        },
        "currency": {
            "url": currency_url,
            "retry_delays_s": [0.5, 1.0, 2.0],
            "cache_key_prefix": f"fx-chaos-{uuid.uuid4().hex[:8]}",
            "timeout_s": 1.0,
        },
        "ledger": {"retry_delays_s": [0.5, 1.0, 2.0, 4.0]},
    }


def merge(doc: dict[str, dict[str, Any]], **sections: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {**doc, **{k: {**doc.get(k, {}), **v} for k, v in sections.items()}}


class Scenario:
    """The processes and records of one scenario run."""

    def __init__(
        self,
        name: str,
        workdir: Path,
        doc: dict[str, dict[str, Any]],
        *,
        database_url: str,
        nats_url: str | None,
    ) -> None:
        self.name = name
        self.workdir = workdir
        self.doc = doc
        self.database_url = database_url  # direct, for the audit (the config may use a proxy)
        self.nats_url = nats_url  # for reading the stream; None: the audit does not read it
        self.processes: list[GatewayProcess] = []
        self.config = write_toml(workdir / "gateway.toml", doc)
        self.ports: dict[str, int] = {}

    def write_config(self, name: str, doc: dict[str, dict[str, Any]]) -> Path:
        """Another config for some processes (e.g. the worker through a proxy)."""
        return write_toml(self.workdir / f"{name}.toml", doc)

    def serve(self, name: str = "serve", config: Path | None = None) -> GatewayProcess:
        port = self.ports.setdefault(name, free_port())
        return self._spawn(name, ["serve", "--port", str(port)], config)

    def relay(self, name: str = "relay", config: Path | None = None) -> GatewayProcess:
        return self._spawn(name, ["relay"], config)

    def settle(self, name: str = "settle", config: Path | None = None) -> GatewayProcess:
        return self._spawn(name, ["settle"], config)

    def backfill(self, provider: str, *args: str, name: str = "backfill") -> GatewayProcess:
        """`gateway backfill PROVIDER ARGS...`, which exits when its run is done."""
        return self._spawn(name, ["backfill", provider, *args], None)

    def _spawn(self, name: str, args: list[str], config: Path | None) -> GatewayProcess:
        process = GatewayProcess(name, args, config or self.config, self.workdir)
        self.processes.append(process)
        return process.start()

    def url(self, name: str = "serve") -> str:
        return f"http://127.0.0.1:{self.ports[name]}"

    async def ready(self, *names: str) -> None:
        for name in names or tuple(self.ports):
            process = next(p for p in self.processes if p.name == name)
            await process.wait_http(f"{self.url(name)}/healthz")

    async def open_merchants(self) -> None:
        """Open the planned merchants' ledger accounts (the unknown one stays closed)."""
        async with open_pool(self.database_url, max_size=1) as pool:
            await PostgresLedger(pool).ensure_accounts(
                [merchant_account(m, "USD") for m in MERCHANTS]
            )

    def load(self, spec: LoadSpec, urls: list[str] | None = None) -> LoadGen:
        return LoadGen(urls or [self.url()], spec)

    async def drain(self, record: LoadRecord, timeout_s: float = 90.0) -> float:
        """Wait until every accepted event is published and has its settlement outcome."""
        started = time.monotonic()
        while True:
            seen = Observed(ledger_ok=True)
            await read_database(self.database_url, record.run, seen)
            if judge(self.name, record, seen).figures["lost"] == 0:
                await asyncio.sleep(1.0)  # let redeliveries in flight land before the audit
                return time.monotonic() - started
            if time.monotonic() - started > timeout_s:
                return time.monotonic() - started  # the audit will say what is missing
            await asyncio.sleep(0.5)

    async def finish(
        self,
        record: LoadRecord,
        *,
        drain_timeout_s: float = 90.0,
        read_stream: bool = True,
        label: str = "",
    ) -> AuditResult:
        """Drain, audit, print the table and write `{name}[-label].json|txt`."""
        name = f"{self.name}-{label}" if label else self.name
        drain_s = await self.drain(record, drain_timeout_s)
        result = await audit(
            name,
            record,
            database_url=self.database_url,
            nats_url=self.nats_url if read_stream else None,
            config_path=self.config,
            drain_s=drain_s,
            json_path=RESULTS_DIR / f"{name}.json",
        )
        (RESULTS_DIR / f"{name}.txt").write_text(result.table() + "\n", encoding="utf-8")
        return result

    def close(self) -> None:
        for process in self.processes:
            process.stop(timeout_s=10)
