"""The `gateway` command as a user runs it: real processes, real TCP."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import orjson
import pytest

from tests.support.cli import GATEWAY, invoke, run
from tests.support.gateway import SECRETS
from tests.support.processes import clean_env
from tests.support.services import free_port, stream_messages, wait_for_port


def write_config(path: Path, database_url: str, nats_url: str, port: int) -> Path:
    path.write_text(
        f"""
[database]
url = "{database_url}"
[nats]
url = "{nats_url}"
[http]
host = "127.0.0.1"
port = {port}

[providers.stripe]
scheme = "stripe"
secrets = ["{SECRETS["stripe"]}"]
""",
        encoding="utf-8",
    )
    return path


def test_version_from_the_script_and_from_python_dash_m() -> None:
    from gateway.cli import package_version

    assert run("--version").stdout == f"gateway {package_version()}\n"
    as_module = subprocess.run(
        [sys.executable, "-m", "gateway", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(),
    )
    assert as_module.returncode == 0
    assert as_module.stdout == f"gateway {package_version()}\n"


def test_help_on_every_level() -> None:
    assert "serve" in invoke("--help").stdout
    for command in ("serve", "migrate", "relay", "sign"):
        result = invoke(command, "--help")
        assert result.returncode == 0
        assert "usage: gateway" in result.stdout


@pytest.mark.parametrize(
    ("content", "key"),
    [
        ('[providers.x]\nscheme = "nope"\nsecrets = ["s"]\n', "providers.x.scheme"),
        ('[http]\nport = "eighty"\n', "http.port"),
        ("[database\n", "--config"),
        ("", "database.url"),
    ],
)
def test_bad_config_stops_with_one_line_naming_the_key(
    tmp_path: Path, content: str, key: str
) -> None:
    path = tmp_path / "gateway.toml"
    urls = '[database]\nurl = "postgresql://127.0.0.1:1/x"\n[nats]\nurl = "nats://127.0.0.1:1"\n'
    path.write_text(content and urls + content, encoding="utf-8")
    result = invoke("migrate", "--config", str(path))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"gateway: config error: {key}:")


def test_serve_sign_send_and_graceful_stop(
    tmp_path: Path, empty_database_url: str, nats_url: str
) -> None:
    """migrate → serve → `gateway sign --send` → SIGTERM: the README's path, for real."""
    port = free_port()
    cfg = write_config(tmp_path / "gateway.toml", empty_database_url, nats_url, port)
    migrated = invoke("migrate", "--config", str(cfg))
    assert migrated.returncode == 0, migrated.stderr
    assert "001_ingest.sql" in migrated.stdout
    assert migrated.stdout.splitlines()[-1] == "stream WEBHOOKS created"
    assert "applied 0 migration(s)" in invoke("migrate", "--config", str(cfg)).stdout
    assert orjson.loads(invoke("--json", "migrate", "--config", str(cfg)).stdout) == {
        "applied": [],
        "stream": {"name": "WEBHOOKS", "action": "unchanged", "changes": []},
    }

    server = subprocess.Popen(
        [GATEWAY, "serve", "--config", str(cfg)],
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for_port(port, timeout_s=20)
        body = tmp_path / "event.json"
        body.write_bytes(b'{"id": "evt_cli_1", "type": "payment_intent.succeeded", "data": {}}')
        url = f"http://127.0.0.1:{port}/webhooks/stripe"
        sent = invoke(
            "sign", "stripe", "--secret", SECRETS["stripe"], "--body", str(body), "--send", url
        )
        assert sent.returncode == 0, sent.stdout + sent.stderr
        assert sent.stdout.startswith('200 {"status":"accepted","event_id":"evt_cli_1"}')

        printed = invoke("sign", "stripe", "--secret", SECRETS["stripe"], "--body", str(body))
        name, _, value = printed.stdout.strip().partition(": ")
        as_json = invoke(
            "sign", "stripe", "--secret", SECRETS["stripe"], "--body", str(body), "--json"
        )
        assert list(orjson.loads(as_json.stdout)["headers"]) == [name]
        again = httpx.post(url, content=body.read_bytes(), headers={name: value})
        assert again.json() == {"status": "duplicate", "event_id": "evt_cli_1"}

        wrong = invoke(
            "sign", "stripe", "--secret", "whsec_wrong", "--body", str(body), "--send", url
        )
        assert wrong.returncode == 1
        assert wrong.stdout.startswith("401 ")
    finally:
        server.send_signal(signal.SIGTERM)
        _, stderr = server.communicate(timeout=30)
    # uvicorn re-raises the signal once shut down, as a process killed by it would exit.
    assert server.returncode in (0, -signal.SIGTERM), stderr
    assert "gateway stopped" in stderr
    # Logs are JSON lines and never carry the secret.
    assert SECRETS["stripe"] not in stderr
    for line in stderr.strip().splitlines():
        orjson.loads(line)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        messages = asyncio.run(stream_messages(nats_url))
        if messages:
            break
        time.sleep(0.2)
    assert [m[1]["Nats-Msg-Id"] for m in messages] == ["stripe:evt_cli_1"]
