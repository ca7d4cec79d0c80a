"""The Helm chart's rendered `serve` Deployment, run by `podman kube play` with the image
built here (no cluster can run on this machine): its pod starts under the chart's
security context and answers `/readyz` on the port its readiness probe names."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml  # type: ignore[import-untyped]  # PyYAML ships no stubs

from tests.support.containers import ROOT, Podman, tool
from tests.support.services import free_port

CHART = ROOT / "deploy" / "helm" / "gateway"
#: Where a pod on slirp4netns reaches the host's loopback (the tests' PostgreSQL, NATS).
HOST_FROM_POD = "10.0.2.2"


def from_pod(url: str) -> str:
    return url.replace("127.0.0.1", HOST_FROM_POD).replace("localhost", HOST_FROM_POD)


def rendered(helm: str, values: dict[str, Any], tmp_path: Path) -> list[dict[str, Any]]:
    given = tmp_path / "values.yaml"
    given.write_text(yaml.safe_dump(values), encoding="utf-8")
    done = subprocess.run(
        [helm, "template", "kp", str(CHART), "--values", str(given)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


@pytest.fixture
async def played(podman: Podman) -> AsyncIterator[list[Path]]:
    files: list[Path] = []
    try:
        yield files
    finally:
        for file in files:
            await podman.arun("kube", "down", str(file), check=False)
        await podman.arun("volume", "prune", "--force", check=False)


async def test_the_rendered_serve_deployment_answers_readyz_under_kube_play(
    podman: Podman,
    gateway_image: str,
    played: list[Path],
    tmp_path: Path,
    database_url: str,
    nats_url: str,
) -> None:
    helm = tool("helm")
    port, admin_port = free_port(), free_port()
    repository, tag = gateway_image.rsplit(":", 1)
    values = {
        "image": {"repository": repository, "tag": tag, "pullPolicy": "Never"},
        "connections": {
            "database": {"url": from_pod(database_url)},
            "nats": {"url": from_pod(nats_url)},
        },
        "processes": {
            "serve": {"replicas": 1, "port": port, "adminPort": admin_port},
            "settle": {"enabled": False},
        },
        "migrate": {"enabled": False},
    }
    docs = rendered(helm, values, tmp_path)
    deployments = [d for d in docs if d["kind"] == "Deployment"]
    assert [d["metadata"]["name"] for d in deployments] == ["kp-gateway-serve"]
    (serve,) = deployments
    (container,) = serve["spec"]["template"]["spec"]["containers"]
    readiness = container["readinessProbe"]["httpGet"]
    assert (readiness["path"], readiness["port"]) in {("/readyz", admin_port), ("/readyz", "admin")}
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    configmap = next(
        d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "kp-gateway"
    )

    # The tables and the stream first, as the chart's hook Job would make them.
    config = tmp_path / "gateway.toml"
    config.write_text(configmap["data"]["gateway.toml"], encoding="utf-8")
    await podman.arun(
        "run",
        "--rm",
        "--network=host",
        f"--volume={config}:/etc/gateway/gateway.toml:ro",
        f"--env=GATEWAY_DATABASE_URL={database_url}",
        f"--env=GATEWAY_NATS_URL={nats_url}",
        gateway_image,
        "migrate",
    )

    manifest = tmp_path / "serve.yaml"
    manifest.write_text(yaml.safe_dump_all([configmap, serve]), encoding="utf-8")
    played.append(manifest)
    await podman.arun(
        "kube", "play", "--network", "slirp4netns:allow_host_loopback=true", str(manifest)
    )
    ready = await answered(f"http://127.0.0.1:{admin_port}/readyz", timeout_s=90)
    assert ready.status_code == 200, ready.text
    alive = await answered(f"http://127.0.0.1:{port}/healthz", timeout_s=10)
    assert alive.status_code == 200

    # The chart's security context held: the process runs as the image's user.
    pods = await podman.arun("pod", "ps", "--format", "{{.Name}}")
    (pod,) = [p for p in pods.stdout.split() if p.startswith("kp-gateway-serve")]
    inspected = await podman.arun(
        "ps", "--filter", f"pod={pod}", "--format", "{{.Names}}", "--no-trunc"
    )
    (name,) = [n for n in inspected.stdout.split() if "infra" not in n]
    who = await podman.arun("exec", name, "id", "-u")
    assert who.stdout.strip() == "10001"
    root = await podman.arun("exec", name, "touch", "/opt/gateway/x", check=False)
    assert root.returncode != 0 and "Read-only file system" in root.stderr, root.stderr
    scratch = await podman.arun("exec", name, "touch", "/tmp/x", check=False)
    assert scratch.returncode == 0, scratch.stderr  # the chart's emptyDir


async def answered(url: str, timeout_s: float) -> httpx.Response:
    """The first answer of `url` that is not a refused connection, waiting for a 200."""
    deadline = time.monotonic() + timeout_s
    last: httpx.Response | None = None
    async with httpx.AsyncClient(timeout=3) as http:
        while time.monotonic() < deadline:
            try:
                last = await http.get(url)
                if last.status_code == 200:
                    return last
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.5)
    assert last is not None, f"nothing answered at {url} within {timeout_s} s"
    return last
