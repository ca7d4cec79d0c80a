"""Internal publishing (`POST /v1/events`) and the `Publisher` client, for real."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from gateway.client import Publisher, PublishRejected, PublishUnavailable
from tests.support.gateway import BILLING_TOKEN, RunningServer, config, running_server
from tests.support.services import free_port, stream_messages, wait_until

EVENT: dict[str, Any] = {
    "type": "payment.captured",
    "data": {"settlement_id": "s_1", "merchant_id": "m_1", "amount_minor": 500, "currency": "EUR"},
}


@pytest.fixture
async def server(database_url: str, nats_url: str) -> AsyncIterator[RunningServer]:
    async with running_server(config(database_url, nats_url)) as srv:
        yield srv


def auth(token: str = BILLING_TOKEN, key: str | None = "cap-1") -> dict[str, str]:
    headers = {"Authorization": f"Bearer {token}"}
    if key is not None:
        headers["Idempotency-Key"] = key
    return headers


async def test_good_token_is_accepted_once_and_published(
    server: RunningServer, database_url: str, nats_url: str
) -> None:
    first = await server.client.post("/v1/events", json=EVENT, headers=auth())
    again = await server.client.post("/v1/events", json=EVENT, headers=auth())
    assert first.json() == {"status": "accepted", "event_id": "cap-1"}
    assert again.json() == {"status": "duplicate", "event_id": "cap-1"}

    async def published() -> list[tuple[str, dict[str, str], bytes]]:
        return await stream_messages(nats_url)

    messages = await wait_until(published)
    assert [(m[0], m[1]["Nats-Msg-Id"]) for m in messages] == [
        ("events.billing.payment.captured", "service:billing:cap-1")
    ]
    conn = await asyncpg.connect(database_url)
    try:
        row = await conn.fetchrow("SELECT provider, headers FROM processed_webhooks")
    finally:
        await conn.close()
    assert row is not None
    assert row["provider"] == "service:billing"
    assert BILLING_TOKEN not in row["headers"]  # the bearer token is never stored


@pytest.mark.parametrize(
    ("headers", "body", "status"),
    [
        ({"Idempotency-Key": "k"}, EVENT, 401),
        (auth(token="not-the-token"), EVENT, 401),
        ({"Authorization": "Basic abc", "Idempotency-Key": "k"}, EVENT, 401),
        (auth(key=None), EVENT, 400),
        (auth(), {"type": "x.y"}, 400),
        (auth(), {"data": {}}, 400),
        (auth(), [1, 2], 400),
    ],
    ids=[
        "no-token",
        "bad-token",
        "not-bearer",
        "no-idempotency-key",
        "no-data",
        "no-type",
        "not-an-object",
    ],
)
async def test_bad_requests_are_refused_and_nothing_stored(
    server: RunningServer, database_url: str, headers: dict[str, str], body: object, status: int
) -> None:
    response = await server.client.post("/v1/events", json=body, headers=headers)
    assert response.status_code == status, response.text
    conn = await asyncpg.connect(database_url)
    try:
        assert await conn.fetchval("SELECT count(*) FROM processed_webhooks") == 0
    finally:
        await conn.close()


async def test_subject_outside_scope_is_403(database_url: str, nats_url: str) -> None:
    doc = config(database_url, nats_url)
    doc["services"]["billing"]["subjects"] = ["events.billing.payment.*"]
    async with running_server(doc) as server:
        ok = await server.client.post("/v1/events", json=EVENT, headers=auth(key="a"))
        refused = await server.client.post(
            "/v1/events", json={"type": "payout.sent", "data": {}}, headers=auth(key="b")
        )
        sneaky = await server.client.post(
            "/v1/events", json={"type": ">", "data": {}}, headers=auth(key="c")
        )
    assert ok.status_code == 200
    assert refused.status_code == 403
    # A wildcard in the type is sanitised into a literal token, and still out of scope.
    assert sneaky.status_code == 403


async def test_publisher_client_publishes_and_retries_safely(server: RunningServer) -> None:
    base = f"http://127.0.0.1:{server.port}"
    async with Publisher(base, BILLING_TOKEN) as pub:
        first = await pub.publish("payment.captured", EVENT["data"], key="pub-1")
        second = await pub.publish("payment.captured", EVENT["data"], key="pub-1")
    assert (first.status, second.status) == ("accepted", "duplicate")
    async with Publisher(base, "wrong") as pub:
        with pytest.raises(PublishRejected) as info:
            await pub.publish("payment.captured", {}, key="x")
    assert info.value.status_code == 401


async def test_publisher_client_gives_up_when_gateway_is_unreachable() -> None:
    async with Publisher(
        f"http://127.0.0.1:{free_port()}", "t", attempts=3, base_delay_s=0.01
    ) as pub:
        with pytest.raises(PublishUnavailable):
            await pub.publish("payment.captured", {}, key="x")
