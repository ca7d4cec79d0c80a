"""The confirm stage in a test: the gateway serving and `gateway confirm`'s worker
running in the test's event loop, both on real PostgreSQL, against a stand-in API."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from gateway import settings as settings_mod
from gateway.adapters.postgres import open_pool
from gateway.confirm.worker import ConfirmWorker
from gateway.metrics import Metrics
from gateway.wiring.confirm import confirm_sources
from tests.support.cli import Result, invoke
from tests.support.config_file import write_toml
from tests.support.gateway import RunningServer
from tests.support.processes import clean_env

#: Quick tries for tests: a transient answer is tried again within a second.
QUICK = {"first_delay_s": 0.1, "max_delay_s": 0.4, "poll_s": 0.05, "lease_s": 90.0}


@contextlib.asynccontextmanager
async def serving(doc: Mapping[str, Any], env: Mapping[str, str]) -> AsyncIterator[RunningServer]:
    """The gateway under uvicorn, its settings read with `env`."""
    server = RunningServer(settings_mod.parse(doc, env=env))
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@contextlib.asynccontextmanager
async def confirming(doc: Mapping[str, Any], env: Mapping[str, str]) -> AsyncIterator[Metrics]:
    """`gateway confirm`'s worker until the block ends (then cancelled, as a stopped
    process would be); answers its metrics."""
    settings = settings_mod.parse(doc, env=env)
    metrics = Metrics()
    async with open_pool(settings.database_url, max_size=4) as pool:
        worker = ConfirmWorker(pool, confirm_sources(settings), settings.confirm, metrics)
        task = asyncio.create_task(worker.run())
        try:
            yield metrics
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def run_gateway(
    tmp_path: Path, doc: Mapping[str, Any], env: Mapping[str, str], *args: str
) -> Result:
    """`gateway ARGS --config FILE` (in this process, awaited in a thread: the stand-in
    API runs on the test's loop), with `env`'s variables set (the API keys the config
    names)."""
    path = write_toml(tmp_path / "gateway.toml", dict(doc))
    return await asyncio.to_thread(
        invoke, *args, "--config", str(path), env=clean_env() | dict(env)
    )
