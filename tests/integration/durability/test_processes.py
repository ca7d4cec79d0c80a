"""The durability check in real processes on the shared PostgreSQL, which has no standby:
`gateway serve` warns once that a failover could lose acknowledged events and shows the
state in `/readyz` and `/metrics`; with `[database] require_synchronous_standby = true`,
`serve`, `relay` and `settle` each refuse to start with one line naming the setting."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.cli import GATEWAY, run
from tests.support.config_file import write_toml
from tests.support.gateway import config
from tests.support.processes import clean_env
from tests.support.services import free_port, wait_until
from tests.support.settlement import settlement_sections
from tests.support.stub import Stub

SETTING = "database.require_synchronous_standby"


def log_lines(stderr: str) -> list[dict[str, Any]]:
    """The JSON log records among a process's stderr lines."""
    return [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]


async def get(port: int, path: str) -> httpx.Response | None:
    try:
        async with httpx.AsyncClient(timeout=5) as client:
            return await client.get(f"http://127.0.0.1:{port}{path}")
    except httpx.TransportError:
        return None


async def test_serve_without_a_standby_warns_once_and_reports_at_risk(
    database_url: str, nats_url: str, tmp_path: Path
) -> None:
    """One warning line naming `at_risk` and why, no URL in it; `/readyz` stays 200 with
    the state and its reason code in its details, and the one-hot gauge says the same."""
    port = free_port()
    cfg = write_toml(tmp_path / "gateway.toml", config(database_url, nats_url, http={"port": port}))
    proc = subprocess.Popen(
        [GATEWAY, "serve", "--config", str(cfg)],
        env=clean_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:

        async def ready() -> httpx.Response | None:
            answer = await get(port, "/readyz")
            return answer if answer is not None and answer.status_code == 200 else None

        answer = await wait_until(ready, timeout_s=60)
        assert answer is not None
        durability = answer.json()["durability"]
        assert durability["state"] == "at_risk"
        assert durability["synchronous_standbys"] == 0
        assert durability["reason"] == "no_standby_configured"
        metrics = await get(port, "/metrics")
        assert metrics is not None
        lines = metrics.text.splitlines()
        assert 'gateway_database_durability{state="at_risk"} 1.0' in lines
        for other in ("synchronous", "waiting_for_standby", "unknown"):
            assert f'gateway_database_durability{{state="{other}"}} 0.0' in lines
        assert "gateway_database_synchronous_standbys 0.0" in lines
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
    records = log_lines(stderr)
    warnings = [r for r in records if r["level"] == "warning"]
    durability_lines = [r for r in records if "durability" in r["msg"]]
    assert durability_lines == [r for r in warnings if "durability" in r["msg"]]
    assert len(durability_lines) == 1, durability_lines
    (line,) = durability_lines
    assert line["msg"].startswith("database durability: at_risk: no synchronous standby")
    assert (line["state"], line["synchronous_standbys"], line["required"]) == ("at_risk", 0, False)
    assert line["reason_code"] == "no_standby_configured"
    assert "a failover can lose events the gateway acknowledged" in line["reason"]
    assert "postgresql://" not in stderr


@pytest.mark.parametrize("command", ["serve", "relay", "settle"])
async def test_required_and_not_synchronous_refuses_to_start(
    command: str,
    database_url: str,
    nats_url: str,
    tmp_path: Path,
    stub: Stub,
    redis_url: str,
) -> None:
    """Exit 2, and one line on stderr naming the setting and the state found."""
    doc = config(
        database_url,
        nats_url,
        database={"require_synchronous_standby": True},
        http={"port": free_port()},
        **settlement_sections(stub.url, redis_url),
    )
    cfg = write_toml(tmp_path / "gateway.toml", doc)
    done = run(command, "--config", str(cfg))  # serve, relay, settle: a process each
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(
        f"gateway: config error: {SETTING}: is true, but the database's durability is "
        "at_risk: no synchronous standby is configured"
    ), done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
