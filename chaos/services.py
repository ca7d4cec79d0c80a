"""Private services the scenarios may crash: a throwaway PostgreSQL cluster (or a primary
with a streaming standby: `tests/support/pg_pair.py`) and NATS servers (alone:
`tests/support/nats.py`, or as a three-node JetStream cluster), all on free loopback
ports.

The shared services on 5432/6379/4222/4223 are never stopped: a scenario that needs to
crash one starts its own here, or puts the fault proxy in front of the shared one.
"""

from __future__ import annotations

import asyncio
import time

import nats
import nats.errors

from tests.support.nats import NatsServer
from tests.support.pg_pair import PgCluster, PgPair
from tests.support.services import free_port

__all__ = ["NatsCluster", "PgCluster", "PgPair"]


class NatsCluster:
    """Three (or `size`) nodes routed to each other on loopback."""

    def __init__(self, size: int = 3) -> None:
        cluster_ports = [free_port() for _ in range(size)]
        self.nodes = [
            NatsServer(
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
