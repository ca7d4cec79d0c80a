"""Private services the scenarios may crash: a throwaway PostgreSQL cluster (or a primary
with a streaming standby: `tests/support/pg_pair.py`) and NATS servers (alone or as a
three-node JetStream cluster), all on free loopback ports.

The shared services on 5432/6379/4222/4223 are never stopped: a scenario that needs to
crash one starts its own here, or puts the fault proxy in front of the shared one.
"""

from __future__ import annotations

import asyncio
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import nats
import nats.errors

from tests.support.pg_pair import PgCluster, PgPair
from tests.support.services import free_port, nats_server_binary, wait_for_port

__all__ = ["NatsCluster", "NatsNode", "PgCluster", "PgPair"]


@dataclass
class NatsNode:
    """One nats-server with JetStream (fsync always), optionally part of a cluster."""

    name: str = "n1"
    port: int = field(default_factory=free_port)
    cluster_port: int | None = None
    routes: list[int] = field(default_factory=list)
    store_dir: str = field(default_factory=lambda: tempfile.mkdtemp(prefix="chaos-nats-"))
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def config(self) -> str:
        text = (
            f'server_name: "{self.name}"\nlisten: "127.0.0.1:{self.port}"\n'
            f'jetstream {{ store_dir: "{self.store_dir}", sync_interval: always }}\n'
        )
        if self.cluster_port is not None:
            routes = ", ".join(f'"nats-route://127.0.0.1:{p}"' for p in self.routes)
            text += (
                f'cluster {{ name: "chaos", listen: "127.0.0.1:{self.cluster_port}", '
                f"routes: [{routes}] }}\n"
            )
        return text

    def start(self) -> None:
        conf = Path(self.store_dir) / "nats.conf"
        conf.write_text(self.config(), encoding="utf-8")
        log = open(Path(self.store_dir) / "nats.log", "ab")  # noqa: SIM115 - the child owns it
        self.proc = subprocess.Popen(
            [nats_server_binary(), "-c", str(conf)], stdout=log, stderr=log
        )
        log.close()
        wait_for_port(self.port, timeout_s=15)

    def kill(self) -> None:
        """SIGKILL: no goodbye to clients or peers."""
        self._signal(signal.SIGKILL)

    def stop(self) -> None:
        self._signal(signal.SIGTERM)

    def _signal(self, sig: signal.Signals) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def cleanup(self) -> None:
        self.kill()
        shutil.rmtree(self.store_dir, ignore_errors=True)


class NatsCluster:
    """Three (or `size`) nodes routed to each other on loopback."""

    def __init__(self, size: int = 3) -> None:
        cluster_ports = [free_port() for _ in range(size)]
        self.nodes = [
            NatsNode(
                name=f"n{i + 1}",
                cluster_port=cp,
                routes=[p for p in cluster_ports if p != cp],
            )
            for i, cp in enumerate(cluster_ports)
        ]

    @property
    def url(self) -> str:
        return self.nodes[0].url

    def start(self) -> None:
        for node in self.nodes:
            node.start()

    async def wait_ready(self, timeout_s: float = 30.0) -> None:
        """Until every node answers and JetStream has a meta leader."""
        deadline = time.monotonic() + timeout_s
        for node in self.nodes:
            while True:
                try:
                    nc = await nats.connect(node.url, connect_timeout=2, max_reconnect_attempts=0)
                    try:
                        await nc.jetstream(timeout=2).account_info()
                        break
                    finally:
                        await nc.close()
                except (nats.errors.Error, OSError, TimeoutError):
                    if time.monotonic() > deadline:
                        raise
                    await asyncio.sleep(0.5)

    def cleanup(self) -> None:
        for node in self.nodes:
            node.cleanup()
