"""The dead-letter API answers as its OpenAPI fragment says (each answer validated
against the merged document's schemas), and odd query strings are a 400 with a
problem document, never a 500."""

from __future__ import annotations

from typing import Any

import jsonschema_rs
import pytest

from gateway.core.console.roles import Role
from tests.support.console import ConsoleHarness
from tests.support.dead_letters import park


async def schema_for(console: ConsoleHarness, name: str) -> Any:
    r = await console.client(Role.VIEWER).get("/console/api/v1/openapi.json")
    assert r.status_code == 200
    doc = r.json()
    assert {"/console/api/v1/dlq", "/console/api/v1/dlq/{id}/resolve"} <= set(doc["paths"])
    root: dict[str, Any] = {"$ref": f"#/components/schemas/{name}", "components": doc["components"]}
    return jsonschema_rs.validator_for(root, validate_formats=True)


async def test_answers_match_the_document(console: ConsoleHarness) -> None:
    async with console.pool.acquire() as conn:
        row = await park(conn, "evt_doc")
        await park(conn, "evt_doc_bytes", payload=b"\xff", with_event=False)
    investigator, operator = console.client(Role.INVESTIGATOR), console.client(Role.OPERATOR)
    checks = [
        ("DeadLetterList", await investigator.get("/console/api/v1/dlq?state=any&limit=1")),
        ("DeadLetter", await investigator.get(f"/console/api/v1/dlq/{row}")),
        ("DeadLetter", await console.client(Role.VIEWER).get(f"/console/api/v1/dlq/{row}")),
        ("DeadLetterPayload", await investigator.get(f"/console/api/v1/dlq/{row}/payload")),
        ("DeadLetterPayload", await investigator.get(f"/console/api/v1/dlq/{row + 1}/payload")),
        ("Resolved", await operator.post(f"/console/api/v1/dlq/{row}/resolve", json={"note": "n"})),
        ("Problem", await operator.post(f"/console/api/v1/dlq/{row}/resolve", json={"note": "n"})),
        ("Problem", await investigator.get("/console/api/v1/dlq/424242")),
    ]
    for name, r in checks:
        assert r.status_code in (200, 400, 404, 409), r.text
        (await schema_for(console, name)).validate(r.json())
    assert checks[1][1].json()["header_names"] == [
        "Content-Type",
        "Stripe-Signature",
        "traceparent",
        "User-Agent",
    ]
    assert checks[1][1].json()["error_detail"].startswith("Traceback")
    assert "error_detail" not in checks[2][1].json(), "the stack is for investigators and up"
    views = await console.fetch(
        "SELECT detail->>'via' AS via FROM console_audit WHERE action = 'payload.view' "
        "AND target = $1 ORDER BY id", f"dlq:{row}"
    )  # fmt: skip
    assert [v["via"] for v in views] == ["api:stack", "api"], "a stack read is audited too"
    assert checks[3][1].json()["headers"]["Stripe-Signature"] == "[masked]"
    assert checks[4][1].json()["form"] == "hex" and checks[4][1].json()["payload_text"] is None


@pytest.mark.parametrize(
    "query",
    [
        "since=" + "9" * 5000,
        "until=2026-13-45T99:99Z",
        "since=2026-11-30T10:00",
        "search=%00",
        "search=" + "x" * 201,
        "stage=%F0%9F%92%A9",
        "type=*a*",
        "type=",
        "min_attempts=-1",
        "min_attempts=1e3",
        "limit=0",
        "limit=99999999999999999999",
        "cursor=%00%00",
        "cursor=W1siYSJdLDFd",
        "state=open&state=any",
        "error_class=%00",
        "provider=" + "p" * 10_000,
        "unknown=1",
    ],
)
async def test_odd_queries_are_refused_in_one_line(console: ConsoleHarness, query: str) -> None:
    r = await console.client(Role.VIEWER).get(f"/console/api/v1/dlq?{query}")
    assert r.status_code in (200, 400), (query, r.status_code, r.text[:300])
    if r.status_code == 400:
        assert r.headers["content-type"].startswith("application/problem+json")
        assert r.json()["detail"] and "\n" not in r.json()["detail"]
    page = await (await console.session_client(Role.VIEWER)).get(f"/console/dlq?{query}")
    assert page.status_code == r.status_code
