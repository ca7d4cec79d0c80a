"""Payload-derived text is payload: marker values seeded into the bodies of events and of
dead letters of every stage, and into the messages that quote them (a settlement
message names the merchant and the amount, an ingest message the value it refused, a
forward message an answer that echoed the event, a replay item the failure it met),
reach no answer a viewer can get. The walk starts from every GET the role tables let a
viewer make, follows every link of every page and every item of every API list, and
fails on any marker in any answer; the same walk as an investigator finds each one, so
the walk sees what it is looking for."""

from __future__ import annotations

import re
from collections import deque
from urllib.parse import urljoin, urlsplit

import httpx
import orjson
from starlette.routing import Route

from gateway.core.console.roles import Role
from tests.integration.console.test_roles_events import AMOUNT as BOOKED_AMOUNT
from tests.integration.console.test_roles_events import IBAN as BOOKED_PAYMENT
from tests.integration.console.test_roles_events import MERCHANT as BOOKED_MERCHANT
from tests.integration.console.test_roles_events import seed_secrets
from tests.integration.console.test_route_coverage import role_cases, route_of, served_routes
from tests.support.console import ConsoleHarness
from tests.support.dead_letters import park

#: The dead letters' values: in their bodies and quoted by their messages, never booked.
PAYMENT = "pi_marker_7Qz3"
MERCHANT = "m_marker_wombat"
AMOUNT = 4242421
AMOUNT_TEXT = "42,424.21"  # as the pages write money
#: The settled event's values (`seed_secrets`): its payment is in the books, which the
#: ledger pages show every role by design (test_roles_ledger); anywhere else they are
#: the event's body.
BOOKED = [BOOKED_PAYMENT, BOOKED_MERCHANT, str(BOOKED_AMOUNT), "9,876.54"]
LEDGER = "/console/ledger"


def body(event_id: str) -> bytes:
    """What each dead letter's event carries: an internal capture that settles."""
    data = {"settlement_id": PAYMENT, "merchant_id": MERCHANT, "amount_minor": AMOUNT,
            "currency": "CHF"}  # fmt: skip
    return orjson.dumps({"id": event_id, "type": "payment.captured", "data": data})


#: Each stage's row and its message as the live path (or an older version) wrote it.
MESSAGES = {
    "settlement": f"merchant {MERCHANT} has no CHF account for payment {PAYMENT}",
    "ingest": f"field data.amount_minor: expected a positive amount, got {AMOUNT}",
    "forward:billing": f'target answered 500: {{"merchant_id": "{MERCHANT}"}}',
    "publish": "nats: timeout waiting for the stream's acknowledgement",
}
LIMIT = 400  # answers per walk: the seeded console has a few dozen pages
HREF = re.compile(r'href="(/console/[^"#]*)"')


async def _seed(console: ConsoleHarness) -> dict[str, int]:
    ids = await seed_secrets(console)  # two events with the markers, one settled
    async with console.pool.acquire() as conn:
        for n, (stage, message) in enumerate(MESSAGES.items()):
            ids[stage] = await park(
                conn,
                f"evt-marker-{n}",
                stage=stage,
                provider="service:billing",
                event_type="payment.captured",
                error_class="UNKNOWN_MERCHANT" if stage == "settlement" else "PUBLISH_FAILED",
                error_message=message,
                payload=body(f"evt-marker-{n}"),
                headers={"content-type": "application/json", "x-merchant": MERCHANT},
            )
        await conn.execute(
            "UPDATE dlq_webhooks SET error_detail = $1",
            f"Traceback (most recent call last):\nLookupError: {MERCHANT}",
        )
        job = await conn.fetchval(
            "INSERT INTO replay_jobs (kind, state, created_by, request, total, finished_at)"
            " VALUES ('dlq', 'failed', 'console:operator', '{\"ids\": [1]}', 1, now())"
            " RETURNING id"
        )
        await conn.execute(
            "INSERT INTO replay_job_items (job_id, position, dlq_id, state, error_class,"
            " message, done_at) VALUES ($1, 0, $2, 'failed', 'UNKNOWN_MERCHANT', $3, now())",
            job,
            ids["settlement"],
            MESSAGES["settlement"],
        )
    return ids


def _viewer_routes() -> list[Route]:
    """Every GET route some role table lets a viewer read."""
    routes = served_routes()
    found: list[Route] = []
    for cases in role_cases().values():
        for method, path, least, _ in cases:
            route = route_of(routes, method, path.split("?")[0])
            if method == "GET" and least is Role.VIEWER and route and route not in found:
                found.append(route)
    return found


def _starts() -> list[str]:
    """The viewer's GETs of the role tables (their ids are this database's first rows)."""
    paths = [
        path
        for cases in role_cases().values()
        for method, path, least, _ in cases
        if method == "GET" and least is Role.VIEWER
    ]
    return ["/console/", "/console/events?since=7d", "/console/dlq?any=1", *paths]


def _next(path: str, r: httpx.Response) -> list[str]:
    """Where an answer leads: a page's links, an API list's items."""
    if r.headers.get("content-type", "").startswith("text/html"):
        return [urljoin(path, h.replace("&amp;", "&")) for h in HREF.findall(r.text)]
    if not r.headers.get("content-type", "").startswith("application/json"):
        return []
    doc = r.json()
    base = urlsplit(path).path
    items = doc.get("items") if isinstance(doc, dict) else None
    if not isinstance(items, list) or not base.startswith("/console/api/v1/"):
        return []
    ids = [i["id"] for i in items if isinstance(i, dict) and "id" in i]
    more = [f"{base}/{i}" for i in ids]
    if base.endswith("/replays"):
        more += [f"{base}/{i}/items" for i in ids]
    return more


async def _walk(client: httpx.AsyncClient) -> dict[str, httpx.Response]:
    seen: dict[str, httpx.Response] = {}
    queue = deque(_starts())
    while queue and len(seen) < LIMIT:
        path = queue.popleft()
        if path in seen or "/logout" in path:
            continue
        seen[path] = r = await client.get(path)
        queue.extend(p for p in _next(path, r) if p not in seen)
    assert len(seen) < LIMIT, "the walk did not end: raise LIMIT or narrow what it follows"
    return seen


def _markers(ids: dict[str, int], path: str) -> list[str]:
    """What must not be in the answer at `path`."""
    mine = [PAYMENT, MERCHANT, str(AMOUNT), AMOUNT_TEXT, f"{ids['transfer_id']:#034x}"]
    return mine if urlsplit(path).path.startswith(LEDGER) else mine + BOOKED


async def test_no_viewer_answer_holds_a_value_of_a_body(console: ConsoleHarness) -> None:
    ids = await _seed(console)
    answers = await _walk(console.client(Role.VIEWER))
    leaks = {
        path: [m for m in _markers(ids, path) if m in r.text]
        for path, r in answers.items()
        if any(m in r.text for m in _markers(ids, path))
    }
    assert leaks == {}
    # Every route a viewer may read was walked and answered.
    routes = served_routes()
    walked = set()
    for path, r in answers.items():
        route = route_of(routes, "GET", urlsplit(path).path)
        if route is not None and r.status_code in (200, 404):  # 404: a catch-all route
            walked.add(route.path)
    missing = [r.path for r in _viewer_routes() if r.path not in walked]
    assert missing == []
    # The withheld messages said that they were there.
    listed = answers["/console/api/v1/dlq"].json()["items"]
    by_stage = {i["stage"]: i for i in listed}
    assert by_stage["settlement"]["error_message"] is None
    assert by_stage["settlement"]["error_message_chars"] == len(MESSAGES["settlement"])
    assert by_stage["publish"]["error_message"] == MESSAGES["publish"]  # the relay's words
    assert all(i["amount"] is None for i in listed)
    # Nor does a search tell a viewer what a withheld message says.
    viewer = console.client(Role.VIEWER)
    for path in ("/console/api/v1/dlq", "/console/dlq", "/console/dlq/export.ndjson"):
        found = await viewer.get(path, params={"search": MERCHANT})
        assert found.status_code == 200 and "evt-marker" not in found.text, path
    relay = await viewer.get("/console/api/v1/dlq", params={"search": "timeout waiting"})
    assert [i["stage"] for i in relay.json()["items"]] == ["publish"]  # its own words


async def test_an_investigators_walk_finds_every_marker(console: ConsoleHarness) -> None:
    """The walk reaches the values when the role may read them: the messages, the
    amounts (as minor units in JSON, with decimals on pages), the transfer id."""
    ids = await _seed(console)
    answers = await _walk(console.client(Role.INVESTIGATOR))
    text = "\n".join(r.text for r in answers.values())
    assert [m for m in _markers(ids, "/console/") if m not in text] == []
    for stage, message in MESSAGES.items():
        assert message in text or orjson.dumps(message).decode()[1:-1] in text, stage
    listed = answers["/console/api/v1/dlq"].json()["items"]
    assert {i["stage"]: i["amount"] for i in listed}["settlement"] == {
        "amount_minor": AMOUNT,
        "currency": "CHF",
    }
    found = await console.client(Role.INVESTIGATOR).get(
        "/console/api/v1/dlq", params={"search": MERCHANT}
    )
    assert {i["stage"] for i in found.json()["items"]} == {"settlement", "forward:billing"}
    views = await console.audit("payload.view")
    assert "dlq:list" in {v["target"] for v in views}  # the API's list, audited
