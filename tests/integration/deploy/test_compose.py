"""deploy/compose/compose.yaml under podman-compose, with images built here standing in for
the official ones: the README's demo payment answered and settled end to end, the console
served, then `down` leaves nothing running."""

from __future__ import annotations

import asyncio
import re
import subprocess
import time
from collections.abc import AsyncIterator

import httpx
import orjson
import pytest

from tests.support import vectors
from tests.support.containers import IMAGES, ROOT, Podman, tool
from tests.support.services import free_port, unique_name

COMPOSE_FILE = ROOT / "deploy" / "compose" / "compose.yaml"
DEMO_SECRET = "whsec_demo_stripe_secret"  # deploy/compose/gateway.toml's public demo value
#: The README's demo event.
DEMO_EVENT = {
    "id": "evt_demo_1",
    "type": "payment_intent.succeeded",
    "data": {
        "object": {
            "id": "pi_1",
            "amount_received": 1000,
            "currency": "usd",
            "metadata": {"merchant_id": "m_1"},
        }
    },
}


@pytest.fixture(scope="module")
def service_images(podman: Podman, debian_base: str) -> dict[str, str]:
    """Local look-alikes of the official PostgreSQL, Redis and NATS images."""
    images = {}
    for name, tag in (("postgres", "16"), ("redis", "7"), ("nats", "2")):
        images[name] = podman.build(
            f"localhost/gw-test-{name}:{tag}",
            IMAGES / f"{name}.Containerfile",
            IMAGES,
            [f"BASE={debian_base}"],
        )
    return images


class Compose:
    """podman-compose for one project on the tests' private store."""

    def __init__(self, podman: Podman, env: dict[str, str]) -> None:
        self.podman, self.project = podman, unique_name("gwcompose")
        self.env = {**podman.env, **env}
        self.binary = tool("podman-compose")

    async def run(self, *args: str, timeout_s: float = 300) -> subprocess.CompletedProcess[str]:
        # podman-compose's output goes to a file: read through a pipe it can hang.
        log = self.podman.home / f"{self.project}.log"
        argv = [
            self.binary,
            "--podman-path",
            self.podman.binary,
            "--podman-args",
            " ".join(self.podman.argv()[1:]),
            "-p",
            self.project,
            "-f",
            str(COMPOSE_FILE),
            *args,
        ]

        def call() -> subprocess.CompletedProcess[str]:
            with log.open("w") as out:
                done = subprocess.run(
                    argv, stdout=out, stderr=subprocess.STDOUT, env=self.env, timeout=timeout_s
                )
            return subprocess.CompletedProcess(argv, done.returncode, log.read_text(), "")

        return await asyncio.to_thread(call)

    async def logs(self, service: str) -> str:
        done = await self.podman.arun("logs", self.container(service), check=False)
        return done.stdout + done.stderr

    def container(self, service: str) -> str:
        return f"{self.project}_{service}_1"

    async def running(self) -> list[str]:
        listed = await self.podman.arun(
            "ps",
            "--filter",
            f"label=io.podman.compose.project={self.project}",
            "--format",
            "{{.Names}}",
        )
        return listed.stdout.split()


@pytest.fixture
async def compose(
    podman: Podman, gateway_image: str, service_images: dict[str, str]
) -> AsyncIterator[Compose]:
    env = {
        "GATEWAY_IMAGE": gateway_image,
        "POSTGRES_IMAGE": service_images["postgres"],
        "REDIS_IMAGE": service_images["redis"],
        "NATS_IMAGE": service_images["nats"],
        "GATEWAY_PORT": str(free_port()),
        "CONSOLE_PORT": str(free_port()),
    }
    running = Compose(podman, env)
    try:
        yield running
    finally:
        await running.run("down", "--volumes", timeout_s=120)


async def test_the_demo_payment_settles_in_compose_and_down_leaves_nothing(
    compose: Compose, podman: Podman
) -> None:
    up = await compose.run("up", "--detach")
    assert up.returncode == 0, up.stdout[-4000:]
    # podman-compose 1.0 exits 0 whatever its containers did: the one-shot's own status.
    migrated = await podman.arun("wait", compose.container("migrate"), timeout_s=180)
    assert migrated.stdout.strip() == "0", await compose.logs("migrate")
    token = re.search(r"^console token: (\S+)$", await compose.logs("migrate"), re.MULTILINE)
    assert token, await compose.logs("migrate")
    port, console_port = compose.env["GATEWAY_PORT"], compose.env["CONSOLE_PORT"]
    body = orjson.dumps(DEMO_EVENT)
    async with httpx.AsyncClient(timeout=5) as http:
        await until_ok(http, f"http://127.0.0.1:{port}/readyz", timeout_s=120)
        ts = int(time.time())
        headers = {
            "Stripe-Signature": f"t={ts},v1={vectors.stripe_v1(DEMO_SECRET, ts, body)}",
            "Content-Type": "application/json",
        }
        url = f"http://127.0.0.1:{port}/webhooks/stripe"
        answer = await http.post(url, content=body, headers=headers)
        assert answer.status_code == 200, answer.text
        assert answer.json() == {"status": "accepted", "event_id": "evt_demo_1"}
        again = await http.post(url, content=body, headers=headers)
        assert again.json()["status"] == "duplicate"
        await until_ok(http, f"http://127.0.0.1:{console_port}/console/login", timeout_s=60)

    # The ledger, read inside the serve container as an operator would.
    deadline = time.monotonic() + 60
    while True:
        listed = await podman.arun(
            "exec",
            compose.container("serve"),
            "gateway",
            "ledger",
            "balances",
            "--merchant",
            "m_1",
            "--json",
            check=False,
        )
        rows = orjson.loads(listed.stdout) if listed.returncode == 0 else []
        if [(r["currency"], r["balance"]) for r in rows] == [("USD", 1000)]:
            break
        assert time.monotonic() < deadline, (listed.stdout, listed.stderr)
        await asyncio.sleep(1)

    down = await compose.run("down", "--volumes", timeout_s=120)
    assert down.returncode == 0, down.stdout[-4000:]
    assert await compose.running() == []
    everything = await podman.arun("ps", "--all", "--format", "{{.Names}}")
    assert not [n for n in everything.stdout.split() if n.startswith(compose.project)]
    volumes = await podman.arun("volume", "ls", "--format", "{{.Name}}")
    assert not [v for v in volumes.stdout.split() if v.startswith(compose.project)]


async def until_ok(http: httpx.AsyncClient, url: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    last: object = None
    while time.monotonic() < deadline:
        try:
            answer = await http.get(url)
            if answer.status_code == 200:
                return
            last = (answer.status_code, answer.text[:200])
        except httpx.TransportError as exc:
            last = exc
        await asyncio.sleep(0.5)
    raise AssertionError(f"{url} not 200 within {timeout_s} s: {last!r}")
