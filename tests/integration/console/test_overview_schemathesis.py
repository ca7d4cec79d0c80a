"""schemathesis against the overview API of a live console, over loopback: requests
generated from the console's OpenAPI document (the `overview` operation), with a fixed
seed, and every answer checked: no 5xx, a documented status, content type and headers,
and a body the documented schema accepts. The database holds a dead letter, an event,
a held key and a live job, so every part of the answer has something in it.
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
from gateway.compose.console import uvicorn_options
from gateway.console.api_doc import document
from gateway.console.app import build_app
from gateway.console.web import ConsoleDeps
from tests.support.console import console_settings
from tests.support.services import create_database, drop_database, free_port, unique_name

if TYPE_CHECKING:
    from schemathesis.specs.openapi.schemas import OpenApiCase

SETTINGS = {
    "seed": 20261201,
    "generation": {"mode": "all", "max-examples": 20, "deterministic": True},
    "phases": {"stateful": {"enabled": False}},
}
SCHEMA = schemathesis.openapi.from_dict(
    document(), config=schemathesis.Config.from_dict(SETTINGS)
).include(tag="overview")
CHECKS = [c for c in REGISTERED_CHECKS.get_all() if not is_check_class(c)]

_SEED = """
INSERT INTO processed_webhooks (provider, event_id, event_type, subject, body)
VALUES ('stripe', 'evt_1', 't', 'webhooks.stripe.t', '{}');
INSERT INTO dlq_webhooks (stage, provider, event_id, error_class, error_message, payload)
VALUES ('settlement', 'stripe', 'evt_1', 'SCHEMA_INVALID', 'x', '{}');
INSERT INTO order_applied (provider, order_key, applied_seq, held_seq, held_dlq_id,
                           hold_reason, held_at)
VALUES ('stripe', 'pi_1', 0, 1, 1, 'SCHEMA_INVALID', now());
INSERT INTO replay_jobs (kind, state, created_by, request, total)
VALUES ('dlq', 'running', 'console:fuzz', '{}', 1);
INSERT INTO replay_job_items (job_id, position, dlq_id) VALUES (1, 0, 1);
"""


@pytest.fixture(scope="module")
def live_console(template_db: str) -> Iterator[tuple[str, str]]:
    """(base URL, a viewer's token) of a console served from another thread."""
    import uvicorn

    from gateway.console.token_admin import issue

    ready: Future[tuple[asyncio.AbstractEventLoop, asyncio.Event, str, str]] = Future()

    async def serve() -> None:
        name = unique_name("gw_ovs")
        dsn = await create_database(name, template=template_db)
        try:
            settings = console_settings(dsn)
            pool = await create_pool(dsn, max_size=5)
            try:
                async with transaction(pool) as conn:
                    token = await issue(
                        conn,
                        name="fuzz",
                        role="viewer",
                        created_by="test",
                        now=datetime.now(UTC),
                        expires_in=None,
                    )
                    await conn.execute(_SEED)
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
def test_the_overview_api_answers_as_documented(
    case: OpenApiCase, live_console: tuple[str, str]
) -> None:
    base_url, token = live_console
    case.call_and_validate(
        base_url=base_url,
        headers={"Authorization": f"Bearer {token}"},
        checks=CHECKS,
        timeout=10,
    )
