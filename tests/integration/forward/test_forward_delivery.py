"""Delivery semantics of `gateway forward` against a real gateway, NATS, PostgreSQL and
HTTP target: retries keep one `webhook-id`, a redirect is a failure, `Retry-After` is
honoured, 410 pauses the destination without losing its event, filters acknowledge
without sending, and a stopped named destination gets everything on its return."""

from __future__ import annotations

import itertools
from collections import defaultdict
from dataclasses import replace

import asyncpg
import nats
import orjson
import pytest

from gateway.core.forward.filters import ForwardFilter
from gateway.core.forward.request import webhook_id
from tests.support.forward_target import Received, Target, always, serving
from tests.support.forwarding import forwarding, options, post_stripe
from tests.support.gateway import config, running_server
from tests.support.services import wait_until

FAST = (0.2, 0.2, 0.2)


@pytest.fixture
def doc(database_url: str, nats_url: str) -> dict[str, object]:
    return config(database_url, nats_url)


def by_event(received: list[Received]) -> dict[str, list[Received]]:
    found: dict[str, list[Received]] = defaultdict(list)
    for r in received:
        found[r.headers["gateway-event-id"]].append(r)
    return found


async def test_fail_first_shows_each_retry_and_one_webhook_id(
    doc: dict[str, object], database_url: str
) -> None:
    async with running_server(doc) as server, serving(Target()) as target:
        opts = options(target.url, schedule=FAST, fail_first=2)
        async with forwarding(server.settings, opts) as running:
            await post_stripe(server.client, "evt_ff_1")

            async def delivered() -> bool:
                running.check()
                return len(target.delivered()) == 1

            await wait_until(delivered, timeout_s=20)
        request = target.delivered()[0]
        # Attempts 1 and 2 were answered as 503 without sending; the third went out.
        assert len(target.received) == 1
        assert request.headers["gateway-attempt"] == "3"
        assert request.webhook_id == webhook_id("stripe", "evt_ff_1")
        assert running.counts.retried == 2 and running.counts.delivered == 1
        lines = [orjson.loads(line) for line in running.out.getvalue().splitlines()]
        assert [(x["attempt"], x["status"], x["outcome"]) for x in lines] == [
            (1, 503, "retry"),
            (2, 503, "retry"),
            (3, 200, "delivered"),
        ]
        conn = await asyncpg.connect(database_url)
        try:  # delivered: its failed attempts are forgotten
            assert await conn.fetchval("SELECT count(*) FROM forward_attempts") == 0
        finally:
            await conn.close()


async def test_a_redirect_is_a_failure_and_retry_after_is_honoured(
    doc: dict[str, object],
) -> None:
    answers = iter(
        [
            (302, {"location": "http://127.0.0.1:9/elsewhere"}, b""),
            (429, {"retry-after": "2"}, b"slow down"),
            (200, {}, b"ok"),
        ]
    )
    async with (
        running_server(doc) as server,
        serving(Target(lambda _: next(answers))) as target,
        forwarding(server.settings, options(target.url, schedule=FAST)) as running,
    ):
        await post_stripe(server.client, "evt_rr_1")

        async def delivered() -> bool:
            running.check()
            return len(target.delivered()) == 1

        await wait_until(delivered, timeout_s=20)
    statuses = [r.status for r in target.received]
    assert statuses == [302, 429, 200]  # the redirect was not followed
    assert len({r.webhook_id for r in target.received}) == 1
    # The schedule says 0.2 s; the target asked for 2 s after its 429, and got them.
    assert target.received[2].at_s - target.received[1].at_s >= 1.9
    lines = [orjson.loads(line) for line in running.out.getvalue().splitlines()]
    assert lines[1]["retry_in_s"] == 2.0
    assert lines[1]["answer"] == "slow down"


async def test_410_pauses_the_destination_and_keeps_its_event(doc: dict[str, object]) -> None:
    async with running_server(doc) as server, serving(Target(always(410))) as gone:
        opts = options(gone.url)
        async with forwarding(server.settings, opts) as running:
            await post_stripe(server.client, "evt_gone_1")
            await wait_until(lambda: _done(running.task), timeout_s=20)
            running.task.result()  # ended by itself, without an error
        assert running.counts.paused and running.counts.delivered == 0
        assert [r.status for r in gone.received] == [410]
        # The destination resumes where it paused: the event is delivered then.
        async with (
            serving(Target()) as back,
            forwarding(server.settings, replace(opts, url=back.url)) as again,
        ):

            async def delivered() -> bool:
                again.check()
                return len(back.delivered()) == 1

            await wait_until(delivered, timeout_s=20)
        assert back.delivered()[0].webhook_id == gone.received[0].webhook_id


async def _done(task: object) -> bool:
    return bool(task.done())  # type: ignore[attr-defined]


async def test_filtered_events_are_acknowledged_and_never_sent(doc: dict[str, object]) -> None:
    async with running_server(doc) as server, serving(Target()) as target:
        opts = options(
            target.url,
            filters=ForwardFilter.parse(
                ("stripe",),
                ("payment_intent.*",),
                '{"data": {"object": {"payment_intent": "pi_keep"}}}',
            ),
        )
        async with forwarding(server.settings, opts) as running:
            await post_stripe(server.client, "evt_f_keep", "pi_keep")
            await post_stripe(server.client, "evt_f_other_key", "pi_other")
            await post_stripe(
                server.client, "evt_f_other_type", "pi_keep", event_type="invoice.paid"
            )

            async def settled() -> bool:
                running.check()
                return running.counts.delivered + running.counts.filtered == 3

            await wait_until(settled, timeout_s=20)
        assert [r.headers["gateway-event-id"] for r in target.received] == ["evt_f_keep"]
        assert running.counts.filtered == 2


async def test_a_named_destination_gets_what_arrived_while_it_was_stopped(
    doc: dict[str, object],
) -> None:
    async with running_server(doc) as server, serving(Target()) as target:
        opts = options(target.url, name="durable", max_in_flight=32)
        async with forwarding(server.settings, opts) as first:
            await post_stripe(server.client, "evt_d_0", "pi_d_0")

            async def first_arrived() -> bool:
                first.check()
                return len(target.delivered()) == 1

            await wait_until(first_arrived, timeout_s=20)
        # Stopped: 200 events are accepted meanwhile.
        for n in range(1, 201):
            await post_stripe(server.client, f"evt_d_{n}", f"pi_d_{n % 17}")
        assert len(target.received) == 1
        async with forwarding(server.settings, opts) as second:

            async def all_arrived() -> bool:
                second.check()
                return len({r.webhook_id for r in target.delivered()}) == 201

            await wait_until(all_arrived, timeout_s=60)
    events = by_event(target.delivered())
    assert set(events) == {f"evt_d_{n}" for n in range(201)}
    for event_id, copies in events.items():  # a repeat, if any, carries the same id
        assert {c.webhook_id for c in copies} == {webhook_id("stripe", event_id)}


@pytest.mark.parametrize(("draw", "factor"), [(0.0, 0.8), (0.5, 1.0), (0.9999, 1.2)])
async def test_the_schedule_is_kept_with_its_jitter_then_the_event_is_parked(
    doc: dict[str, object], database_url: str, draw: float, factor: float
) -> None:
    schedule = (0.5, 1.0, 1.5)
    async with (
        running_server(doc) as server,
        serving(Target(always(500))) as target,
        forwarding(server.settings, options(target.url, schedule=schedule), lambda: draw) as run,
    ):
        await post_stripe(server.client, "evt_sched_1")

        async def parked() -> bool:
            run.check()
            return run.counts.parked == 1

        await wait_until(parked, timeout_s=30)
    lines = [orjson.loads(line) for line in run.out.getvalue().splitlines()]
    expected = [round(d * factor, 3) for d in schedule]
    assert [x["retry_in_s"] for x in lines[:3]] == pytest.approx(expected, abs=0.002)
    assert [x["outcome"] for x in lines] == ["retry", "retry", "retry", "parked"]
    # The stream kept each delay: no attempt came before its time.
    times = [r.at_s for r in target.received]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert all(gap >= want - 0.05 for gap, want in zip(gaps, expected, strict=True)), gaps
    conn = await asyncpg.connect(database_url)
    try:
        row = await conn.fetchrow(
            "SELECT stage, error_class, attempts, error_message FROM dlq_webhooks"
        )
        assert await conn.fetchval("SELECT count(*) FROM forward_attempts") == 0
    finally:
        await conn.close()
    assert row is not None
    assert (row["stage"], row["error_class"], row["attempts"]) == (
        "forward:test",
        "FORWARD_ATTEMPTS_EXHAUSTED",
        4,
    )
    # The answer's text stays out: every role reads the message, a target may echo.
    assert row["error_message"] == (
        "HTTP 500 after 4 attempts; its answer had a body (2 bytes read, not kept)"
    )


async def test_a_message_the_forwarder_cannot_read_does_not_stop_it(
    doc: dict[str, object], nats_url: str
) -> None:
    """A message on the stream that no gateway wrote (its received-at unreadable) is
    parked (`test_forward_unreadable`); the events around it are delivered."""
    async with (
        running_server(doc) as server,
        serving(Target()) as target,
        forwarding(server.settings, options(target.url, name="odd")) as running,
    ):
        nc = await nats.connect(nats_url)
        try:
            await nc.jetstream().publish(
                "webhooks.stripe.payment_intent.succeeded",
                b"{}",
                headers={"Gateway-Provider": "stripe", "Gateway-Received-At": "yesterday"},
            )
        finally:
            await nc.close()
        await post_stripe(server.client, "evt_after_odd")

        async def delivered() -> bool:
            running.check()
            return len(target.delivered()) == 1

        await wait_until(delivered, timeout_s=20)
    assert target.delivered()[0].headers["gateway-event-id"] == "evt_after_odd"
