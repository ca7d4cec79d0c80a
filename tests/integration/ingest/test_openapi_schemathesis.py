"""schemathesis against a live gateway, over loopback: requests generated from the
OpenAPI document (its examples, boundary and negative values, then random ones, with a
fixed seed and a bounded number of examples per operation), and every answer checked:
no 5xx, a documented status, a documented content type and headers, a body that
matches the documented schema, a request the document allows never refused (`400`) and
one it forbids never accepted: every check `st run --checks all` runs.

`POST /v1/events` is sent with a valid service token so it gets past the 401; the
webhooks carry no valid signature, so theirs are 401s and 404s (both documented), and
signed ones are covered by test_openapi_answers.py.

The gateway runs in a thread of its own, with its own event loop: schemathesis calls it
synchronously (requests), from pytest's thread.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from typing import TYPE_CHECKING

import pytest
import schemathesis
import schemathesis.specs.openapi.checks  # registers the OpenAPI checks
from schemathesis.checks import CHECKS as REGISTERED_CHECKS
from schemathesis.checks import is_check_class

from tests.support import openapi
from tests.support.gateway import BILLING_TOKEN, config, running_server
from tests.support.nats import NatsServer
from tests.support.services import create_database, drop_database, unique_name

if TYPE_CHECKING:
    from schemathesis.specs.openapi.schemas import OpenApiCase


#: Bounded and reproducible: the same requests on every run.
SETTINGS = {
    "seed": 20240516,
    "generation": {"mode": "all", "max-examples": 150, "deterministic": True},
    "phases": {"stateful": {"enabled": False}},
}
SCHEMA = schemathesis.openapi.from_dict(
    openapi.load(), config=schemathesis.Config.from_dict(SETTINGS)
)
#: Every check schemathesis has, as `st run --checks all` runs them: among them
#: `positive_data_acceptance` (a request the document allows must not be refused, so the
#: document states every constraint the server enforces) and `negative_data_rejection`
#: (one it forbids must be). The stateful ones find nothing to do in single calls.
CHECKS = [c for c in REGISTERED_CHECKS.get_all() if not is_check_class(c)]
assert {"positive_data_acceptance", "negative_data_rejection"} <= {c.__name__ for c in CHECKS}


@pytest.fixture(scope="module")
def live_gateway(template_db: str) -> Iterator[str]:
    """The base URL of a gateway (its own database and NATS) served from another thread."""
    nats = NatsServer()
    nats.start()
    ready: Future[tuple[asyncio.AbstractEventLoop, asyncio.Event, str]] = Future()

    async def serve() -> None:
        name = unique_name("gw_oa")
        dsn = await create_database(name, template=template_db)
        try:
            async with running_server(config(dsn, nats.url)) as server:
                stop = asyncio.Event()
                ready.set_result(
                    (asyncio.get_running_loop(), stop, f"http://127.0.0.1:{server.port}")
                )
                await stop.wait()
        finally:
            await drop_database(name)

    def run() -> None:
        try:
            asyncio.run(serve())
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            raise

    thread = threading.Thread(target=run, name="live-gateway", daemon=True)
    thread.start()
    try:
        loop, stop, base_url = ready.result(timeout=60)
        try:
            yield base_url
        finally:
            loop.call_soon_threadsafe(stop.set)
            thread.join(timeout=60)
    finally:
        nats.cleanup()


@SCHEMA.parametrize()
def test_the_gateway_answers_as_documented(case: OpenApiCase, live_gateway: str) -> None:
    case.call_and_validate(
        base_url=live_gateway,
        headers={"Authorization": f"Bearer {BILLING_TOKEN}"},
        checks=CHECKS,
        timeout=10,
    )
