"""GoCardless end to end: a request of 50 events signed as GoCardless signs (the hex
HMAC-SHA256 of the whole body, computed here with the standard library), posted to a
real gateway on PostgreSQL and NATS JetStream.

GoCardless signs the request, not each event, and retries the whole request on any
answer but a 2xx: a changed byte refuses every event (498, as GoCardless asks), the
genuine request becomes 50 rows published once each, and the same request again is 50
duplicates. Its events carry no amount, so nothing here settles.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

import orjson
import pytest

from tests.support.gateway import RunningServer, config, running_server
from tests.support.services import stream_messages, wait_until
from tests.support.settlement import fetch

SECRET = "gc_e2e_current_Jk8sPq2vXw5yZb7n"
OLDER = "gc_e2e_older_Lm3dFg6hRt9uVc1e"
KINDS = (("payments", "confirmed"), ("payments", "paid_out"), ("refunds", "created"),
         ("payments", "charged_back"), ("payouts", "paid"))  # fmt: skip


@pytest.fixture
def doc(database_url: str, nats_url: str) -> dict[str, Any]:
    found = config(database_url, nats_url)
    found["providers"]["gocardless"] = {"scheme": "gocardless", "secrets": [SECRET, OLDER]}
    return found


def event(n: int) -> dict[str, Any]:
    resource, action = KINDS[n % len(KINDS)]
    return {"id": f"EV{n:012d}", "created_at": "2026-12-06T10:00:00.000Z",
            "resource_type": resource, "action": action,
            "links": {"payment": f"PM{n // 5:012d}"},
            "details": {"origin": "gocardless", "cause": f"{resource}_{action}",
                        "description": f"Event {n}: \"quoted\", [bracketed], caf\u00e9."},
            "metadata": {}}  # fmt: skip


def batch(first: int, count: int) -> bytes:
    """A request as GoCardless sends one, indented so that any re-serialising of an
    event would show in the stored bytes."""
    doc = {"events": [event(n) for n in range(first, first + count)],
           "meta": {"webhook_id": f"WB{first:012d}"}}  # fmt: skip
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2)


def signed(body: bytes, secret: str = SECRET) -> dict[str, str]:
    mac = hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()
    return {"Webhook-Signature": mac, "Content-Type": "application/json"}


async def post(server: RunningServer, body: bytes, headers: dict[str, str]) -> Any:
    return await server.client.post("/webhooks/gocardless", content=body, headers=headers)


async def rows(dsn: str) -> list[Any]:
    return await fetch(
        dsn,
        "SELECT event_id, event_type, subject, body FROM processed_webhooks"
        " WHERE provider = 'gocardless' ORDER BY event_id",
    )


async def test_a_batch_of_50_is_refused_whole_for_one_byte_then_recorded_and_published_once(
    doc: dict[str, Any], database_url: str, nats_url: str
) -> None:
    body = batch(0, 50)
    tampered = body.replace(b"EV000000000031", b"EV000000000032", 1)
    assert tampered != body
    async with running_server(doc) as server:
        # 1. One changed byte: every event refused, with GoCardless's 498; nothing stored.
        refused = await post(server, tampered, signed(body))
        assert refused.status_code == 498
        assert refused.json()["error"] == "signature_mismatch"
        unsigned = await post(server, body, {"Content-Type": "application/json"})
        assert (unsigned.status_code, unsigned.json()["error"]) == (498, "signature_missing")
        assert await rows(database_url) == []

        # 2. The genuine request: 50 rows under their own ids and types.
        answer = await post(server, body, signed(body))
        assert answer.status_code == 200, answer.text
        assert answer.json()["status"] == "accepted"
        assert [e["status"] for e in answer.json()["events"]] == ["accepted"] * 50
        stored = await rows(database_url)
        assert len(stored) == 50
        sent = orjson.loads(body)
        for row, (n, original) in zip(stored, enumerate(sent["events"]), strict=True):
            resource, action = KINDS[n % len(KINDS)]
            assert (row["event_id"], row["event_type"]) == (f"EV{n:012d}", f"{resource}.{action}")
            assert row["subject"] == f"webhooks.gocardless.{resource}.{action}"
            one = orjson.loads(row["body"])
            assert one == {"events": [original], "meta": sent["meta"]}
            # The event's own bytes, as signed, not a re-serialising of them.
            inner = bytes(row["body"]).split(b'{"events":[', 1)[1].rsplit(b'],"meta":', 1)[0]
            assert inner in body and b"\n" in inner

        # 3. The same request again, as GoCardless retries it: 50 duplicates.
        again = await post(server, body, signed(body))
        assert again.status_code == 200
        assert again.json()["status"] == "duplicate"
        assert {e["status"] for e in again.json()["events"]} == {"duplicate"}

        # 4. A later request signed with the older secret of a rotation: its events are
        # the stream's last, so once they are there everything before them is too.
        later = batch(50, 2)
        assert (await post(server, later, signed(later, OLDER))).status_code == 200

        async def published() -> list[Any]:
            found = await stream_messages(nats_url)
            ids = {m[1].get("Nats-Msg-Id") for m in found}
            return found if {"gocardless:EV000000000051"} <= ids else []

        messages = await wait_until(published)
    assert len(await rows(database_url)) == 52
    gocardless = [m for m in messages if m[0].startswith("webhooks.gocardless.")]
    ids = [m[1]["Nats-Msg-Id"] for m in gocardless]
    assert sorted(ids) == [f"gocardless:EV{n:012d}" for n in range(52)]  # each once
    by_id = {r["event_id"]: bytes(r["body"]) for r in await rows(database_url)}
    for subject, headers, data in gocardless:
        event_id = headers["Nats-Msg-Id"].removeprefix("gocardless:")
        assert data == by_id[event_id]
        n = int(event_id[2:])
        assert subject == "webhooks.gocardless." + ".".join(KINDS[n % len(KINDS)])
