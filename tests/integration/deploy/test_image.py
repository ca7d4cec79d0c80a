"""The gateway's image, built from the top-level Containerfile on a clean store: what is in
it (and what must not be), and its processes against the host's PostgreSQL, NATS and Redis:
a signed webhook answered and settled, the console's login page, `/readyz`, and SIGTERM.
"""

from __future__ import annotations

import io
import re
import tarfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import orjson
import pytest

from gateway.cli import package_version
from tests.support import vectors
from tests.support.config_file import write_toml
from tests.support.containers import BUILD_CA, Podman
from tests.support.gateway import SECRETS, config
from tests.support.services import free_port, unique_name, wait_until
from tests.support.settlement import fetch, settlement_sections
from tests.support.stub import Stub

UID = 10001
#: Programs a final image must not carry: a compiler toolchain or an installer.
BUILD_TOOLS = ("gcc", "cc", "g++", "c++", "make", "ld", "pip", "pip3", "apt-get-build-dep")


def image_files(podman: Podman, image: str) -> tarfile.TarFile:
    """The image's file system as the tar `podman export` writes."""
    name = unique_name("gw-files")
    podman.run("create", "--name", name, image)
    try:
        exported = podman.run_bytes("export", name)
    finally:
        podman.run("rm", "--force", name, check=False)
    return tarfile.open(fileobj=io.BytesIO(exported))


def test_version_and_help_run_in_the_image(podman: Podman, gateway_image: str) -> None:
    version = podman.run("run", "--rm", "--read-only", gateway_image, "--version")
    assert version.stdout.strip() == f"gateway {package_version()}"
    # No command: the help, listing each process the image runs.
    usage = podman.run("run", "--rm", "--read-only", gateway_image)
    for command in ("serve", "relay", "settle", "confirm", "console", "dlq", "forward", "migrate"):
        assert f"    {command} " in usage.stdout, command


def test_the_image_runs_as_an_unprivileged_user_with_labels(
    podman: Podman, gateway_image: str
) -> None:
    inspected = orjson.loads(podman.run("image", "inspect", gateway_image).stdout)[0]
    cfg = inspected["Config"]
    assert cfg["User"] == f"{UID}:{UID}"
    assert cfg["Entrypoint"] == ["gateway"]
    labels = cfg["Labels"]
    assert labels["org.opencontainers.image.version"] == package_version()
    assert labels["org.opencontainers.image.source"].startswith("https://")
    who = podman.run("run", "--rm", "--entrypoint", "id", gateway_image)
    assert who.stdout.split()[:2] == [f"uid={UID}(gateway)", f"gid={UID}(gateway)"]


def test_the_image_holds_no_compiler_no_cache_and_no_secret(
    podman: Podman, gateway_image: str, python_image: str
) -> None:
    files = image_files(podman, gateway_image)
    base = {m.name for m in image_files(podman, python_image).getmembers()}
    names = [m.name.lstrip("./") for m in files.getmembers()]
    on_path = ("usr/bin/", "usr/local/bin/", "opt/gateway/bin/")
    basenames = {Path(n).name for n in names if n.startswith(on_path)}
    assert not basenames & set(BUILD_TOOLS), basenames & set(BUILD_TOOLS)
    assert not [n for n in names if n.startswith("usr/lib/gcc")]
    caches = [n for n in names if "/.cache/" in f"/{n}" or n.startswith("var/cache/apt/archives/")]
    assert not [c for c in caches if c.endswith((".deb", ".whl", ".tar.gz", ".http"))]
    # No installer anywhere: neither in the gateway's venv nor in the base's Python.
    installers = [n for n in names if INSTALLED_PIP.search(n)]
    assert not installers, installers
    # Nothing of the build's own: no source tree, no wheel, no configuration or key file.
    assert not [n for n in names if n.startswith(("src/", "wheels/"))]
    assert not [n for n in names if n.startswith("etc/gateway/") and n != "etc/gateway/"]
    assert BUILD_CA.lstrip("/") not in names
    # What the gateway's layers add to its base holds no private key.
    assert not private_keys(files, base)
    # The build's CA bundle was an argument of the first stage only: neither the final
    # image's environment nor its history names it.
    inspected = orjson.loads(podman.run("image", "inspect", gateway_image).stdout)[0]
    environment = " ".join(inspected["Config"]["Env"])
    assert "PIP_CERT" not in environment and BUILD_CA not in environment
    history = podman.run("history", "--no-trunc", "--format", "{{.CreatedBy}}", gateway_image)
    assert BUILD_CA not in history.stdout


#: An installed pip or setuptools (a package directory in any site- or dist-packages).
INSTALLED_PIP = re.compile(r"(site|dist)-packages/(pip|setuptools)/__init__\.py$")
#: A PEM private key with its first line of key material (code that only names the
#: marker, as a parser does, is not a key).
PEM_KEY = re.compile(rb"-----BEGIN [A-Z ]*PRIVATE KEY-----\r?\n[A-Za-z0-9+/=]{40,}")


def private_keys(files: tarfile.TarFile, base: set[str]) -> list[str]:
    """The regular files not in `base` holding a PEM private key (one baked in by mistake)."""
    found = []
    for member in files.getmembers():
        if member.isfile() and member.name not in base and member.size < 4_000_000:
            content = files.extractfile(member)
            if content is not None and PEM_KEY.search(content.read()):
                found.append(member.name)
    return found


# --- the processes, against the host's services -----------------------------------------


class Containers:
    """Containers started by a test, removed whatever happens."""

    def __init__(self, podman: Podman, image: str, config: Path) -> None:
        self.podman, self.image, self.names = podman, image, list[str]()
        self.mount = f"--volume={config}:/etc/gateway/gateway.toml:ro"

    def argv(self, *args: str) -> list[str]:
        return ["--network=host", "--read-only", self.mount, self.image, *args]

    async def once(self, *args: str) -> str:
        result = await self.podman.arun("run", "--rm", *self.argv(*args), timeout_s=120)
        return result.stdout

    async def start(self, *args: str) -> str:
        name = unique_name("gw-" + args[0])
        await self.podman.arun("run", "--detach", "--name", name, *self.argv(*args))
        self.names.append(name)
        return name

    async def stop(self, name: str) -> tuple[int, float]:
        """SIGTERM, then the exit code and how long it took."""
        started = time.monotonic()
        await self.podman.arun("stop", "--time", "30", name)
        took = time.monotonic() - started
        state = await self.podman.arun("inspect", "--format", "{{.State.ExitCode}}", name)
        return int(state.stdout), took

    async def logs(self, name: str) -> str:
        result = await self.podman.arun("logs", name, check=False)
        return result.stdout + result.stderr

    async def remove_all(self) -> None:
        for name in self.names:
            await self.podman.arun("rm", "--force", "--time", "5", name, check=False)


@pytest.fixture
async def containers(
    podman: Podman, gateway_image: str, tmp_path: Path
) -> AsyncIterator[Containers]:
    running = Containers(podman, gateway_image, tmp_path / "gateway.toml")
    try:
        yield running
    finally:
        await running.remove_all()


def payment(event_id: str, merchant: str) -> bytes:
    return orjson.dumps(
        {
            "id": event_id,
            "type": "payment_intent.succeeded",
            "data": {
                "object": {
                    "id": f"pi_{event_id}",
                    "amount_received": 1000,
                    "currency": "usd",
                    "metadata": {"merchant_id": merchant},
                }
            },
        }
    )


async def settled(database_url: str) -> int:
    rows = await fetch(
        database_url, "SELECT count(*) AS n FROM settlements WHERE state = 'settled'"
    )
    return int(rows[0]["n"])


async def test_serve_settle_and_console_from_the_image(
    containers: Containers,
    tmp_path: Path,
    database_url: str,
    nats_url: str,
    stub: Stub,
    redis_url: str,
) -> None:
    port, console_port = free_port(), free_port()
    doc = config(database_url, nats_url, **settlement_sections(stub.url, redis_url))
    doc["http"] = {**doc["http"], "host": "127.0.0.1", "port": port}
    doc["console"] = {"host": "127.0.0.1", "port": console_port}
    write_toml(tmp_path / "gateway.toml", doc)

    migrated = await containers.once("migrate")
    assert "applied" in migrated and "stream" in migrated
    await containers.once("ledger", "open-account", "m_image")
    serve = await containers.start("serve")
    settle = await containers.start("settle")
    console = await containers.start("console")

    async with httpx.AsyncClient(timeout=5) as http:

        async def ready() -> bool:
            try:
                return (await http.get(f"http://127.0.0.1:{port}/readyz")).status_code == 200
            except httpx.TransportError:
                return False

        await wait_until(ready, timeout_s=60)
        body = payment("evt_image_1", "m_image")
        ts = int(time.time())
        signature = f"t={ts},v1={vectors.stripe_v1(SECRETS['stripe'], ts, body)}"
        answer = await http.post(
            f"http://127.0.0.1:{port}/webhooks/stripe",
            content=body,
            headers={"Stripe-Signature": signature, "Content-Type": "application/json"},
        )
        assert answer.status_code == 200, answer.text
        assert answer.json() == {"status": "accepted", "event_id": "evt_image_1"}
        forged = await http.post(
            f"http://127.0.0.1:{port}/webhooks/stripe",
            content=payment("evt_image_2", "m_image"),
            headers={"Stripe-Signature": signature, "Content-Type": "application/json"},
        )
        assert forged.status_code == 401

        async def has_settled() -> bool:
            return await settled(database_url) == 1

        await wait_until(has_settled, timeout_s=60)
        listed = await containers.once("ledger", "balances", "--merchant", "m_image", "--json")
        rows = orjson.loads(listed)
        assert [(r["currency"], r["balance"]) for r in rows] == [("USD", 1000)], rows

        async def console_up() -> bool:
            try:
                url = f"http://127.0.0.1:{console_port}/console/login"
                return (await http.get(url)).status_code == 200
            except httpx.TransportError:
                return False

        await wait_until(console_up, timeout_s=60)
        login = await http.get(f"http://127.0.0.1:{console_port}/console/login")
        assert "<form" in login.text and "token" in login.text.lower()
        live = await http.get(f"http://127.0.0.1:{console_port}/livez")
        assert live.status_code == 200

    # SIGTERM drains each: exit 0 well before podman's 30 s would turn to SIGKILL.
    for name in (serve, settle, console):
        code, took_s = await containers.stop(name)
        assert code == 0, (name, code, await containers.logs(name))
        assert took_s < 25, (name, took_s)
    assert await settled(database_url) == 1
