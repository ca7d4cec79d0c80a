"""The console reads at most 64 KiB of a request body (4 MiB for a replay's ids): a
body that says it is larger is refused (413) before a byte of it is read, before
authentication; a chunked body that turns out larger is refused as soon as it passes
the cap, without the rest of it being read. The largest legitimate bodies still pass."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from urllib.parse import urlencode

import httpx
import pytest

from gateway.console.dead_letter_docs import MAX_NOTE_CHARS
from gateway.console.dead_letters import BULK_MAX_ROWS
from gateway.console.web import MAX_BODY_BYTES, REPLAY_BODY_BYTES
from gateway.core.console.roles import Role
from gateway.core.operator_input import MAX_ROW_ID
from gateway.core.replay.requests import JOB_MAX_ROWS
from tests.support.console import SAME_ORIGIN, ConsoleHarness
from tests.support.dead_letters import park

CHUNK_BYTES = 16 << 10
#: 300 MB, as an attacker would send it.
HUGE_BYTES = 300_000_000


class Body:
    """A body of `total` bytes made as the server asks for it; `pulled` counts the
    chunks it asked for (what the console read)."""

    def __init__(self, total: int = HUGE_BYTES) -> None:
        self.total = total
        self.pulled = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for _ in range(self.total // CHUNK_BYTES):
            self.pulled += 1
            yield b"a" * CHUNK_BYTES


def assert_refused(r: httpx.Response) -> None:
    assert r.status_code == 413, r.text[:300]
    assert r.headers["content-type"].startswith("application/problem+json")
    assert r.json()["title"] == "Payload Too Large"
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["connection"] == "close", "the unread rest is not drained"


async def test_a_declared_oversized_body_is_refused_unread(console: ConsoleHarness) -> None:
    async with console.pool.acquire() as conn:
        row = await park(conn, "evt_declared")
    operator = console.client(Role.OPERATOR)
    form = {"Content-Type": "application/x-www-form-urlencoded", **SAME_ORIGIN}
    cases = [
        (console.anonymous(), "/console/login", HUGE_BYTES, form),
        (operator, f"/console/api/v1/dlq/{row}/resolve", MAX_BODY_BYTES + 1, {}),
        (operator, "/console/api/v1/replays", REPLAY_BODY_BYTES + 1, {}),
        (console.client(Role.ADMIN), "/console/api/v1/tokens", MAX_BODY_BYTES + 1, {}),
    ]
    for client, path, declared, headers in cases:
        body = Body()
        r = await client.post(
            path, content=body, headers={**headers, "Content-Length": str(declared)}
        )
        assert_refused(r)
        assert body.pulled == 0, f"{path}: {body.pulled} chunks read of a refused body"
    assert await console.audit("login") == [], "no login was tried"
    assert not await console.fetchval("SELECT is_resolved FROM dlq_webhooks WHERE id = $1", row)
    assert await console.fetchval("SELECT count(*) FROM replay_jobs") == 0


async def test_a_streamed_oversized_body_is_refused_as_it_arrives(
    console: ConsoleHarness,
) -> None:
    async with console.pool.acquire() as conn:
        row = await park(conn, "evt_streamed")
    # One chunk past the cap, the read stops: the 300 MB are never held, nor read.
    most = MAX_BODY_BYTES // CHUNK_BYTES + 1
    anonymous = console.anonymous()
    form = {"Content-Type": "application/x-www-form-urlencoded", **SAME_ORIGIN}
    body = Body()
    assert_refused(await anonymous.post("/console/login", content=body, headers=form))
    assert body.pulled == most
    operator = console.client(Role.OPERATOR)
    body = Body()
    assert_refused(await operator.post(f"/console/api/v1/dlq/{row}/resolve", content=body))
    assert body.pulled == most
    browser = await console.session_client(Role.OPERATOR)
    body = Body()
    assert_refused(await browser.post(f"/console/dlq/{row}/resolve", content=body, headers=form))
    assert body.pulled == most
    body = Body()
    r = await operator.post("/console/api/v1/replays", content=body)
    assert_refused(r)
    assert body.pulled == REPLAY_BODY_BYTES // CHUNK_BYTES + 1
    assert not await console.fetchval("SELECT is_resolved FROM dlq_webhooks WHERE id = $1", row)
    # Ordinary requests go on as before.
    r = await anonymous.post(
        "/console/login", data={"token": console.tokens[Role.VIEWER]}, headers=SAME_ORIGIN
    )
    assert r.status_code == 303
    r = await operator.post(f"/console/api/v1/dlq/{row}/resolve", json={"note": "checked"})
    assert r.status_code == 200 and r.json()["resolved_by"] == "console:operator"


async def test_the_largest_legitimate_bodies_are_read(console: ConsoleHarness) -> None:
    """A bulk resolve of 1,000 ids of 19 digits with the longest note of 4-byte
    characters and a long search, and a replay of 100,000 such ids, indented."""
    browser = await console.session_client(Role.OPERATOR)
    ids = [str(MAX_ROW_ID - n) for n in range(BULK_MAX_ROWS)]
    pairs = [("scope", "ids"), *(("id", i) for i in ids), ("search", "\U0001f4b8" * 200)]
    pairs += [("note", "\U0001f4b8" * MAX_NOTE_CHARS), ("confirm", str(BULK_MAX_ROWS))]
    form = urlencode(pairs).encode()
    assert len(form) > MAX_BODY_BYTES * 3 // 4, "the largest form, three quarters of the cap"
    r = await browser.post(
        "/console/dlq/resolve",
        content=form,
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert r.status_code == 303 and "done=0" in r.headers["location"], r.text[:300]
    [bulk] = await console.audit("dlq.resolve.bulk")
    assert json.loads(bulk["detail"])["asked"] == BULK_MAX_ROWS
    doc = {"kind": "dlq", "ids": [MAX_ROW_ID - n for n in range(JOB_MAX_ROWS)], "dry_run": True}
    body = json.dumps(doc, indent=4).encode()
    assert len(body) > REPLAY_BODY_BYTES // 2
    r = await console.client(Role.OPERATOR).post(
        "/console/api/v1/replays", content=body, headers={"Content-Type": "application/json"}
    )
    assert r.status_code == 404 and r.json()["detail"].startswith("no dead-letter row with id"), (
        r.text[:300]
    )


@pytest.mark.parametrize("method", ["GET", "POST"])
async def test_a_route_that_reads_no_body_answers_as_usual(
    console: ConsoleHarness, method: str
) -> None:
    """A body within the cap, on a route that does not read it, changes nothing."""
    r = await console.client(Role.VIEWER).request(method, "/console/api/v1/dlq", content=b"x" * 10)
    assert r.status_code == (200 if method == "GET" else 405)
    assert r.headers.get("connection") != "close"
