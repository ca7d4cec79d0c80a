"""schemathesis against the overview API of a live console, over loopback: requests
generated from the console's OpenAPI document (the `overview` operation), with a fixed
seed, and every answer checked: no 5xx, a documented status, content type and headers,
and a body the documented schema accepts. The database holds a dead letter, an event,
a held key, a live job and a fetch owed by the confirm stage, so every part of the
answer has something in it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
import schemathesis

from gateway.adapters.postgres import Conn
from gateway.console.api_doc import document
from gateway.core.console.roles import Role
from tests.support.console_live import LiveConsole, checks, serve_console

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
CHECKS = checks()

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
INSERT INTO processed_webhooks (provider, event_id, body) VALUES ('mollie', 'tr_1', 'id=tr_1');
INSERT INTO confirmations (webhook_id, provider)
SELECT id, provider FROM processed_webhooks WHERE event_id = 'tr_1';
"""


async def _seed(conn: Conn) -> None:
    await conn.execute(_SEED)


@pytest.fixture(scope="module")
def live_console(template_db: str) -> Iterator[LiveConsole]:
    """A console served from another thread, and a viewer's token."""
    with serve_console(template_db, role=Role.VIEWER, seed=_seed, prefix="gw_ovs") as live:
        yield live


@SCHEMA.parametrize()
def test_the_overview_api_answers_as_documented(
    case: OpenApiCase, live_console: LiveConsole
) -> None:
    case.call_and_validate(
        base_url=live_console.base_url,
        headers=live_console.headers,
        checks=CHECKS,
        timeout=10,
    )
