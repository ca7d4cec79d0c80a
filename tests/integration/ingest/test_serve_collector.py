"""`gateway serve` keeps the cycle collector off its start-up heap: a pass over every
module imported at start-up would pause every request in flight (docs/performance.md,
"The tail of the first pass after start"). The real command runs here, under a wrapper
that says, as the process exits, what its collector was set to."""

from __future__ import annotations

import gc
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import httpx

from gateway.wiring.collector import YOUNG_THRESHOLD
from tests.support.config_file import write_toml
from tests.support.deliveries import deliver
from tests.support.gateway import config, running_server
from tests.support.processes import clean_env
from tests.support.services import free_port, wait_ready

_WRAPPER = textwrap.dedent(
    """
    import gc, runpy, sys, threading

    def answer():  # a line on stdin asks; the collector's settings are the answer
        for _ in sys.stdin:
            print("collector", gc.get_freeze_count(), gc.get_threshold()[0], flush=True)

    threading.Thread(target=answer, daemon=True).start()
    sys.argv = ["gateway", *sys.argv[1:]]
    runpy.run_module("gateway", run_name="__main__")
    """
)


async def test_gateway_serve_freezes_its_start_up_heap(
    database_url: str, nats_url: str, tmp_path: Path
) -> None:
    port = free_port()
    cfg = write_toml(tmp_path / "gateway.toml", config(database_url, nats_url, http={"port": port}))
    env = clean_env()
    serve = subprocess.Popen(
        [sys.executable, "-c", _WRAPPER, "serve", "--config", str(cfg)],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert serve.stdin is not None and serve.stdout is not None
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5) as client:
            await wait_ready(client)
            sent = deliver("stripe", "evt_collector", "payment_intent.succeeded")
            answer = await client.post(sent.path, content=sent.body, headers=sent.headers)
            assert answer.json()["status"] == "accepted"
        serve.stdin.write("\n")
        serve.stdin.flush()
        reply = serve.stdout.readline().split()
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.wait(timeout=30)
    assert reply[0] == "collector"
    assert int(reply[1]) > 10_000  # frozen: the modules, pools and settings of start-up
    assert int(reply[2]) == YOUNG_THRESHOLD


async def test_an_app_in_a_shared_process_leaves_its_collector_alone(
    database_url: str, nats_url: str
) -> None:
    """Tests (and any host that embeds the application) keep their own collector."""
    before = (gc.get_freeze_count(), gc.get_threshold())
    async with running_server(config(database_url, nats_url)) as server:
        assert (await server.client.get("/healthz")).status_code == 200
        assert (gc.get_freeze_count(), gc.get_threshold()) == before
