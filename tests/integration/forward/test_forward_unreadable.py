"""Stream messages `gateway forward` cannot read as events, against a real gateway, NATS,
PostgreSQL and HTTP target: each is parked at the destination's stage with the subject,
headers and body it had and never offered again (the consumer holds nothing unanswered),
while the events around it are delivered; and while PostgreSQL cannot take its row, it
stays on the stream, coming back until the row is written."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import nats
import orjson
import pytest

from chaos.proxy import FaultProxy
from gateway import settings as settings_mod
from gateway.errors import ErrorClass
from gateway.forward.unreadable import UNREADABLE_ID_PREFIX
from gateway.settings import Settings
from tests.support.forward_target import Target, serving
from tests.support.forwarding import Running, forwarding, options, post_stripe
from tests.support.gateway import config, running_server
from tests.support.services import wait_until

SUBJECT = "webhooks.stripe.payment_intent.succeeded"
#: An event's message without its event id, as no gateway writes one.
NO_EVENT_ID = {
    "Nats-Msg-Id": "hand-made-1",
    "Gateway-Provider": "stripe",
    "Gateway-Event-Type": "payment_intent.succeeded",
    "Gateway-Received-At": "2026-12-04T11:59:00+00:00",
    "X-Published-By": "a script",
}
NO_EVENT_ID_BODY = b'{"id": "evt_hand_made", "note": "\\u00e9"}\n\x00\xff'
#: No `Nats-Msg-Id`, and a provider whose bytes were not UTF-8 (read as U+FFFD).
NO_MSG_ID = {
    "Gateway-Provider": "str\ufffdpe",
    "Gateway-Event-Id": "evt_odd_2",
    "Gateway-Received-At": "2026-12-04T11:59:00+00:00",
}
#: Every header, one unreadable: left unanswered, this one used to come back for ever.
BAD_TIME = {
    "Nats-Msg-Id": "stripe:evt_odd_3",
    "Gateway-Provider": "stripe",
    "Gateway-Event-Id": "evt_odd_3",
    "Gateway-Received-At": "yesterday",
}


@pytest.fixture
def doc(database_url: str, nats_url: str) -> dict[str, object]:
    return config(database_url, nats_url)


async def publish_raw(nats_url: str, headers: dict[str, str], body: bytes) -> int:
    """Put one message on the stream as nats-py sends it; its stream sequence."""
    nc = await nats.connect(nats_url)
    try:
        ack = await nc.jetstream().publish(SUBJECT, body, headers=headers)
    finally:
        await nc.close()
    return ack.seq


async def consumer_state(nats_url: str, settings: Settings, name: str) -> tuple[int, int, int]:
    """(pending, ack pending, redelivered) of the destination's consumer."""
    nc = await nats.connect(nats_url)
    try:
        info = await nc.jetstream().consumer_info(settings.nats.stream, f"forward-{name}")
    finally:
        await nc.close()
    return info.num_pending or 0, info.num_ack_pending or 0, info.num_redelivered or 0


async def dead_letters(database_url: str) -> list[dict[str, Any]]:
    conn = await asyncpg.connect(database_url)
    try:
        rows = await conn.fetch(
            "SELECT stage, provider, event_id, subject, error_class, error_message,"
            " payload, headers::text AS headers, attempts, webhook_id, order_key"
            " FROM dlq_webhooks ORDER BY id"
        )
    finally:
        await conn.close()
    return [{**dict(r), "headers": orjson.loads(r["headers"])} for r in rows]


def delivered(running: Running, target: Target, count: int) -> Any:
    async def check() -> bool:
        running.check()
        return len(target.delivered()) >= count

    return check


async def test_an_unreadable_message_is_parked_with_its_bytes_and_never_offered_again(
    doc: dict[str, object], database_url: str, nats_url: str
) -> None:
    async with (
        running_server(doc) as server,
        serving(Target()) as target,
        forwarding(server.settings, options(target.url, name="odd")) as running,
    ):
        await post_stripe(server.client, "evt_before_odd")
        await wait_until(delivered(running, target, 1), timeout_s=20)
        first_seq = await publish_raw(nats_url, NO_EVENT_ID, NO_EVENT_ID_BODY)
        second_seq = await publish_raw(nats_url, NO_MSG_ID, b"{}")
        third_seq = await publish_raw(nats_url, BAD_TIME, b"[]")
        await post_stripe(server.client, "evt_after_odd")
        await wait_until(delivered(running, target, 2), timeout_s=20)

        async def parked() -> bool:
            running.check()
            return len(await dead_letters(database_url)) == 3

        await wait_until(parked, timeout_s=20)

        async def nothing_unanswered() -> bool:
            pending, ack_pending, _ = await consumer_state(nats_url, server.settings, "odd")
            return pending == 0 and ack_pending == 0

        # Termed: the stream holds nothing of them for this destination any more.
        await wait_until(nothing_unanswered, timeout_s=10)
        await asyncio.sleep(1.5)  # and nothing comes back
        assert await consumer_state(nats_url, server.settings, "odd") == (0, 0, 0)
        assert running.counts.parked == 3 and running.counts.delivered == 2

    # Only the events were sent.
    assert [r.headers["gateway-event-id"] for r in target.received] == [
        "evt_before_odd",
        "evt_after_odd",
    ]
    rows = await dead_letters(database_url)
    assert {r["stage"] for r in rows} == {"forward:odd"}
    assert {r["error_class"] for r in rows} == {ErrorClass.STREAM_MESSAGE_UNREADABLE}
    assert {r["attempts"] for r in rows} == {1}
    # Parked concurrently: found by the stream sequence their id starts with.
    by_seq = {int(r["event_id"].split(":")[1]): r for r in rows}
    first, second, third = by_seq[first_seq], by_seq[second_seq], by_seq[third_seq]
    # What was on the stream, as it was: subject, every header, the body byte for byte.
    assert first["payload"] == NO_EVENT_ID_BODY
    assert first["headers"] == NO_EVENT_ID
    assert first["subject"] == SUBJECT
    assert first["provider"] == "stripe"
    assert first["event_id"].startswith(f"{UNREADABLE_ID_PREFIX}{first_seq}:")
    assert first["error_message"] == (
        f"stream message {first_seq} cannot be read: no Gateway-Event-Id header"
    )
    assert first["webhook_id"] is None and first["order_key"] is None
    assert second["payload"] == b"{}"
    assert second["headers"] == NO_MSG_ID
    assert second["provider"] == ""  # what the header said is not a provider's name
    assert second["error_message"] == (
        f"stream message {second_seq} cannot be read: no Nats-Msg-Id header"
    )
    assert third["payload"] == b"[]" and third["headers"] == BAD_TIME
    assert third["event_id"] != "evt_odd_3"  # its own id, never the event's row
    assert third["error_message"] == (
        f"stream message {third_seq} cannot be read: Gateway-Received-At is not an ISO 8601 time"
    )


async def test_an_unreadable_message_stays_on_the_stream_while_its_row_cannot_be_written(
    doc: dict[str, object], database_url: str, nats_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """PostgreSQL unreachable: the message is neither acked nor termed but returned, and
    the forwarder steps aside from its database until it answers (`forward.aside`); once
    the row can be written, it is parked, and only then let go."""
    proxy = FaultProxy("127.0.0.1", 5432)
    await proxy.start()
    proxied = database_url.replace("127.0.0.1:5432", f"127.0.0.1:{proxy.listen_port}")
    fwd_settings = settings_mod.parse(config(proxied, nats_url), env={})
    try:
        async with (
            running_server(doc) as server,
            serving(Target()) as target,
            forwarding(fwd_settings, options(target.url, name="down", ordered=False)) as running,
        ):
            await post_stripe(server.client, "evt_before_outage")
            await wait_until(delivered(running, target, 1), timeout_s=20)

            await proxy.set_enabled(False)
            await publish_raw(nats_url, NO_EVENT_ID, NO_EVENT_ID_BODY)

            async def offered_again() -> bool:
                running.check()
                said = {r.getMessage() for r in caplog.records}
                return {
                    "unreadable stream message not parked; offered again",
                    "database not answering; stepping aside",
                } <= said

            # Returned to the stream, and the forwarder stepped aside: not let go.
            await wait_until(offered_again, timeout_s=20)
            _, ack_pending, _ = await consumer_state(nats_url, fwd_settings, "down")
            assert ack_pending == 1
            assert await dead_letters(database_url) == []

            await proxy.set_enabled(True)

            async def parked_and_let_go() -> bool:
                running.check()
                _, ack_pending, _ = await consumer_state(nats_url, fwd_settings, "down")
                return ack_pending == 0 and len(await dead_letters(database_url)) == 1

            await wait_until(parked_and_let_go, timeout_s=30)
    finally:
        await proxy.close()
    (row,) = await dead_letters(database_url)
    assert row["error_class"] == ErrorClass.STREAM_MESSAGE_UNREADABLE
    assert row["stage"] == "forward:down"
    assert row["payload"] == NO_EVENT_ID_BODY and row["headers"] == NO_EVENT_ID
    assert row["attempts"] == 1  # the writes that failed left nothing behind
