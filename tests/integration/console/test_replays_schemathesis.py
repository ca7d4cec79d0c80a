"""schemathesis against the replays API of a live console, over loopback: requests
generated from the console's OpenAPI document (the `replays` operations), with a fixed
seed and a bounded number of examples each, and every answer checked: no 5xx, a
documented status, content type and headers, and a body the documented schema accepts.

The console runs in a thread of its own with its own event loop (schemathesis calls it
synchronously), on a database with a few dead letters and a job, as an operator.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import pytest
import schemathesis
import schemathesis.specs.openapi.checks  # registers the OpenAPI checks
from schemathesis.checks import CHECKS as REGISTERED_CHECKS
from schemathesis.checks import is_check_class

from gateway.adapters.postgres import create_pool, transaction
from gateway.adapters.postgres import replay_jobs as store
from gateway.compose.console import uvicorn_options
from gateway.console.api_doc import document
from gateway.console.app import build_app
from gateway.console.web import ConsoleDeps
from gateway.core.replay_jobs import JobKind, NewJob
from tests.support.console import console_settings
from tests.support.services import create_database, drop_database, free_port, unique_name

if TYPE_CHECKING:
    from schemathesis.specs.openapi.schemas import OpenApiCase

SETTINGS = {
    "seed": 20261201,
    "generation": {"mode": "all", "max-examples": 60, "deterministic": True},
    "phases": {"stateful": {"enabled": False}},
}
SCHEMA = schemathesis.openapi.from_dict(
    document(), config=schemathesis.Config.from_dict(SETTINGS)
).include(tag="replays")
#: Every check but the two that judge the server's validation against the document's:
#: a filter's values (a stage, a time) are checked by the DLQ list's own parser, which
#: the document describes in words, not in a schema a generator could satisfy.
CHECKS = [
    c
    for c in REGISTERED_CHECKS.get_all()
    if not is_check_class(c)
    and c.__name__ not in ("positive_data_acceptance", "negative_data_rejection")
]


@pytest.fixture(scope="module")
def live_console(template_db: str) -> Iterator[tuple[str, str]]:
    """(base URL, an operator's token) of a console served from another thread."""
    import uvicorn

    from gateway.console.token_admin import issue

    ready: Future[tuple[asyncio.AbstractEventLoop, asyncio.Event, str, str]] = Future()

    async def serve() -> None:
        name = unique_name("gw_cs")
        dsn = await create_database(name, template=template_db)
        try:
            settings = console_settings(dsn)
            pool = await create_pool(dsn, max_size=5)
            try:
                async with transaction(pool) as conn:
                    token = await issue(
                        conn,
                        name="fuzz",
                        role="operator",
                        created_by="test",
                        now=datetime.now(UTC),
                        expires_in=None,
                    )
                    for n in range(3):
                        await conn.execute(
                            "INSERT INTO dlq_webhooks (stage, provider, event_id, error_class,"
                            " error_message, payload) VALUES ('settlement', 'stripe', $1,"
                            " 'UNKNOWN_MERCHANT', 'x', '\\x7b7d')",
                            f"evt_{n}",
                        )
                    await store.create_job(
                        conn, NewJob(JobKind.DLQ, "console:fuzz", {"ids": [1, 2]}, (1, 2))
                    )
                port = free_port()
                config = uvicorn.Config(
                    build_app(ConsoleDeps(pool=pool, settings=settings)),
                    **uvicorn_options(settings, "127.0.0.1", port),
                )
                server = uvicorn.Server(config)
                task = asyncio.create_task(server.serve())
                while not server.started:
                    await asyncio.sleep(0.05)
                stop = asyncio.Event()
                ready.set_result(
                    (asyncio.get_running_loop(), stop, f"http://127.0.0.1:{port}", token)
                )
                await stop.wait()
                server.should_exit = True
                await task
            finally:
                await pool.close()
        finally:
            await drop_database(name)

    def run() -> None:
        try:
            asyncio.run(serve())
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            raise

    thread = threading.Thread(target=run, name="live-console", daemon=True)
    thread.start()
    loop, stop, base_url, token = ready.result(timeout=60)
    try:
        yield base_url, token
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(timeout=60)


@SCHEMA.parametrize()
def test_the_replays_api_answers_as_documented(
    case: OpenApiCase, live_console: tuple[str, str]
) -> None:
    base_url, token = live_console
    case.call_and_validate(
        base_url=base_url,
        headers={"Authorization": f"Bearer {token}"},
        checks=CHECKS,
        timeout=10,
    )
