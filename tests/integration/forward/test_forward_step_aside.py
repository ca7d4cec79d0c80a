"""A forwarder whose database goes silent steps aside (issue 42, finding 5).

Two forwarders share the destination's consumer; one reaches PostgreSQL through the
fault proxy, which is black-holed under it. The target refuses (503) what the sick
forwarder sends while it has its database, so each attempt must record its failure: the
sick forwarder cannot, and must stop fetching, hand what it holds back at once (`nak`
without delay) and leave every event to the healthy forwarder, all of them delivered
while its own database is still silent; once the database answers again, it fetches
again. The retry schedule is a minute and `ack_wait` longer, so no message reaches the
healthy forwarder by a retry or the stream's own redelivery in time: only a hand-back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from chaos.proxy import FaultProxy
from gateway import settings as settings_mod
from gateway.core.forward.request import webhook_id
from gateway.forward.runner import Forwarder
from gateway.settings.forward import ForwardOptions
from gateway.wiring import forward as wiring_forward
from tests.support.forward_target import Received, Target, serving
from tests.support.forwarding import forwarding, options, post_stripe
from tests.support.gateway import config, running_server
from tests.support.services import wait_until
from tests.support.stepping_aside import recording, through

EVENTS = 12
#: Long enough that nothing comes back by a retry or redelivery while the test waits.
SLOW_S = 60.0


class RecordingForwarder(Forwarder):
    """The forwarder `gateway forward` builds, its fetches and answers recorded; every
    one made is listed in `made`, in order."""

    made: list[RecordingForwarder] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.seen = recording(self._consumer)
        RecordingForwarder.made.append(self)


@pytest.fixture
def recording_forwarders(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[RecordingForwarder]]:
    made: list[RecordingForwarder] = []
    monkeypatch.setattr(RecordingForwarder, "made", made)
    monkeypatch.setattr(wiring_forward, "Forwarder", RecordingForwarder)
    yield made


def destination(target: Target) -> ForwardOptions:
    """One named destination (one durable consumer for both), retried after a minute."""
    return options(target.url, name="aside", schedule=(SLOW_S,) * 3)


async def fetching(forwarders: list[RecordingForwarder], n: int) -> RecordingForwarder:
    """The `n`-th forwarder made, once it is fetching."""

    async def started() -> bool:
        return len(forwarders) > n and ("fetch",) in forwarders[n].seen.log

    await wait_until(started, timeout_s=30)
    return forwarders[n]


async def test_a_forwarder_on_a_silent_database_hands_its_messages_to_the_healthy_one(
    database_url: str, nats_url: str, recording_forwarders: list[RecordingForwarder]
) -> None:
    refusing = True

    def script(_: Received) -> tuple[int, dict[str, str], bytes]:
        return (503, {}, b"not yet") if refusing else (200, {}, b"ok")

    healthy_doc = config(database_url, nats_url)
    host = urlsplit(database_url)
    proxy = FaultProxy(host.hostname or "127.0.0.1", host.port or 5432)
    await proxy.start()
    sick_settings = settings_mod.parse(config(through(database_url, proxy), nats_url), env={})
    ids = [f"evt_fwd_aside_{n}" for n in range(EVENTS + 3)]
    try:
        async with (
            running_server(healthy_doc) as server,
            serving(Target(script=script)) as target,
            forwarding(sick_settings, destination(target)) as sick_run,
        ):
            sick = await fetching(recording_forwarders, 0)
            # 1. The sick forwarder alone, its database silent from now on: it takes the
            # events, is refused, and cannot record the failures.
            await proxy.set_blackhole(True)
            for n, event_id in enumerate(ids[:EVENTS]):
                await post_stripe(server.client, event_id, payment_intent=f"pi_aside_{n}")

            async def stepped_aside() -> bool:
                sick_run.check()
                return sick.aside.watch.stepped_aside > 0

            await wait_until(stepped_aside, timeout_s=30)
            assert sick.seen.fetched > 0
            assert target.received, "the sick forwarder sent nothing before stepping aside"
            refusing = False
            # 2. The healthy forwarder joins; every event is delivered while the sick
            # forwarder's database is still black-holed.
            async with forwarding(server.settings, destination(target)) as healthy_run:
                healthy = await fetching(recording_forwarders, 1)
                wanted = {webhook_id("stripe", e) for e in ids[:EVENTS]}

                async def all_delivered() -> bool:
                    healthy_run.check()
                    # The target answers 200 before the forwarder acks and counts it.
                    counted = healthy.counts.delivered + sick.counts.delivered
                    received = {r.webhook_id for r in target.delivered()}
                    return received == wanted and counted >= EVENTS

                await wait_until(all_delivered, timeout_s=45, interval_s=0.1)
                assert proxy.blackhole
                log = list(sick.seen.log)
                # An attempt already on the wire when the sick forwarder stepped aside
                # may still be accepted (the target stopped refusing meanwhile) and
                # acked: a loaded machine makes that window wide. It starts no other.
                assert healthy.counts.delivered + sick.counts.delivered == EVENTS
                assert sick.counts.delivered < EVENTS
                # What else the sick forwarder took it handed back at once.
                answers = sick.seen.answers()
                handed_back = [a for a in answers if a != ("ack",)]
                assert handed_back, "the sick forwarder never handed its messages back"
                assert set(handed_back) == {("nak", 0.0)}, answers
                assert len(answers) - len(handed_back) == sick.counts.delivered, answers
                assert len(answers) >= sick.seen.fetched
                # It stopped fetching once it had handed them back.
                first_back = log.index(("nak", 0.0))
                assert ("fetch",) not in log[first_back:], log
                assert not sick.aside.serving()
                # 3. Its database answers again: it fetches again, and both deliver.
                await proxy.set_blackhole(False)
                await wait_until(lambda: asyncio.sleep(0, sick.aside.serving()), timeout_s=30)
                fetches = len(sick.seen.log)

                async def sick_fetching() -> bool:
                    return ("fetch",) in sick.seen.log[fetches:]

                await wait_until(sick_fetching, timeout_s=10)
                for n, event_id in enumerate(ids[EVENTS:], start=EVENTS):
                    await post_stripe(server.client, event_id, payment_intent=f"pi_aside_{n}")
                every = {webhook_id("stripe", e) for e in ids}

                async def all_of_them() -> bool:
                    return {r.webhook_id for r in target.delivered()} == every

                await wait_until(all_of_them, timeout_s=45, interval_s=0.1)
    finally:
        await proxy.close()
