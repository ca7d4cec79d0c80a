"""The metrics of real processes: a 2-worker `gateway serve` counts every request once
whichever worker answers the scrape; `gateway relay` and `gateway settle` serve
/metrics on a configurable port (0 = off), so several run on one host; a port already
taken stops start-up with one line naming it and the setting."""

from __future__ import annotations

import asyncio
import re
import signal
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from tests.support.cli import GATEWAY, run
from tests.support.config_file import write_toml
from tests.support.deliveries import deliver
from tests.support.gateway import config
from tests.support.processes import clean_env
from tests.support.services import free_port, wait_until
from tests.support.settlement import settlement_sections
from tests.support.stub import Stub

_SAMPLE = re.compile(r"^(\w+)(?:\{(.*)\})? (\S+)$", re.MULTILINE)


def samples(text: str, name: str) -> list[tuple[str, float]]:
    """(labels text, value) of every sample of `name` in an exposition."""
    return [(labels, float(v)) for n, labels, v in _SAMPLE.findall(text) if n == name]


@contextmanager
def process(*args: str, **env_extra: str) -> Iterator[subprocess.Popen[str]]:
    """`gateway ARGS...`, stopped with SIGTERM at the end of the block."""
    proc = subprocess.Popen(
        [GATEWAY, *args],
        env=clean_env(**env_extra),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


async def scrape(port: int, path: str = "/metrics") -> str | None:
    """The body of GET `path` on a fresh connection, or None while nothing answers."""
    try:
        async with httpx.AsyncClient(timeout=5) as client:
            answer = await client.get(f"http://127.0.0.1:{port}{path}")
    except httpx.TransportError:
        return None
    return answer.text if answer.status_code == 200 else None


async def answers(port: int, path: str = "/metrics") -> bool:
    return await scrape(port, path) is not None


async def test_two_workers_count_every_request_once(
    database_url: str, nats_url: str, tmp_path: Path
) -> None:
    """N signed requests, spread over both workers by the kernel, show N in every scrape
    (whichever worker answers it), in the counter and the histogram alike; the run's
    private metrics directory is gone once serve has stopped."""
    port, n = free_port(), 60
    cfg = write_toml(tmp_path / "gateway.toml", config(database_url, nats_url, http={"port": port}))
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    with process("serve", "--config", str(cfg), "--workers", "2", TMPDIR=str(tmp)) as serve:
        await wait_until(lambda: answers(port, "/readyz"), timeout_s=60)
        assert [p.name[:16] for p in tmp.iterdir()] == ["gateway-metrics-"]
        # No keep-alive: every request on a new connection, accepted by either worker.
        limits = httpx.Limits(max_keepalive_connections=0)
        base = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient(base_url=base, limits=limits, timeout=10) as client:
            sent = [deliver("stripe", f"evt_mw_{i}", "payment_intent.succeeded") for i in range(n)]
            replies = await asyncio.gather(
                *(
                    client.post(
                        f"http://127.0.0.1:{port}{d.path}", content=d.body, headers=d.headers
                    )
                    for d in sent
                )
            )
        assert [r.status_code for r in replies] == [200] * n
        for _ in range(6):  # scrapes land on either worker
            text = await scrape(port)
            assert text is not None
            webhooks = samples(text, "gateway_webhooks_total")
            assert sum(v for _, v in webhooks) == n
            assert samples(text, "gateway_request_seconds_count") == [("", float(n))]
            assert samples(text, "gateway_request_seconds_bucket")[-1] == ('le="+Inf"', float(n))
            # Gauges read from the shared table: one series, not one per worker.
            assert [labels for labels, _ in samples(text, "gateway_outbox_pending")] == [""]
            assert "_created" not in text
        assert serve.poll() is None
    assert list(tmp.iterdir()) == []


async def test_the_relay_serves_metrics_on_its_configured_port(
    database_url: str, nats_url: str, tmp_path: Path
) -> None:
    """`[outbox] relay_metrics_port`: the relay's /metrics answers with its gauges."""
    port = free_port()
    doc = config(database_url, nats_url, outbox={"relay_metrics_port": port})
    cfg = write_toml(tmp_path / "gateway.toml", doc)
    with process("relay", "--config", str(cfg)):
        await wait_until(lambda: answers(port), timeout_s=30)
        text = await scrape(port)
        assert text is not None
        assert "# TYPE gateway_outbox_pending gauge" in text
        assert "# TYPE gateway_published_total counter" in text


def settle_config(tmp_path: Path, doc: dict[str, Any], port: int) -> Path:
    doc["settlement"]["metrics_port"] = port
    return write_toml(tmp_path / "settle.toml", doc)


async def test_settle_workers_on_one_host_each_have_their_port_or_none(
    tmp_path: Path, database_url: str, nats_url: str, stub: Stub, redis_url: str
) -> None:
    """Two workers from one config file: the configured port and `--metrics-port`; a
    third with `--metrics-port 0` listens nowhere and runs all the same."""
    first, second = free_port(), free_port()
    doc = config(database_url, nats_url, **settlement_sections(stub.url, redis_url))
    cfg = str(settle_config(tmp_path, doc, first))
    with (
        process("settle", "--config", cfg) as one,
        process("settle", "--config", cfg, "--metrics-port", str(second)) as two,
        process("settle", "--config", cfg, "--metrics-port", "0") as off,
    ):
        await wait_until(lambda: answers(first), timeout_s=30)
        await wait_until(lambda: answers(second), timeout_s=30)
        assert "# TYPE gateway_settlements_total counter" in (await scrape(second) or "")
        await asyncio.sleep(1.0)
        assert (one.poll(), two.poll(), off.poll()) == (None, None, None)


def one_line_error(args: list[str]) -> tuple[int, str]:
    done = run(*args)  # settle, relay: a process each, as they run until stopped
    return done.returncode, done.stderr


@contextmanager
def port_taken() -> Iterator[int]:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield int(taken.getsockname()[1])


async def test_a_port_already_taken_stops_start_up_with_one_line(
    tmp_path: Path, database_url: str, nats_url: str, stub: Stub, redis_url: str
) -> None:
    """The setting (or the flag) that chose the port, and the port, in one line; exit 2."""
    doc = config(database_url, nats_url, **settlement_sections(stub.url, redis_url))
    with port_taken() as port:
        cfg = str(settle_config(tmp_path, doc, port))
        status, err = one_line_error(["settle", "--config", cfg])
        assert status == 2
        assert err == (
            f"gateway: config error: settlement.metrics_port: port {port} is already in use "
            "on 127.0.0.1 (choose another, or 0 for off)\n"
        )
        status, err = one_line_error(["relay", "--config", cfg, "--metrics-port", str(port)])
        assert status == 2
        assert err.startswith(f"gateway: config error: --metrics-port: port {port} is already")
        assert err.count("\n") == 1
