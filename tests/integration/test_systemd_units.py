"""deploy/systemd: the units parse and verify with `systemd-analyze verify`, and carry
what an operator relies on (restart, secrets file, own user, hardening, the relay's nice).

`systemd-analyze verify` also checks that each ExecStart's program exists, so the units
are verified from a copy whose install path (/opt/gateway/venv/bin/gateway) is replaced
by this interpreter's `gateway`; nothing else is changed.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.cli import GATEWAY

UNITS_DIR = Path(__file__).resolve().parents[2] / "deploy" / "systemd"
INSTALLED_GATEWAY = "/opt/gateway/venv/bin/gateway"
SERVICES = {
    "gateway-serve.service": "serve",
    "gateway-relay.service": "relay",
    "gateway-settle.service": "settle",
    "gateway-confirm.service": "confirm",
    "gateway-reconcile.service": "reconcile",
    "gateway-dlq-jobs.service": "dlq run-jobs",
    "gateway-console.service": "console",
    "gateway-forward@.service": "forward --name %i --output quiet",
}
LONG_RUNNING = [
    "gateway-serve.service",
    "gateway-relay.service",
    "gateway-settle.service",
    "gateway-confirm.service",
    "gateway-dlq-jobs.service",
    "gateway-console.service",
    "gateway-forward@.service",
]
SYSTEMD_ANALYZE = shutil.which("systemd-analyze")


def directives(unit: str) -> dict[str, list[str]]:
    """`Section.Key` → every value given, in order (comments and blanks dropped)."""
    found: dict[str, list[str]] = {}
    section = ""
    for raw in (UNITS_DIR / unit).read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line.strip("[]")
            continue
        key, _, value = line.partition("=")
        found.setdefault(f"{section}.{key}", []).append(value)
    return found


def one(unit: str, key: str) -> str:
    values = directives(unit).get(key)
    assert values is not None and len(values) == 1, f"{unit}: {key} = {values}"
    return values[0]


@pytest.mark.skipif(
    SYSTEMD_ANALYZE is None,
    reason="systemd-analyze not installed (Debian package 'systemd')",
)
def test_systemd_analyze_verify_accepts_every_unit(tmp_path: Path) -> None:
    """`systemd-analyze verify` passes with no warning at all (it exits 0 on many)."""
    gateway = Path(GATEWAY)
    copies = []
    for unit in sorted(UNITS_DIR.glob("gateway-*.*")):
        copy = tmp_path / unit.name
        copy.write_text(
            unit.read_text(encoding="utf-8").replace(INSTALLED_GATEWAY, str(gateway)),
            encoding="utf-8",
        )
        copies.append(str(copy))
    assert len(copies) == len(SERVICES) + 1  # and the reconcile timer
    assert SYSTEMD_ANALYZE is not None
    result = subprocess.run(
        [SYSTEMD_ANALYZE, "verify", "--man=no", *copies],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout + result.stderr == ""


@pytest.mark.parametrize(("unit", "command"), SERVICES.items())
def test_each_service_runs_its_command_as_the_gateway_user_with_the_secrets_file(
    unit: str, command: str
) -> None:
    """One command per unit, as user gateway, config and secrets from /etc/gateway."""
    assert one(unit, "Service.ExecStart") == f"{INSTALLED_GATEWAY} {command}"
    assert one(unit, "Service.User") == "gateway"
    assert one(unit, "Service.Group") == "gateway"
    assert one(unit, "Service.EnvironmentFile") == "/etc/gateway/gateway.env"
    assert one(unit, "Service.Environment") == "GATEWAY_CONFIG=/etc/gateway/gateway.toml"
    for key, value in {
        "NoNewPrivileges": "yes",
        "ProtectSystem": "strict",
        "ProtectHome": "yes",
        "PrivateTmp": "yes",
        "CapabilityBoundingSet": "",
        "SystemCallFilter": "@system-service",
    }.items():
        assert one(unit, f"Service.{key}") == value, key


@pytest.mark.parametrize("unit", LONG_RUNNING)
def test_long_running_services_restart_on_failure_and_start_at_boot(unit: str) -> None:
    assert one(unit, "Service.Restart") == "on-failure"
    assert one(unit, "Install.WantedBy") == "multi-user.target"


def test_a_paused_destination_is_not_restarted() -> None:
    """`gateway forward` exits 3 when the target answers 410: it stays stopped."""
    assert one("gateway-forward@.service", "Service.RestartPreventExitStatus") == "3"


def test_the_relay_runs_below_the_receiver() -> None:
    """`Nice=10` on the relay, as the README recommends; the others at the default."""
    assert one("gateway-relay.service", "Service.Nice") == "10"
    for unit in ("gateway-serve.service", "gateway-settle.service"):
        assert "Service.Nice" not in directives(unit)


def test_reconcile_is_a_oneshot_started_by_its_timer() -> None:
    assert one("gateway-reconcile.service", "Service.Type") == "oneshot"
    assert "Install.WantedBy" not in directives("gateway-reconcile.service")
    timer = directives("gateway-reconcile.timer")
    assert timer["Timer.OnCalendar"] == ["*:0/5"]
    assert timer["Timer.Persistent"] == ["true"]
    assert timer["Install.WantedBy"] == ["timers.target"]
