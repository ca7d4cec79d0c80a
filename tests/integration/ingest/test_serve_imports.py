"""A running `gateway serve` (started, taking a webhook, stopped) never loads the
settlement side, Redis or TigerBeetle, nor the tracing SDK while tracing is off: Python's
own import log says what it loaded."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import httpx

from tests.support.config_file import write_toml
from tests.support.deliveries import deliver
from tests.support.gateway import config
from tests.support.processes import clean_env
from tests.support.services import free_port, wait_ready


def imported_modules(import_log: str) -> set[str]:
    """Module names from `python -X importtime` lines (`import time: a | b | name`)."""
    names = set()
    for line in import_log.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip())
    return names


async def test_gateway_serve_loads_no_settlement_redis_or_tigerbeetle(
    database_url: str, nats_url: str, tmp_path: Path
) -> None:
    port = free_port()
    doc = config(database_url, nats_url, http={"port": port})
    cfg = write_toml(tmp_path / "gateway.toml", doc)
    env = clean_env()
    # The import log goes to a file: read through a pipe only at the end, it fills the
    # pipe's buffer first and the server stops, blocked writing it, before it is ready.
    log_path = tmp_path / "imports.log"
    with log_path.open("w") as log_file:
        serve = subprocess.Popen(
            [sys.executable, "-X", "importtime", "-m", "gateway", "serve", "--config", str(cfg)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=log_file,
            text=True,
        )
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5) as client:
            await wait_ready(client)
            sent = deliver("stripe", "evt_imports", "payment_intent.succeeded")
            answer = await client.post(sent.path, content=sent.body, headers=sent.headers)
            assert answer.status_code == 200 and answer.json()["status"] == "accepted"
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.wait(timeout=30)
    loaded = imported_modules(log_path.read_text())
    assert {"gateway.ingest.app", "gateway.wiring.ingest", "asyncpg", "nats"} <= loaded
    unwanted = sorted(
        m
        for m in loaded
        if m.split(".")[0] in {"redis", "tigerbeetle", "opentelemetry", "google"}
        or m.startswith(("gateway.settlement", "gateway.tracing.otel"))
    )
    assert unwanted == []  # tracing is off here: its SDK (and protobuf) stay unloaded
