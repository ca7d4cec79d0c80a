"""`gateway forward --name NAME` of a `[forward.NAME]` table, run as an operator runs it:
a key whose event fails every attempt is held (its next event parked behind it), every
other key flows, the destination's /metrics says so, `gateway dlq replay` delivers the
parked events in their key's order once the target is fixed, and SIGINT ends the
command with its summary and status 0. Bad flags and tables are one line, status 2.
`forward` and `listen` run as processes (they run until stopped); `dlq` in this process."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from pathlib import Path

import asyncpg
import httpx
import pytest

from tests.support.cli import GATEWAY, Result, invoke, run
from tests.support.config_file import write_toml
from tests.support.forward_target import Received, Target, serving
from tests.support.forwarding import FORWARD_SECRET, post_stripe
from tests.support.gateway import config, running_server
from tests.support.services import free_port, wait_until

ENV = {**os.environ, "FWD_SECRET": FORWARD_SECRET, "GATEWAY_LOG_LEVEL": "WARNING"}


async def gateway(*args: str) -> subprocess.CompletedProcess[str]:
    """The CLI in a subprocess, to its end."""
    return await asyncio.to_thread(run, *args, env=ENV, timeout_s=120)


async def dlq(*args: str) -> Result:
    """`gateway dlq ARGS` in this process, awaited in a thread (the target runs on the
    test's loop)."""
    return await asyncio.to_thread(invoke, "dlq", *args, env=ENV)


def destination(target: Target, metrics_port: int) -> dict[str, object]:
    return {
        "url": target.url,
        "secret_env": "FWD_SECRET",
        "retry": "0.2s,0.2s",
        "allow_private": True,  # the test's target listens on 127.0.0.1
        "start": "start",
        "metrics_port": metrics_port,
    }


async def test_a_poison_key_is_held_and_replay_delivers_it_in_order(
    tmp_path: Path, database_url: str, nats_url: str
) -> None:
    fixed = {"now": False}

    def script(r: Received) -> tuple[int, dict[str, str], bytes]:
        poisoned = r.headers.get("gateway-order-key") == "pi_poison"
        return (500, {}, b"handler crashed") if poisoned and not fixed["now"] else (200, {}, b"ok")

    metrics_port = free_port()
    async with serving(Target(script)) as target:
        doc = config(database_url, nats_url)
        doc["forward"] = {"billing": destination(target, metrics_port)}
        path = write_toml(tmp_path / "gateway.toml", doc)
        async with running_server(config(database_url, nats_url)) as server:
            process = await asyncio.create_subprocess_exec(
                GATEWAY, "forward", "--config", str(path), "--name", "billing",
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=ENV,
            )  # fmt: skip
            try:
                await post_stripe(server.client, "evt_p_1", "pi_poison")
                await post_stripe(server.client, "evt_p_2", "pi_poison")
                for n in range(5):
                    await post_stripe(server.client, f"evt_ok_{n}", f"pi_ok_{n}")
                conn = await asyncpg.connect(database_url)
                try:

                    async def parked() -> bool:
                        if process.returncode is not None:
                            raise AssertionError(await process.stderr.read())  # type: ignore[union-attr]
                        found = await conn.fetchval(
                            "SELECT count(*) FROM dlq_webhooks WHERE stage = 'forward:billing'"
                        )
                        return bool(found == 2)

                    await wait_until(parked, timeout_s=30)
                    rows = await conn.fetch(
                        "SELECT event_id, error_class, attempts FROM dlq_webhooks "
                        "WHERE stage = 'forward:billing' ORDER BY id"
                    )
                    assert [tuple(r) for r in rows] == [
                        ("evt_p_1", "FORWARD_ATTEMPTS_EXHAUSTED", 3),
                        ("evt_p_2", "BLOCKED_BY_PREDECESSOR", 0),
                    ]
                    ok = {r.headers["gateway-event-id"] for r in target.delivered()}
                    assert ok == {f"evt_ok_{n}" for n in range(5)}
                    poisoned = [r for r in target.received if r.status == 500]
                    assert [r.headers["gateway-event-id"] for r in poisoned] == ["evt_p_1"] * 3
                    async with httpx.AsyncClient() as client:
                        text = (await client.get(f"http://127.0.0.1:{metrics_port}/metrics")).text
                    family = 'gateway_forward_attempts_total{destination="billing",outcome='
                    assert family + '"parked"} 1.0' in text
                    assert family + '"blocked"} 1.0' in text

                    fixed["now"] = True
                    replayed = await dlq("replay", "--all", "--config", str(path))
                    assert replayed.returncode == 0, replayed.stderr
                    assert "replayed 2" in replayed.stdout, replayed.stdout
                    assert (
                        await conn.fetchval(
                            "SELECT count(*) FROM dlq_webhooks WHERE stage = 'forward:billing' "
                            "AND NOT is_resolved"
                        )
                        == 0
                    )
                finally:
                    await conn.close()
                order = [
                    r.headers["gateway-event-id"]
                    for r in target.delivered()
                    if r.headers.get("gateway-order-key") == "pi_poison"
                ]
                assert order == ["evt_p_1", "evt_p_2"]
                # The key is released: a later event of it flows again.
                await post_stripe(server.client, "evt_p_3", "pi_poison")

                async def third() -> bool:
                    return any(
                        r.headers["gateway-event-id"] == "evt_p_3" for r in target.delivered()
                    )

                await wait_until(third, timeout_s=30)
            finally:
                if process.returncode is None:
                    process.send_signal(signal.SIGINT)
                out, err = await asyncio.wait_for(process.communicate(), timeout=30)
    assert process.returncode == 0, err.decode()
    assert "forwarded 6, retried 2, parked 1, blocked 1" in out.decode()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["forward", "--to", "ftp://x/y", "--secret-env", "FWD_SECRET"], "--to: the target must"),
        (["forward", "--to", "http://127.0.0.1:9/"], "--secret-env VAR"),
        (["forward", "--to", "http://127.0.0.1:9/", "--secret-env", "NOPE_NOT_SET"], "not set"),
        (
            [
                "forward",
                "--to",
                "http://127.0.0.1:9/",
                "--secret-env",
                "FWD_SECRET",
                "--retry",
                "9x",
            ],
            "--retry:",
        ),
        (["listen", "--to", "http://127.0.0.1:9/", "--where", "[1]"], "--where: must be"),
        (["listen", "--to", "http://127.0.0.1:9/", "--from", "yesterday"], "--from:"),
        (["listen", "--to", "http://127.0.0.1:9/", "--name", "Bad Name"], "--name:"),
        (["listen", "--to", "http://127.0.0.1:9/", "--timeout", "10m"], "--timeout:"),
        (["forward", "--name", "undeclared"], "--to URL is required"),
    ],
)
async def test_bad_flags_are_one_line_and_status_2(
    tmp_path: Path, database_url: str, args: list[str], says: str
) -> None:
    path = write_toml(tmp_path / "gateway.toml", config(database_url, "nats://127.0.0.1:1"))
    result = await gateway(*args, "--config", str(path))
    assert result.returncode == 2, result.stderr
    assert says in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("table", "key"),
    [
        ({"secret_env": "FWD_SECRET"}, "forward.b.url"),
        ({"url": "http://127.0.0.1:9/"}, "forward.b.secret_env"),
        (
            {"url": "http://127.0.0.1:9/", "secret_env": "FWD_SECRET", "retry": "x"},
            "forward.b.retry",
        ),
        ({"url": "http://127.0.0.1:9/", "secret_env": "FWD_SECRET", "urll": "x"}, "forward.b.urll"),
        (
            {"url": "http://127.0.0.1:9/", "secret_env": "FWD_SECRET", "max_in_flight": 1000},
            "forward.b.max_in_flight",
        ),
    ],
)
async def test_a_bad_destination_table_stops_every_command(
    tmp_path: Path, database_url: str, table: dict[str, object], key: str
) -> None:
    doc = config(database_url, "nats://127.0.0.1:1")
    doc["forward"] = {"b": table}
    path = write_toml(tmp_path / "gateway.toml", doc)
    result = await dlq("stats", "--config", str(path))
    assert result.returncode == 2
    assert key in result.stderr


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest",
        # Loopback carried in IPv6 forms `ipaddress.is_global` calls public:
        "http://[64:ff9b::7f00:1]:8080/hook",  # NAT64
        "http://[::127.0.0.1]/hook",  # IPv4-compatible
        "http://192.0.0.192/hook",
    ],
)
async def test_a_declared_destination_refuses_a_private_target_unless_allowed(
    tmp_path: Path, database_url: str, nats_url: str, url: str
) -> None:
    doc = config(database_url, nats_url)
    doc["forward"] = {"meta": {"url": url, "secret_env": "FWD_SECRET"}}
    path = write_toml(tmp_path / "gateway.toml", doc)
    result = await gateway("forward", "--name", "meta", "--config", str(path))
    assert result.returncode == 2
    assert "forward.meta.url" in result.stderr and "non-public address" in result.stderr
