"""schemathesis against the replays API of a live console, over loopback: requests
generated from the console's OpenAPI document (the `replays` operations), with a fixed
seed and a bounded number of examples each, and every answer checked: no 5xx, a
documented status, content type and headers, and a body the documented schema accepts.

The console (tests/support/console_live.py) runs on a database with a few dead letters
and a job, as an operator.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
import schemathesis

from gateway.adapters.postgres import Conn
from gateway.adapters.postgres import replay_jobs as store
from gateway.console.api_doc import document
from gateway.core.console.roles import Role
from gateway.core.replay.jobs import JobKind, NewJob
from tests.support.console_live import LiveConsole, checks, serve_console

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
CHECKS = checks(without=("positive_data_acceptance", "negative_data_rejection"))


async def _seed(conn: Conn) -> None:
    for n in range(3):
        await conn.execute(
            "INSERT INTO dlq_webhooks (stage, provider, event_id, error_class,"
            " error_message, payload) VALUES ('settlement', 'stripe', $1,"
            " 'UNKNOWN_MERCHANT', 'x', '\\x7b7d')",
            f"evt_{n}",
        )
    await store.create_job(conn, NewJob(JobKind.DLQ, "console:fuzz", {"ids": [1, 2]}, (1, 2)))


@pytest.fixture(scope="module")
def live_console(template_db: str) -> Iterator[LiveConsole]:
    """A console served from another thread, and an operator's token."""
    with serve_console(template_db, role=Role.OPERATOR, seed=_seed, prefix="gw_cs") as live:
        yield live


@SCHEMA.parametrize()
def test_the_replays_api_answers_as_documented(
    case: OpenApiCase, live_console: LiveConsole
) -> None:
    case.call_and_validate(
        base_url=live_console.base_url,
        headers=live_console.headers,
        checks=CHECKS,
        timeout=10,
    )
