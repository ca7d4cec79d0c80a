"""The event log's, held keys' and audit trail's API answers are the ones the console's
OpenAPI document describes: each body validated against its documented schema, for
every role that may ask, with realistic rows."""

from __future__ import annotations

from typing import Any

from openapi_schema_validator import OAS31Validator

from gateway.console.api_doc import merge, read_fragments
from gateway.core.console.roles import Role
from tests.integration.console import test_audit_page, test_events_page, test_keys_page
from tests.support.console import ConsoleHarness

DOC = merge(read_fragments())


def check(schema: str, body: Any) -> None:
    """`body` against `#/components/schemas/{schema}` of the merged document."""
    root = {"$ref": f"#/components/schemas/{schema}", "components": DOC["components"]}
    errors = [e.message for e in OAS31Validator(root).iter_errors(body)]
    assert not errors, errors


def test_every_api_route_of_the_areas_is_documented() -> None:
    for path in (
        "/console/api/v1/events",
        "/console/api/v1/events/{id}",
        "/console/api/v1/keys",
        "/console/api/v1/keys/release",
        "/console/api/v1/audit",
    ):
        assert path in DOC["paths"], path


async def test_event_answers_match_the_document(console: ConsoleHarness) -> None:
    ids = await test_events_page.seed(console)
    for role in (Role.VIEWER, Role.INVESTIGATOR):
        client = console.client(role)
        listed = await client.get("/console/api/v1/events", params={"since": "31d", "limit": "3"})
        check("EventList", listed.json())
        for event_id in ids:
            one = await client.get(f"/console/api/v1/events/{ids[event_id]}")
            check("EventDetail", one.json())
    bad = await console.client(Role.VIEWER).get("/console/api/v1/events", params={"since": "90d"})
    check("Problem", bad.json())


async def test_key_and_audit_answers_match_the_document(console: ConsoleHarness) -> None:
    await test_keys_page.seed(console)
    await test_audit_page.seed(console)
    client = console.client(Role.OPERATOR)
    check("HeldKeyList", (await client.get("/console/api/v1/keys", params={"limit": "1"})).json())
    released = await client.post(
        "/console/api/v1/keys/release",
        json={"provider": "stripe", "order_key": "pi_A", "note": "n"},
    )
    check("KeyReleased", released.json())
    check("AuditList", (await client.get("/console/api/v1/audit", params={"since": "30d"})).json())
